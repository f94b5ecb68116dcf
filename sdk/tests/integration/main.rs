//! Integration tests of the public API: batching and failure handling with fake
//! backends, and real ONNX Runtime sessions on the project's generated models
//! (`scripts/setup.sh` makes them; `make test` runs it first), and the policy modules
//! it builds, run through the Wasm host and compared with the same policies called
//! natively.

mod common;
mod fake_backend;
mod onnx;
mod policies;
mod tasks;
