//! Bounds on a repository load's `config` override. Whoever reaches the port sends
//! it, so every setting it changes is held to the server's ceilings
//! ([`OverrideLimits`]) and refused, with the bound named, beyond them: an override
//! must not make the server warm a model up at a batch that exhausts its memory, or
//! start more sessions or threads than it has cores.

use std::path::Path;

use modelless_runtime::kserve::{Code, OverrideLimits, ServeError, path_under_root};
use modelless_runtime::profile::{file_sha256, store_beside};
use modelless_runtime::{BatchingConfig, VariantConfig};

/// Applies a load request's `config` (JSON) over a model's settings, within the
/// server's bounds on overrides. A `path` in it is taken inside the repository `root`
/// and refused anywhere else, or when there is no root.
pub(crate) fn overridden(
    model: VariantConfig,
    config: &str,
    root: Option<&Path>,
    limits: &OverrideLimits,
) -> Result<VariantConfig, ServeError> {
    let invalid = |e: &dyn std::fmt::Display| ServeError::invalid(format!("parameter `config`: {e}"));
    let patch: serde_json::Value = serde_json::from_str(config).map_err(|e| invalid(&e))?;
    let serde_json::Value::Object(patch) = patch else {
        return Err(ServeError::invalid("parameter `config` must be a JSON object"));
    };
    let mut merged = serde_json::to_value(&model).map_err(|e| invalid(&e))?;
    for (key, value) in patch {
        let value = match (key.as_str(), value) {
            ("name", _) => continue,
            ("path", serde_json::Value::String(path)) => {
                let root = root.ok_or_else(|| {
                    ServeError::new(Code::PermissionDenied, "no model repository is configured to load paths from")
                })?;
                serde_json::json!(path_under_root(root, Path::new(&path))?)
            }
            (_, value) => value,
        };
        merged[key] = value;
    }
    let overridden: VariantConfig = serde_json::from_value(merged).map_err(|e| invalid(&e))?;
    check_override(&model, &overridden, limits)?;
    overridden.validate_as_model().map_err(|e| invalid(&e))?;
    Ok(overridden)
}

/// Checks what `overridden` changes from `declared` against `limits`; the largest batch
/// is lowered further to the memory-safe batch of the model's stored profile.
fn check_override(
    declared: &VariantConfig,
    overridden: &VariantConfig,
    limits: &OverrideLimits,
) -> Result<(), ServeError> {
    let max_batch = limits.max_batch_size.min(memory_safe_batch(&overridden.name, &overridden.path));
    let (was, now) = (&declared.batching, &overridden.batching);
    if now.max_batch_size != was.max_batch_size {
        at_most("batching.max_batch_size", now.max_batch_size as u64, max_batch as u64)?;
    }
    if now.max_queue_size != was.max_queue_size {
        at_most("batching.max_queue_size", now.max_queue_size as u64, limits.max_queue_size as u64)?;
    }
    if now.max_queue_delay_us != was.max_queue_delay_us {
        at_most("batching.max_queue_delay_us", now.max_queue_delay_us, limits.max_queue_delay_us)?;
    }
    if now.preferred_batch_sizes != was.preferred_batch_sizes {
        at_most("batching.preferred_batch_sizes", now.preferred_batch_sizes.len() as u64, max_batch as u64)?;
    }
    let cores = limits.instances() as u64;
    if overridden.instances != declared.instances {
        at_most("instances", overridden.instances as u64, cores)?;
    }
    let threads = [
        ("onnx.intra_op_threads", overridden.onnx.intra_op_threads, declared.onnx.intra_op_threads),
        ("onnx.inter_op_threads", overridden.onnx.inter_op_threads, declared.onnx.inter_op_threads),
    ];
    for (name, now, was) in threads {
        if now != was {
            at_most(name, now.unwrap_or(0) as u64, cores)?;
        }
    }
    if overridden.warmup != declared.warmup {
        let sizes = overridden.warmup.batch_sizes.as_deref().unwrap_or_default();
        at_most("warmup.batch_sizes (count)", sizes.len() as u64, max_batch as u64)?;
        let largest = sizes.iter().copied().max().unwrap_or(0);
        at_most("warmup.batch_sizes", largest as u64, batch_in_force(now, max_batch) as u64)?;
    }
    Ok(())
}

/// The largest batch the model's stored profile found within its memory budget, or
/// no bound where there is no such profile.
fn memory_safe_batch(name: &str, path: &Path) -> usize {
    let sha = file_sha256(path).ok();
    sha.and_then(|sha| store_beside(path).max_safe_batch(name, &sha)).unwrap_or(usize::MAX)
}

/// Warm-up runs no batch larger than the model will serve.
fn batch_in_force(batching: &BatchingConfig, max_batch: usize) -> usize {
    batching.max_batch_size.min(max_batch)
}

