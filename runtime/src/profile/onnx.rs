//! The key profiles of ONNX Runtime models are stored under: the model file, the
//! device, and the settings that change what a batch costs.

use std::path::Path;

use modelless_policy_abi::ProfileKey;
use serde::Serialize;

use super::measure::ProfileOptions;
use super::store::{ProfileStore, profile_key};
use crate::backend::Device;
use crate::backend::onnx::{OrtEnvironmentConfig, OrtSessionConfig};
use crate::error::Error;

/// The settings a profile of an ONNX Runtime model holds for. How it was measured (warm
/// runs, first-run sessions) is not among them: a profile measured with more runs is
/// still the profile of the same thing.
#[derive(Serialize)]
struct OrtProfileSettings<'a> {
    onnx: &'a OrtSessionConfig,
    intra_op_threads: usize,
    max_batch_size: usize,
    memory_budget_mib: Option<u64>,
}

/// The key of a profile of the ONNX model at `path` run with these settings on `device`.
pub fn ort_profile_key(
    path: &Path,
    device: Device,
    env: &OrtEnvironmentConfig,
    onnx: &OrtSessionConfig,
    max_batch_size: usize,
    options: &ProfileOptions,
) -> Result<ProfileKey, Error> {
    let settings = OrtProfileSettings {
        onnx,
        intra_op_threads: onnx.intra_op_threads.unwrap_or(env.intra_op_threads).max(1),
        max_batch_size,
        memory_budget_mib: options.sweep.memory_budget_bytes.map(|b| b >> 20),
    };
    profile_key(path, &device.name(), &settings)
        .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))
}

/// The store of profiles of the models in `path`'s folder.
pub fn store_beside(path: &Path) -> ProfileStore {
    ProfileStore::new(path.parent().unwrap_or(Path::new(".")))
}
