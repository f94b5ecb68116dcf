//! The modelless engine: model backends on their own threads, dynamic batching in
//! front of them, and the registry of loaded models.
//!
//! Applications depend on the `modelless` crate, which wraps this one; depend on this
//! crate directly to write a backend or to build on the engine's parts.

mod admission;
pub mod backend;
pub mod batching;
pub mod error;
pub mod model;
pub mod registry;
pub mod request;
pub mod tensor;

pub use backend::{Backend, BackendFactory, Batch, BatchOutput, ModelMetadata, TensorSpec};
pub use batching::BatchingConfig;
pub use error::{BackendError, Error};
pub use model::{Model, ModelConfig, Ticket};
pub use registry::Registry;
pub use request::{Inputs, Output, Timings};
pub use tensor::{DType, Element, Tensor, TensorData};
