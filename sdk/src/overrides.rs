//! Bounds on a repository load's `config` override. Whoever reaches the port sends
//! it, so every setting it changes is held to the server's ceilings
//! ([`OverrideLimits`]) and refused, with the bound named, beyond them: an override
//! must not make the server warm a model up at a batch that exhausts its memory, or
//! start more sessions or threads than it has cores.

use std::path::Path;

use modelless_runtime::kserve::{OverrideLimits, ServeError};
use modelless_runtime::profile::{file_sha256, store_beside};
use modelless_runtime::{BatchingConfig, ModelConfig};

/// Checks what `overridden` changes from `declared` against `limits`; the largest batch
/// is lowered further to the memory-safe batch of the model's stored profile.
pub(crate) fn check_override(
    declared: &ModelConfig,
    overridden: &ModelConfig,
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
    use modelless_runtime::WarmupConfig;

    use super::*;

    #[test]
    fn overrides_beyond_the_bounds_are_refused_naming_the_bound() {
        let declared = ModelConfig::new("m", "/nonexistent/m.onnx");
        let limits = OverrideLimits { max_instances: Some(2), ..OverrideLimits::default() };
        let with = |f: &dyn Fn(&mut ModelConfig)| {
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
