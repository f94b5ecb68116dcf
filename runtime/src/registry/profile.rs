//! A task variant's profile: the key it is stored under (the model file, the device its
//! sessions load on, and the settings that change what a batch costs), found when the
//! variant loads, or measured then when its config asks.

use std::path::Path;

use modelless_policy_abi::{Profile, ProfileKey};
use serde::Serialize;

use super::{ModelFormat, ProfileLookup, ProfileMode, VariantConfig};
use crate::backend::onnx::OrtEnvironmentConfig;
use crate::backend::torchscript::TorchScriptConfig;
use crate::backend::{Backend, BackendFactory, Batch, BatchOutput, Device, ModelMetadata};
use crate::error::{BackendError, Error};
use crate::profile::{ProfileOptions, memory_probe, ort_profile_key, profile_key, profile_model, store_beside};

/// The settings a profile of a TorchScript module holds for.
#[derive(Serialize)]
struct TorchScriptProfileSettings<'a> {
    torchscript: &'a TorchScriptConfig,
    max_batch_size: usize,
    memory_budget_mib: Option<u64>,
}

/// The key of a profile of `variant`'s model file at `path` measured on `device`.
pub fn variant_profile_key(
    variant: &VariantConfig,
    path: &Path,
    device: Device,
    onnxruntime: &OrtEnvironmentConfig,
    options: &ProfileOptions,
) -> Result<ProfileKey, Error> {
    let max_batch_size = variant.batching.max_batch_size;
    match variant.format {
        ModelFormat::Onnx => ort_profile_key(path, device, onnxruntime, &variant.onnx, max_batch_size, options),
        ModelFormat::Torchscript => {
            let settings = TorchScriptProfileSettings {
                torchscript: &variant.torchscript,
                max_batch_size,
                memory_budget_mib: options.sweep.memory_budget_bytes.map(|b| b >> 20),
            };
            profile_key(path, &device.name(), &settings).map_err(|e| Error::io("read", path, e))
        }
    }
}

/// The profile of `variant`'s version at `path` on the device it loads on: the stored
/// one for its key, or, where its config says `measure`, `lookup` allows it and none
/// is stored, one measured now (and stored). `None` when there is none and none is to
/// be measured.
pub fn variant_profile(
    variant: &VariantConfig,
    path: &Path,
    onnxruntime: &OrtEnvironmentConfig,
    lookup: ProfileLookup,
) -> Result<Option<Profile>, Error> {
    let measure = match variant.profile {
        ProfileMode::Off => return Ok(None),
        ProfileMode::Stored => false,
        ProfileMode::Measure => lookup == ProfileLookup::AsConfigured,
    };
    let device = variant.device_to_load(onnxruntime);
    let mut options = ProfileOptions::new(variant.batching.max_batch_size);
    options.sweep.memory_budget_bytes = variant.memory_budget_mib.map(|mib| mib << 20);
    let key = variant_profile_key(variant, path, device, onnxruntime, &options)?;
    let store = store_beside(path);
    if !measure {
        return Ok(store.load(&variant.name, &key));
    }
    let factory = profiling_factory(&variant.clone().with_device(device, false), path, onnxruntime);
    tracing::info!(model = %variant.name, %device, "no stored profile: profiling");
    profile_model(&variant.name, factory, key, &store, &options, memory_probe(device).as_ref(), &mut |_| {}).map(Some)
}

/// The backends a profile of `variant`'s model at `path` measures: its own, with the
/// open sides of its image input fixed at a typical image's size where its
/// preprocessing has one (a text detector takes pages of any size).
pub fn profiling_factory(variant: &VariantConfig, path: &Path, onnxruntime: &OrtEnvironmentConfig) -> BackendFactory {
    let factory = variant.backend_factory(onnxruntime, path);
    match &variant.preprocess {
        Some(preprocess) => match preprocess.typical_size() {
            Some((width, height)) => {
                at_typical_size(factory, preprocess.input.clone(), preprocess.spatial_axes(), [height, width])
            }
            None => factory,
        },
        None => factory,
    }
}

/// `factory`'s backends with the open spatial dimensions of their image input (`input`,
/// else the first) fixed at a typical image's `[height, width]` (at `axes`), so that a
/// model that takes images of any size, a text detector, is profiled at that size.
fn at_typical_size(factory: BackendFactory, input: Option<String>, axes: [usize; 2], size: [u32; 2]) -> BackendFactory {
    std::sync::Arc::new(move || {
        let inner = factory()?;
        let mut metadata = inner.metadata().clone();
        let spec = match &input {
            Some(name) => metadata.inputs.iter_mut().find(|s| &s.name == name),
            None => metadata.inputs.first_mut(),
        };
        if let Some(spec) = spec {
            for (axis, side) in axes.into_iter().zip(size) {
                if let Some(dim @ None) = spec.shape.get_mut(axis) {
                    *dim = Some(side as usize);
                }
            }
        }
        Ok(Box::new(AtTypicalSize { inner, metadata }) as Box<dyn Backend + Send>)
    })
}

/// A backend that says its image input takes one size.
struct AtTypicalSize {
    inner: Box<dyn Backend + Send>,
    metadata: ModelMetadata,
}

impl Backend for AtTypicalSize {
    fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError> {
        self.inner.infer(batch)
    }

    fn warmup_batch_sizes(&self, max_batch_size: usize) -> Vec<usize> {
        self.inner.warmup_batch_sizes(max_batch_size)
    }

    fn device(&self) -> Device {
        self.inner.device()
    }

    fn takes_turns(&self) -> bool {
        self.inner.takes_turns()
    }
}
