//! Profiles of ONNX Runtime models: the key they are stored under (the model file, the
//! device, and the settings that change what a batch costs), found when a variant
//! loads, or measured then when its config asks.

use std::path::Path;

use modelless_policy_abi::{Profile, ProfileKey};
use serde::Serialize;

use super::measure::{ProfileOptions, profile_model};
use super::memory::memory_probe;
use super::store::{ProfileStore, profile_key};
use crate::backend::Device;
use crate::backend::onnx::{OrtBackend, OrtEnvironmentConfig, OrtSessionConfig};
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

/// The profile of model `name` at `path` on `device`: the stored one for its key, or,
/// when `measure` is set and none is stored, one measured now (and stored). `None` when
/// there is none and none is to be measured.
pub fn ort_profile(
    name: &str,
    path: &Path,
    device: Device,
    env: &OrtEnvironmentConfig,
    onnx: &OrtSessionConfig,
    max_batch_size: usize,
    measure: bool,
) -> Result<Option<Profile>, Error> {
    let options = ProfileOptions::new(max_batch_size);
    let key = ort_profile_key(path, device, env, onnx, max_batch_size, &options)?;
    let store = store_beside(path);
    if !measure {
        return Ok(store.load(name, &key));
    }
    let factory = OrtBackend::factory_on(env.clone(), path.to_path_buf(), onnx.clone(), device, false);
    tracing::info!(model = name, %device, "no stored profile: profiling");
    profile_model(name, factory, key, &store, &options, memory_probe(device).as_ref(), &mut |_| {}).map(Some)
}
