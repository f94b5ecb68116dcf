//! A task variant's profile: the key it is stored under (the model file, the device its
//! sessions load on, and the settings that change what a batch costs), found when the
//! variant loads, or measured then when its config asks.

use std::collections::BTreeMap;
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
    let key = match variant.format {
        ModelFormat::Onnx => ort_profile_key(path, device, onnxruntime, &variant.onnx, max_batch_size, options)?,
        ModelFormat::Torchscript => {
            let settings = TorchScriptProfileSettings {
                torchscript: &variant.torchscript,
                max_batch_size,
                memory_budget_mib: options.sweep.memory_budget_bytes.map(|b| b >> 20),
            };
            profile_key(path, &device.name(), &settings).map_err(|e| Error::io("read", path, e))?
        }
    };
    Ok(with_profile_shapes(key, &variant.profile_shapes))
}

/// `key` for a profile measured at `shapes`: a recogniser profiled on lines 320 wide
/// is not profiled on lines 960 wide. Without shapes the key is as it was, so the
/// profiles stored before shapes could be given still match.
fn with_profile_shapes(mut key: ProfileKey, shapes: &BTreeMap<String, Vec<usize>>) -> ProfileKey {
    if shapes.is_empty() {
        return key;
    }
    if let Ok(serde_json::Value::Object(mut settings)) = serde_json::from_str(&key.settings) {
        settings.insert("profile_shapes".into(), serde_json::json!(shapes));
        key.settings = serde_json::Value::Object(settings).to_string();
    }
    key
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
/// open sides of the inputs its `profile_shapes` names fixed at those shapes, and of
/// its image input at a typical image's size where its preprocessing has one (a text
/// detector takes pages of any size).
pub fn profiling_factory(variant: &VariantConfig, path: &Path, onnxruntime: &OrtEnvironmentConfig) -> BackendFactory {
    let factory = variant.backend_factory(onnxruntime, path);
    let typical = variant.preprocess.as_ref().and_then(|preprocess| {
        let (width, height) = preprocess.typical_size()?;
        Some(TypicalSize { input: preprocess.input.clone(), axes: preprocess.spatial_axes(), size: [height, width] })
    });
    if variant.profile_shapes.is_empty() && typical.is_none() {
        return factory;
    }
    at_fixed_shapes(factory, variant.profile_shapes.clone(), typical)
}

/// Where a typical image's `[height, width]` goes: the image input (`input`, else the
/// first), at its spatial `axes`.
struct TypicalSize {
    input: Option<String>,
    axes: [usize; 2],
    size: [u32; 2],
}

/// `factory`'s backends with the open sides of each input `shapes` names fixed at its
/// shape there (without the batch), then the image input's open spatial sides at a
/// typical image's size. A name in `shapes` the model does not have, or a shape whose
/// rank or fixed sides are not the input's, fails the load with the reason.
fn at_fixed_shapes(
    factory: BackendFactory,
    shapes: BTreeMap<String, Vec<usize>>,
    typical: Option<TypicalSize>,
) -> BackendFactory {
    std::sync::Arc::new(move || {
        let inner = factory()?;
        let mut metadata = inner.metadata().clone();
        fix_given_shapes(&mut metadata, &shapes)?;
        if let Some(typical) = &typical {
            fix_typical_size(&mut metadata, typical);
        }
        Ok(Box::new(AtFixedShapes { inner, metadata }) as Box<dyn Backend + Send>)
    })
}

fn fix_given_shapes(metadata: &mut ModelMetadata, shapes: &BTreeMap<String, Vec<usize>>) -> Result<(), BackendError> {
    for (name, shape) in shapes {
        let refused = |why: String| BackendError::InputMismatch(format!("profile_shapes: input `{name}` {why}"));
        let Some(spec) = metadata.inputs.iter_mut().find(|s| &s.name == name) else {
            let known: Vec<&str> = metadata.inputs.iter().map(|s| s.name.as_str()).collect();
            return Err(refused(format!("is not one of the model's ({})", known.join(", "))));
        };
        let model_shape = spec.shape_display();
        if spec.shape.len() != shape.len() + 1 {
            return Err(refused(format!(
                "has {} sides besides the batch ({model_shape}), not {}",
                spec.shape.len().saturating_sub(1),
                shape.len()
            )));
        }
        for (dim, &side) in spec.shape[1..].iter_mut().zip(shape) {
            match dim {
                None => *dim = Some(side),
                Some(fixed) if *fixed != side => {
                    return Err(refused(format!("is {model_shape}: {shape:?} differs from a fixed side")));
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

fn fix_typical_size(metadata: &mut ModelMetadata, typical: &TypicalSize) {
    let spec = match &typical.input {
        Some(name) => metadata.inputs.iter_mut().find(|s| &s.name == name),
        None => metadata.inputs.first_mut(),
    };
    if let Some(spec) = spec {
        for (axis, side) in typical.axes.into_iter().zip(typical.size) {
            if let Some(dim @ None) = spec.shape.get_mut(axis) {
                *dim = Some(side as usize);
            }
        }
    }
}

/// A backend that says its open inputs take one shape.
struct AtFixedShapes {
    inner: Box<dyn Backend + Send>,
    metadata: ModelMetadata,
}

impl Backend for AtFixedShapes {
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

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;
    use crate::backend::TensorSpec;
    use crate::tensor::{DType, Tensor};
    use crate::warmup::zero_batch;

    /// A recogniser's shape: lines of 3 channels, any height and width; it records
    /// the shape of each batch it runs.
    struct Lines {
        metadata: ModelMetadata,
        ran: Arc<Mutex<Vec<Vec<usize>>>>,
    }

    impl Backend for Lines {
        fn metadata(&self) -> &ModelMetadata {
            &self.metadata
        }

        fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError> {
            let rows = batch.inputs[0].shape()[0];
            self.ran.lock().unwrap().push(batch.inputs[0].shape().to_vec());
            Ok(BatchOutput::new(vec![Tensor::zeros(DType::F32, vec![rows, 5])]))
        }
    }

    fn lines() -> (BackendFactory, Arc<Mutex<Vec<Vec<usize>>>>) {
        let ran = Arc::new(Mutex::new(Vec::new()));
        let log = ran.clone();
        let factory: BackendFactory = Arc::new(move || {
            let metadata = ModelMetadata {
                inputs: vec![TensorSpec::new("x", DType::F32, vec![None, Some(3), None, None])],
                outputs: vec![TensorSpec::new("y", DType::F32, vec![None, Some(5)])],
            };
            Ok(Box::new(Lines { metadata, ran: log.clone() }) as Box<dyn Backend + Send>)
        });
        (factory, ran)
    }

    fn shapes(shape: &[usize]) -> BTreeMap<String, Vec<usize>> {
        BTreeMap::from([("x".to_string(), shape.to_vec())])
    }

    #[test]
    fn an_input_open_besides_the_batch_runs_at_the_shape_given() {
        let (factory, ran) = lines();
        assert!(zero_batch(factory().unwrap().metadata(), 2).is_none(), "open sides have no size of their own");
        let mut backend = at_fixed_shapes(factory, shapes(&[3, 48, 320]), None)().unwrap();
        let inputs = zero_batch(backend.metadata(), 2).expect("every side has a size now");
        backend.infer(Batch { inputs }).unwrap();
        assert_eq!(*ran.lock().unwrap(), vec![vec![2, 3, 48, 320]]);
    }

    #[test]
    fn a_shape_the_input_cannot_take_is_refused_with_the_reason() {
        let refusal = |given: BTreeMap<String, Vec<usize>>| match at_fixed_shapes(lines().0, given, None)() {
            Err(BackendError::InputMismatch(why)) => why,
            Err(other) => panic!("{other}"),
            Ok(_) => panic!("accepted"),
        };
        let unknown = refusal(BTreeMap::from([("image".to_string(), vec![3, 48, 320])]));
        assert!(unknown.contains("`image`") && unknown.contains("(x)"), "{unknown}");
        let rank = refusal(shapes(&[48, 320]));
        assert!(rank.contains("3 sides") && rank.contains("not 2"), "{rank}");
        let fixed = refusal(shapes(&[1, 48, 320]));
        assert!(fixed.contains("[N, 3, N, N]") && fixed.contains("fixed side"), "{fixed}");
    }

    #[test]
    fn the_shapes_profiled_at_are_part_of_the_key_and_none_leaves_it_as_it_was() {
        let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: "{\"a\":1}".into() };
        assert_eq!(with_profile_shapes(key.clone(), &BTreeMap::new()), key);
        let narrow = with_profile_shapes(key.clone(), &shapes(&[3, 48, 320]));
        let wide = with_profile_shapes(key.clone(), &shapes(&[3, 48, 960]));
        assert_ne!(narrow, key);
        assert_ne!(narrow, wide);
        assert!(narrow.settings.contains("\"a\":1") && narrow.settings.contains("320"), "{}", narrow.settings);
    }
}
