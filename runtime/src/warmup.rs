//! Warm-up: the first run of every batch size is an outlier (buffers grow, kernels are
//! chosen), so a model runs each batch size it may form once before it is routed to.
//! It runs on the loader thread, at its low priority, so that warming a variant beside
//! one that serves takes only the cores the serving one leaves idle.

use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::backend::{Backend, Batch, Device, ModelMetadata};
use crate::error::BackendError;
use crate::tensor::Tensor;

/// Which batches to run before a model takes requests.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WarmupConfig {
    /// Whether to warm up at all.
    pub enabled: bool,
    /// Batch sizes to run, in this order; by default what the backend needs to be warm
    /// at every size up to `max_batch_size` (every size, largest first, unless the
    /// backend knows better; ONNX Runtime runs each size down to 1 and back up, so that
    /// its memory arena has grown for all of them).
    pub batch_sizes: Option<Vec<usize>>,
    /// No batch larger than this is warmed up: for a caller that knows larger ones
    /// cannot form (a benchmark at a fixed concurrency).
    pub up_to_batch: Option<usize>,
    /// Pad every batch with rows of zeros up to the next size warmed up, so that no
    /// batch formed under load meets the first run of its shape (as TensorRT's
    /// optimisation profiles do). On a GPU each new shape sets cuDNN searching for its
    /// convolution algorithms while the batch's requests wait; on a CPU a new shape
    /// costs little beyond what the arena warm-up covers, and padding only adds rows.
    /// `None`: pad on a GPU, not on a CPU.
    pub pad_to_warmed: Option<bool>,
}

impl Default for WarmupConfig {
    fn default() -> Self {
        WarmupConfig { enabled: true, batch_sizes: None, up_to_batch: None, pad_to_warmed: None }
    }
}

impl WarmupConfig {
    /// No warm-up.
    pub fn disabled() -> Self {
        WarmupConfig { enabled: false, batch_sizes: None, up_to_batch: None, pad_to_warmed: None }
    }

    /// Sets whether batches are padded to the next size warmed up.
    pub fn with_pad_to_warmed(mut self, pad: bool) -> Self {
        self.pad_to_warmed = Some(pad);
        self
    }

    /// The sizes batches of a model on `device` are padded up to, ascending: those
    /// warmed up (`warmed`), where padding is on; none where it is off.
    pub(crate) fn pad_sizes(&self, device: Device, warmed: &[usize]) -> Vec<usize> {
        if !self.enabled || !self.pad_to_warmed.unwrap_or(device.cuda_index().is_some()) {
            return Vec::new();
        }
        let mut sizes: Vec<usize> = warmed.iter().copied().filter(|&b| b > 0).collect();
        sizes.sort_unstable();
        sizes.dedup();
        sizes
    }

    /// Warms up these batch sizes only.
    pub fn with_batch_sizes(mut self, sizes: impl Into<Vec<usize>>) -> Self {
        self.batch_sizes = Some(sizes.into());
        self
    }

    /// Warms up no batch larger than `rows`.
    pub fn with_up_to_batch(mut self, rows: usize) -> Self {
        self.up_to_batch = Some(rows);
        self
    }
}

/// Runs zero-filled batches of each configured size; returns how long it took, or
/// `None` when warm-up is off or impossible (an input with an open dimension other
/// than the batch's has no size to warm up at).
pub(crate) fn warm_up(
    backend: &mut dyn Backend,
    metadata: &ModelMetadata,
    max_batch_size: usize,
    config: &WarmupConfig,
) -> Result<Option<Duration>, BackendError> {
    if !config.enabled {
        return Ok(None);
    }
    let sizes = sizes_to_warm(backend, metadata, max_batch_size, config);
    let start = Instant::now();
    for batch in sizes {
        let Some(inputs) = zero_batch(metadata, batch) else {
            tracing::warn!("no warm-up: an input has an open dimension besides the batch");
            return Ok(None);
        };
        backend.infer(Batch { inputs })?;
    }
    Ok(Some(start.elapsed()))
}

/// The batch sizes [`warm_up`] runs, in its order; `[0]` for a model whose dimension 0
/// is fixed (it is used as it is).
pub(crate) fn sizes_to_warm(
    backend: &dyn Backend,
    metadata: &ModelMetadata,
    max_batch_size: usize,
    config: &WarmupConfig,
) -> Vec<usize> {
    let max_batch_size = config.up_to_batch.map_or(max_batch_size, |rows| rows.clamp(1, max_batch_size.max(1)));
    match (&config.batch_sizes, metadata.dynamic_batch()) {
        (_, false) => vec![0],
        (Some(sizes), true) => sizes.iter().copied().filter(|&b| b >= 1 && b <= max_batch_size).collect(),
        (None, true) => backend.warmup_batch_sizes(max_batch_size),
    }
}

