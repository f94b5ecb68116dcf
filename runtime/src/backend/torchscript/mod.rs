//! `TchBackend`: TorchScript modules on libtorch (the `tch` crate, feature `tch`), on
//! the CPU or an NVIDIA GPU, behind the same [`Backend`](super::Backend) trait as ONNX Runtime's
//! sessions, so batching, profiling and hot swaps work alike.
//!
//! A TorchScript file does not say what its `forward` takes, so, as for Triton's
//! PyTorch backend, the variant's config declares its inputs and outputs in order
//! (names are what requests and answers use; shapes with `-1` where a dimension is
//! open, the batch dimension first). libtorch comes from PyPI's `torch==2.13.0`
//! (`scripts/setup/torch.sh`); its `torch/lib` must be on the loader's path.

#[cfg(feature = "tch")]
mod cuda_library;
#[cfg(feature = "tch")]
mod session;

use std::path::PathBuf;
#[cfg(not(feature = "tch"))]
use std::sync::Arc;

use serde::{Deserialize, Serialize};
#[cfg(feature = "tch")]
pub use session::TchBackend;

use super::{BackendFactory, Device};
#[cfg(not(feature = "tch"))]
use crate::error::BackendError;

/// A factory of sessions of the TorchScript module at `path` on `device`; where the
/// device cannot be had, on the CPU if `fallback_to_cpu`, else none. In a build
/// without the `tch` feature, every load fails saying so.
pub fn factory(path: PathBuf, config: TorchScriptConfig, device: Device, fallback_to_cpu: bool) -> BackendFactory {
    #[cfg(feature = "tch")]
    return TchBackend::factory(path, config, device, fallback_to_cpu);
    #[cfg(not(feature = "tch"))]
    {
        let _ = (config, device, fallback_to_cpu);
        Arc::new(move || Err(BackendError::NotBuiltWith { what: "TorchScript", feature: "tch", path: path.clone() }))
    }
}

/// The device a TorchScript variant configured for `device` is profiled and loaded
/// on: the CPU where it asks for a GPU libtorch does not find and may fall back.
pub fn device_to_load(device: Device, fallback_to_cpu: bool) -> Device {
    #[cfg(feature = "tch")]
    let missing = device.cuda_index().is_some_and(|index| i64::from(index) >= cuda_library::cuda_device_count());
    #[cfg(not(feature = "tch"))]
    let missing = false; // nothing loads without the feature; the load says so
    if missing && fallback_to_cpu { Device::Cpu } else { device }
}

pub use crate::backend::TensorDeclaration;

/// What a TorchScript variant takes and gives, and how its module runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TorchScriptConfig {
    /// `forward`'s arguments, in order.
    pub inputs: Vec<TensorDeclaration>,
    /// What `forward` returns: one tensor, or a tuple or list of them, in this order.
    pub outputs: Vec<TensorDeclaration>,
    /// libtorch's intra-op threads (process-wide, set by the first module loaded that
    /// names it); libtorch's default (one per core) otherwise.
    #[serde(default)]
    pub intra_op_threads: Option<usize>,
}

impl TorchScriptConfig {
    /// A config with these inputs and outputs.
    pub fn new(inputs: Vec<TensorDeclaration>, outputs: Vec<TensorDeclaration>) -> Self {
        TorchScriptConfig { inputs, outputs, intra_op_threads: None }
    }
}
