//! The modelless engine: model backends on their own threads, dynamic batching in
//! front of them, and the registry of loaded models and of tasks, whose variants are
//! switched while requests flow.
//!
//! Applications depend on the `modelless` crate, which wraps this one; depend on this
//! crate directly to write a backend or to build on the engine's parts.

mod admission;
mod answered;
pub mod backend;
pub mod batching;
mod classify;
mod error;
#[cfg(any(test, feature = "test-util"))]
pub mod fuzzing;
#[cfg(feature = "grpc")]
pub mod kserve;
pub mod metrics;
mod model;
#[cfg(feature = "ocr")]
pub mod ocr;
pub mod policy;
pub mod preprocess;
pub mod profile;
pub mod registry;
mod request;
mod signature;
pub mod source;
pub mod stats;
mod tensor;
pub mod trace;
pub mod warmup;

pub use answered::Outcome;
pub use backend::{Backend, BackendFactory, Batch, BatchOutput, ModelMetadata, TensorSpec};
pub use batching::BatchingConfig;
pub use classify::Class;
pub use error::{BackendError, Cause, Error, ErrorKind, FetchError, SearchedPlace};
pub use model::{Admission, DrainHandle, LoadPhase, MAX_INSTANCES, Model, StartOptions, Ticket};
/// The policy ABI's types and guest kit, as this runtime speaks them.
pub use modelless_policy_abi as policy_abi;
pub use registry::{
    Device, FindProfile, MakeBackend, ModelConfig, ModelFormat, ProfileLookup, ProfileMode, Registry, SwitchReport,
    Task, TaskConfig, TaskStatus, VariantConfig, VariantState, VariantStatus, VersionStatus,
};
pub use request::Priority;
pub use request::{InferOptions, Inputs, Output, Slo, Timings};
pub use signature::{SignatureConfig, SignatureMismatch, TensorDeclaration, TensorMaps};
pub use tensor::{DType, Element, Tensor, TensorData};
pub use warmup::WarmupConfig;

// The unit tests' fuzz targets assert on the largest allocation a decoder makes.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: fuzzing::PeakAllocator = fuzzing::PeakAllocator;