fn at_most(setting: &str, value: u64, bound: u64) -> Result<(), ServeError> {
    if value > bound {
        return Err(ServeError::too_large(format!(
            "parameter `config`: {setting} = {value} is over this server's bound of {bound} for overrides"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use modelless_runtime::WarmupConfig;
    use modelless_runtime::fuzzing::{PeakAllocator, fuzz, hostile};
    use proptest::collection::vec;
    use proptest::prelude::*;
    use serde_json::{Value, json};

    use super::*;

    /// A load request's `config` as a client might send it: settings of every size
    /// and kind, paths in and out of the repository, keys that do not exist.
    fn override_config() -> impl Strategy<Value = String> {
        let number = || {
            prop_oneof![
                3 => (0u64..10).prop_map(Value::from),
                1 => Just(json!(64)),
                1 => Just(json!(1_000_000_000u64)),
                2 => hostile::scalar(),
            ]
        };
        let batching =
            (number(), number(), number(), vec(number(), 0..4)).prop_map(|(batch, delay, queue, preferred)| {
                json!({ "max_batch_size": batch, "max_queue_delay_us": delay, "max_queue_size": queue,
                    "preferred_batch_sizes": preferred })
            });
        let warmup = (any::<bool>(), vec(number(), 0..6))
            .prop_map(|(enabled, sizes)| json!({ "enabled": enabled, "batch_sizes": sizes }));
        let onnx = (number(), number())
            .prop_map(|(intra, inter)| json!({ "intra_op_threads": intra, "inter_op_threads": inter }));
        let path =
            prop_oneof![Just("m.onnx"), Just("sub/model.onnx"), Just("../outside.onnx"), Just("/etc/passwd"), Just("")];
        let setting = prop_oneof![
            3 => batching.prop_map(|v| ("batching", v)),
            2 => number().prop_map(|v| ("instances", v)),
            1 => warmup.prop_map(|v| ("warmup", v)),
            1 => onnx.prop_map(|v| ("onnx", v)),
            1 => path.prop_map(|p| ("path", json!(p))),
            1 => hostile::json().prop_map(|v| ("name", v)),
            1 => hostile::json().prop_map(|v| ("unknown", v)),
        ];
        let patch = vec(setting, 0..4).prop_map(|settings| {
            let settings = settings.into_iter().map(|(k, v)| (k.to_string(), v));
            Value::Object(settings.collect()).to_string()
        });
        prop_oneof![8 => patch.prop_flat_map(hostile::mangled), 1 => hostile::json().prop_map(|v| v.to_string().into_bytes())]
            .prop_map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
    }

    #[test]
    fn fuzz_repository_overrides() {
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("m.onnx"), b"not read here").unwrap();
        let declared = VariantConfig::plain("m", root.path().join("m.onnx"));
        let limits = OverrideLimits { max_instances: Some(2), ..OverrideLimits::default() };
        let (accepted, refused) = (Cell::new(0), Cell::new(0));
        fuzz("repository-override", override_config(), |config| {
            PeakAllocator::reset();
            let result = overridden(declared.clone(), &config, Some(root.path()), &limits);
            let largest = PeakAllocator::largest();
            prop_assert!(largest <= 16 * config.len() + (64 << 10), "{} bytes allocated {largest}", config.len());
            match result {
                Ok(model) => {
                    accepted.set(accepted.get() + 1);
                    prop_assert!(model.validate_as_model().is_ok());
                    prop_assert!(model.batching.max_batch_size <= limits.max_batch_size);
                    prop_assert!(
                        model.batching.max_queue_size <= limits.max_queue_size.max(declared.batching.max_queue_size)
                    );
                    prop_assert!(model.instances <= 2);
                    let largest_warmup = model.warmup.batch_sizes.iter().flatten().max().copied().unwrap_or(0);
                    prop_assert!(largest_warmup <= model.batching.max_batch_size, "warm-up at {largest_warmup}");
                    prop_assert!(model.path.starts_with(root.path()), "{}", model.path.display());
                    prop_assert_eq!(&model.name, "m");
                }
                Err(e) => {
                    refused.set(refused.get() + 1);
                    let expected = [Code::InvalidArgument, Code::OutOfRange, Code::PermissionDenied];
                    prop_assert!(expected.contains(&e.code), "{:?}: {}", e.code, e.message);
                }
            }
            Ok(())
        });
        assert!(accepted.get() > 0 && refused.get() > 0, "{} accepted, {} refused", accepted.get(), refused.get());
    }

    #[test]
    fn overrides_beyond_the_bounds_are_refused_naming_the_bound() {
        let declared = VariantConfig::plain("m", "/nonexistent/m.onnx");
        let limits = OverrideLimits { max_instances: Some(2), ..OverrideLimits::default() };
        let with = |f: &dyn Fn(&mut VariantConfig)| {
            let mut config = declared.clone();
            f(&mut config);
            check_override(&declared, &config, &limits)
        };
        assert!(with(&|c| c.batching.max_batch_size = 64).is_ok());
        assert!(with(&|c| c.instances = 2).is_ok());
        let huge = with(&|c| c.batching.max_batch_size = 1_000_000_000).unwrap_err();
        assert!(huge.message.contains("max_batch_size = 1000000000 is over this server's bound of 64"), "{huge}");
        assert!(with(&|c| c.instances = 100_000).unwrap_err().message.contains("instances = 100000"));
        assert!(with(&|c| c.batching.max_queue_size = 1 << 30).is_err());
        assert!(with(&|c| c.batching.max_queue_delay_us = u64::MAX).is_err());
        assert!(with(&|c| c.onnx.intra_op_threads = Some(4096)).is_err());
        assert!(with(&|c| c.warmup = WarmupConfig::default().with_batch_sizes(vec![4096])).is_err());
        assert!(with(&|c| c.warmup = WarmupConfig::default().with_batch_sizes(vec![4, 2, 1])).is_ok());
    }
}