/// Zero-filled inputs of `batch` rows (a fixed dimension 0 is kept as it is); `None`
/// when an input has an open dimension besides the batch, which has no size to use.
pub fn zero_batch(metadata: &ModelMetadata, batch: usize) -> Option<Vec<Tensor>> {
    let dynamic = metadata.dynamic_batch();
    metadata
        .inputs
        .iter()
        .map(|spec| {
            let shape: Option<Vec<usize>> =
                spec.shape.iter().enumerate().map(|(i, d)| if i == 0 && dynamic { Some(batch) } else { *d }).collect();
            shape.map(|shape| Tensor::zeros(spec.dtype, shape))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};

    fn fake(config: FakeConfig) -> (Box<dyn Backend + Send>, BatchLog) {
        let log = BatchLog::default();
        let backend = FakeBackend::factory(config, log.clone())().unwrap();
        (backend, log)
    }

    #[test]
    fn runs_every_batch_size_largest_first_by_default() {
        let (mut backend, log) = fake(FakeConfig::default());
        let metadata = backend.metadata().clone();
        assert!(warm_up(backend.as_mut(), &metadata, 4, &WarmupConfig::default()).unwrap().is_some());
        assert_eq!(log.sizes(), vec![4, 3, 2, 1]);
    }

    #[test]
    fn runs_only_the_sizes_asked_for_that_fit() {
        let (mut backend, log) = fake(FakeConfig::default());
        let metadata = backend.metadata().clone();
        let config = WarmupConfig::default().with_batch_sizes([1, 8, 16]);
        warm_up(backend.as_mut(), &metadata, 8, &config).unwrap();
        assert_eq!(log.sizes(), vec![1, 8]);
    }

    #[test]
    fn a_cap_keeps_larger_batches_out_of_the_warm_up() {
        let (mut backend, log) = fake(FakeConfig::default());
        let metadata = backend.metadata().clone();
        warm_up(backend.as_mut(), &metadata, 8, &WarmupConfig::default().with_up_to_batch(3)).unwrap();
        assert_eq!(log.sizes(), vec![3, 2, 1]);
        let asked = WarmupConfig::default().with_batch_sizes([1, 2, 4, 8]).with_up_to_batch(4);
        warm_up(backend.as_mut(), &metadata, 8, &asked).unwrap();
        assert_eq!(log.sizes(), vec![3, 2, 1, 1, 2, 4]);
    }

    #[test]
    fn batches_are_padded_to_warmed_sizes_on_a_gpu_unless_told_otherwise() {
        let warmed = [4, 3, 2, 1, 2, 3, 4];
        let auto = WarmupConfig::default();
        assert_eq!(auto.pad_sizes(Device::Cuda(0), &warmed), vec![1, 2, 3, 4]);
        assert!(auto.pad_sizes(Device::Cpu, &warmed).is_empty());
        assert_eq!(auto.clone().with_pad_to_warmed(true).pad_sizes(Device::Cpu, &warmed), vec![1, 2, 3, 4]);
        assert!(auto.with_pad_to_warmed(false).pad_sizes(Device::Cuda(0), &warmed).is_empty());
        let off = WarmupConfig::disabled().with_pad_to_warmed(true);
        assert!(off.pad_sizes(Device::Cuda(0), &warmed).is_empty(), "nothing warmed, nothing to pad to");
        let fixed = WarmupConfig::default().with_pad_to_warmed(true);
        assert!(fixed.pad_sizes(Device::Cpu, &[0]).is_empty(), "a fixed dimension 0 pads to nothing");
    }

    #[test]
    fn a_fixed_batch_model_warms_up_at_its_own_shape_and_off_means_off() {
        let (mut backend, log) = fake(FakeConfig { dynamic_batch: false, ..FakeConfig::default() });
        let metadata = backend.metadata().clone();
        warm_up(backend.as_mut(), &metadata, 1, &WarmupConfig::default()).unwrap();
        assert_eq!(log.sizes(), vec![1]);
        assert!(warm_up(backend.as_mut(), &metadata, 1, &WarmupConfig::disabled()).unwrap().is_none());
        assert_eq!(log.sizes(), vec![1]);
    }
}
