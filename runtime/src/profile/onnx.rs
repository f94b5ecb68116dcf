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
    /// Whether the shared pool's threads spin, for a session that runs on it: a pool
    /// that sleeps between operators runs small models slower.
    #[serde(skip_serializing_if = "Option::is_none")]
    shared_pool_spinning: Option<bool>,
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
        shared_pool_spinning: if onnx.intra_op_threads.is_none() { env.spinning } else { None },
        max_batch_size,
        memory_budget_mib: options.sweep.memory_budget_bytes.map(|b| b >> 20),
    };
    profile_key(path, &device.name(), &settings).map_err(|e| Error::io("read", path, e))
}

/// The store of profiles of the models in `path`'s folder.
pub fn store_beside(path: &Path) -> ProfileStore {
    ProfileStore::new(path.parent().unwrap_or(Path::new(".")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_pools_spinning_is_part_of_the_key_of_a_session_that_runs_on_it() {
        let model = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(model.path(), b"model bytes").unwrap();
        let key = |env: &OrtEnvironmentConfig, onnx: &OrtSessionConfig| {
            ort_profile_key(model.path(), Device::Cpu, env, onnx, 8, &ProfileOptions::new(8)).unwrap()
        };
        let (spinning, sleeping) =
            (OrtEnvironmentConfig::default(), OrtEnvironmentConfig::default().with_spinning(false));
        let shared = OrtSessionConfig::default();
        assert_ne!(key(&spinning, &shared), key(&sleeping, &shared));
        assert!(!key(&spinning, &shared).settings.contains("shared_pool"), "keys stored before stay valid");
        let own_pool = OrtSessionConfig { intra_op_threads: Some(2), ..OrtSessionConfig::default() };
        assert_eq!(key(&spinning, &own_pool), key(&sleeping, &own_pool), "its own pool's setting is the session's");
    }
}
