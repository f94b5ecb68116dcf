//! Backends run batches on one model session. Each backend instance serves from its own
//! OS thread (never on an async executor); it is created and warmed up on a loader
//! thread of lower priority, then moved to that thread, hence `Send`.

mod bound_runs;
mod cuda_options;
mod declaration;
mod device;
#[cfg(any(test, feature = "test-util"))]
pub mod fake;
#[cfg(feature = "tch")]
mod freed_memory;
pub mod onnx;
pub mod onnx_library;
mod ort_values;
mod staging;
pub mod torchscript;
pub(crate) mod turns;

use std::sync::Arc;

pub use cuda_options::{ConvAlgoSearch, CudaOptions};
pub use declaration::TensorDeclaration;
pub use device::Device;

use crate::error::BackendError;
use crate::tensor::{DType, Tensor};

/// One input or output of a model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorSpec {
    /// Name in the model.
    pub name: String,
    /// Element type.
    pub dtype: DType,
    /// Dimensions; `None` where the model leaves the size open.
    pub shape: Vec<Option<usize>>,
}

impl TensorSpec {
    /// A spec from its parts.
    pub fn new(name: impl Into<String>, dtype: DType, shape: impl Into<Vec<Option<usize>>>) -> Self {
        TensorSpec { name: name.into(), dtype, shape: shape.into() }
    }

    /// The shape as people write it, `N` for an open dimension: `[N, 3, 224, 224]`.
    pub fn shape_display(&self) -> String {
        let dims: Vec<String> =
            self.shape.iter().map(|d| d.map_or_else(|| "N".to_string(), |n| n.to_string())).collect();
        format!("[{}]", dims.join(", "))
    }
}

/// What a model takes and gives, read from its session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelMetadata {
    /// Inputs, in the order batches carry them.
    pub inputs: Vec<TensorSpec>,
    /// Outputs, in the order batch outputs carry them.
    pub outputs: Vec<TensorSpec>,
}

impl ModelMetadata {
    /// Whether every input and output leaves dimension 0 open, so requests can be
    /// batched along it.
    pub fn dynamic_batch(&self) -> bool {
        self.inputs.iter().chain(&self.outputs).all(|t| matches!(t.shape.first(), Some(None)))
    }
}

/// Inputs of one run, in the order of [`ModelMetadata::inputs`], all with the same
/// dimension 0.
#[derive(Debug)]
pub struct Batch {
    /// The tensors.
    pub inputs: Vec<Tensor>,
}

/// A batch's inputs before they are joined: per input, in the order of
/// [`ModelMetadata::inputs`], its requests' tensors in the batch's order, to be
/// followed by `pad_rows` rows of zeros.
#[derive(Debug)]
pub struct BatchParts {
    /// Per input, the tensors to join along dimension 0.
    pub columns: Vec<Vec<Tensor>>,
    /// Rows of zeros after the requests' rows.
    pub pad_rows: usize,
}

impl BatchParts {
    /// The batch they make, joined in fresh memory; an input mismatch where a column's
    /// tensors disagree on dtype or trailing dimensions.
    pub fn join(self) -> Result<Batch, BackendError> {
        let pad_rows = self.pad_rows;
        let inputs = self.columns.iter().map(|column| Tensor::concat_rows_into(column, pad_rows, None));
        Ok(Batch { inputs: inputs.collect::<Option<_>>().ok_or_else(parts_disagree)? })
    }
}

/// The error of a batch whose requests' tensors cannot be joined.
pub(crate) fn parts_disagree() -> BackendError {
    BackendError::InputMismatch("requests of one batch disagree on shapes".into())
}

/// Outputs of one run, in the order of [`ModelMetadata::outputs`].
#[derive(Debug)]
pub struct BatchOutput {
    /// The tensors.
    pub outputs: Vec<Tensor>,
}

impl BatchOutput {
    /// The outputs of a run.
    pub fn new(outputs: Vec<Tensor>) -> Self {
        BatchOutput { outputs }
    }
}

/// A model session that runs batches. Small and synchronous on purpose: the runtime
/// owns threading, batching and timing around it.
pub trait Backend {
    /// Inputs and outputs of the model.
    fn metadata(&self) -> &ModelMetadata;

    /// Runs one batch.
    fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError>;

    /// Whether it copies every batch into memory of its own before the run (pinned
    /// staging for a GPU). The worker then hands it batches unjoined, through
    /// [`Backend::infer_parts`], to be joined there: each row is copied once.
    fn joins_batches(&self) -> bool {
        false
    }

    /// Runs a batch given unjoined; by default joined in fresh memory, then run.
    fn infer_parts(&mut self, parts: BatchParts) -> Result<BatchOutput, BackendError> {
        self.infer(parts.join()?)
    }

    /// Batch sizes to run before serving so that no request meets a first-run outlier,
    /// largest first. By default every size up to `max_batch_size`; a backend whose
    /// smaller batches reuse what the largest one set up may need fewer.
    fn warmup_batch_sizes(&self, max_batch_size: usize) -> Vec<usize> {
        (1..=max_batch_size).rev().collect()
    }

    /// Where it runs.
    fn device(&self) -> Device {
        Device::Cpu
    }

    /// Whether its runs take process-wide turns (`RUN_TURNS`). The worker then
    /// takes the turn before it forms the batch, so that requests arriving while the
    /// batch waits run in it rather than after it.
    fn takes_turns(&self) -> bool {
        false
    }
}

/// Creates one backend instance; called once per instance, on its loader thread.
pub type BackendFactory = Arc<dyn Fn() -> Result<Box<dyn Backend + Send>, BackendError> + Send + Sync>;

/// `load` on `device`; where the device cannot be had and `fallback_to_cpu`, `load` on
/// the CPU instead.
pub(crate) fn load_with_fallback<B>(
    device: Device,
    fallback_to_cpu: bool,
    model: &std::path::Path,
    load: impl Fn(Device) -> Result<B, BackendError>,
) -> Result<B, BackendError> {
    match load(device) {
        Err(BackendError::DeviceUnavailable { device, reason }) if fallback_to_cpu => {
            tracing::warn!(model = %model.display(), %device, %reason, "loading on the CPU instead");
            load(Device::Cpu)
        }
        loaded => loaded,
    }
}
