//! Profiles of TorchScript modules: stored under the module file, the device and the
//! settings that change what a batch costs, found when a variant loads, or measured then
//! when its config asks.

use std::path::Path;

use modelless_policy_abi::{Profile, ProfileKey};
use serde::Serialize;

use super::measure::{ProfileOptions, profile_model};
use super::memory::memory_probe;
use super::onnx::store_beside;
use super::store::profile_key;
use crate::backend::Device;
use crate::backend::torchscript::{TorchScriptConfig, factory};
use crate::error::Error;

#[derive(Serialize)]
struct TorchScriptProfileSettings<'a> {
    torchscript: &'a TorchScriptConfig,
    max_batch_size: usize,
}

/// The key of a profile of the TorchScript module at `path` run with these settings
/// on `device`.
pub fn torchscript_profile_key(
    path: &Path,
    device: Device,
    config: &TorchScriptConfig,
    max_batch_size: usize,
) -> Result<ProfileKey, Error> {
    let settings = TorchScriptProfileSettings { torchscript: config, max_batch_size };
    profile_key(path, &device.name(), &settings)
        .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))
}

/// The profile of the TorchScript module `name` at `path` on `device`: the stored one,
/// or, when `measure` is set and none is stored, one measured now (and stored).
pub fn torchscript_profile(
    name: &str,
    path: &Path,
    device: Device,
    config: &TorchScriptConfig,
    max_batch_size: usize,
    measure: bool,
) -> Result<Option<Profile>, Error> {
    let options = ProfileOptions::new(max_batch_size);
    let key = torchscript_profile_key(path, device, config, max_batch_size)?;
    let store = store_beside(path);
    if !measure {
        return Ok(store.load(name, &key));
    }
    let factory = factory(path.to_path_buf(), config.clone(), device, false);
    tracing::info!(model = name, %device, "no stored profile: profiling");
    profile_model(name, factory, key, &store, &options, memory_probe(device).as_ref(), &mut |_| {}).map(Some)
}
