//! Integration tests of the public API: batching and failure handling with fake
//! backends, and real ONNX Runtime sessions on the project's generated models
//! (`scripts/setup/base.sh` makes them; `make test` runs it first), and the policy modules
//! it builds, run through the Wasm host and compared with the same policies called
//! natively; variants placed on devices the machine lacks; TorchScript variants on
//! libtorch (feature `tch`); the KServe V2 endpoints against the real Python clients;
//! and the deployment manifests validated offline. The command line and the lab's
//! tools are tested in `modelless-lab`.

// Tests may unwrap: a failure is the test failing, with its message.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod async_calls;
mod common;
mod deploy;
mod devices;
mod efficientnet;
mod fake_backend;
mod gpu;
#[cfg(feature = "server")]
mod images;
#[cfg(feature = "server")]
mod kserve;
#[cfg(feature = "ocr")]
mod ocr;
#[cfg(all(feature = "ocr", feature = "server"))]
mod ocr_served;
mod onnx;
mod policies;
mod pretrained;
mod readme;
mod signature;
mod tasks;
#[cfg(feature = "tch")]
mod torchscript;
