//! Integration tests of the public API: batching and failure handling with fake
//! backends, and real ONNX Runtime sessions on the project's generated models
//! (`scripts/setup.sh` makes them; `make test` runs it first), and the policy modules
//! it builds, run through the Wasm host and compared with the same policies called
//! natively; variants placed on devices the machine lacks; TorchScript variants on
//! libtorch (feature `tch`); the KServe V2 endpoints against the real Python clients;
//! the `modelless serve` binary under a barrage of hostile clients; `modelless tune`
//! searching, storing and writing a setting; a fleet of `modelless serve` replicas
//! behind nginx losing one mid-run; the deployment manifests validated offline; the
//! container image built and run with podman; and the README's examples built as an application
//! outside the workspace.

mod common;
#[cfg(feature = "cli")]
mod container;
mod deploy;
mod devices;
#[cfg(feature = "cli")]
mod embedding;
mod fake_backend;
#[cfg(feature = "cli")]
mod fleet;
mod gpu;
#[cfg(feature = "cli")]
mod hostile_clients;
#[cfg(feature = "server")]
mod images;
#[cfg(feature = "server")]
mod kserve;
mod load;
mod onnx;
mod policies;
mod pretrained;
mod signature;
mod simulate;
mod tasks;
#[cfg(feature = "tch")]
mod torchscript;
#[cfg(feature = "cli")]
mod tune;
