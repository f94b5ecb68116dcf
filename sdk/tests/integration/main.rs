//! Integration tests of the public API: batching and failure handling with fake
//! backends, and real ONNX Runtime sessions on the project's generated models
//! (`scripts/setup.sh` makes them; `make test` runs it first).

mod common;
mod fake_backend;
mod onnx;
mod tasks;
