//! What one instance of a variant holds of the machine's budget: the cores of its own
//! intra-op pool, and the memory its loading took (host, and its GPU's), measured
//! around the load and shared among the instances loaded together, never less than
//! its file says (about twice it: weights, and the copies sessions pack them into),
//! which is also what is expected of a variant that has not loaded.

use std::path::Path;

use modelless_policy_abi::InstanceShare;

use super::VariantConfig;
use crate::backend::Device;
use crate::metrics::process_rss_bytes;
use crate::profile::memory_probe;

/// Memory in use at one moment: the process's resident set, and its GPU's where it
/// loads on one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct InUse {
    host: Option<u64>,
    device: Option<u64>,
}

impl InUse {
    /// What is in use now, for a variant loading on `device`.
    pub(super) fn now(device: Device) -> InUse {
        let device = device.cuda_index().and_then(|_| memory_probe(device).bytes_in_use());
        InUse { host: process_rss_bytes(), device }
    }
}

/// The cores an instance of `config` holds: its session's own intra-op threads, or 0
/// on the pool sessions share (counted once, in the budget's `shared_pool_cores`).
pub(super) fn cores_of(config: &VariantConfig) -> f64 {
    config.onnx.intra_op_threads.map_or(0.0, |threads| threads as f64)
}

/// What one of `instances` instances of `config` loaded from `path` holds, from the
/// memory in use `before` and `after` they loaded. Another load beside it can shrink
/// the difference (memory freed meanwhile): no instance is taken to hold less than
/// [`expected`] says.
pub(super) fn measured(
    config: &VariantConfig,
    path: &Path,
    before: InUse,
    after: InUse,
    instances: usize,
) -> InstanceShare {
    let per_instance = |before: Option<u64>, after: Option<u64>| {
        before.zip(after).map_or(0, |(b, a)| a.saturating_sub(b) / instances.max(1) as u64)
    };
    let floor = expected(config, path);
    InstanceShare {
        cores: floor.cores,
        memory_bytes: per_instance(before.host, after.host).max(floor.memory_bytes),
        gpu_memory_bytes: per_instance(before.device, after.device).max(floor.gpu_memory_bytes),
    }
}

/// What an instance of `config` is expected to hold before it has loaded: its
/// threads, and about twice its file (weights, and the copies sessions pack them
/// into) on its device.
pub(super) fn expected(config: &VariantConfig, path: &Path) -> InstanceShare {
    let memory = 2 * file_bytes(path);
    let on_gpu = config.device.cuda_index().is_some();
    InstanceShare {
        cores: cores_of(config),
        memory_bytes: if on_gpu { 0 } else { memory },
        gpu_memory_bytes: if on_gpu { memory } else { 0 },
    }
}

fn file_bytes(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_holds_its_own_threads_and_its_part_of_the_memory_its_load_took() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.onnx");
        std::fs::write(&path, vec![0u8; 1000]).unwrap();
        let mut config = VariantConfig::new("v", &path, 70.0);
        assert_eq!(cores_of(&config), 0.0, "on the shared pool");
        config.onnx.intra_op_threads = Some(2);
        let before = InUse { host: Some(10_000), device: None };
        let after = InUse { host: Some(16_000), device: None };
        let share = measured(&config, &path, before, after, 2);
        assert_eq!(share, InstanceShare { cores: 2.0, memory_bytes: 3_000, gpu_memory_bytes: 0 });
        // Another load freed memory meanwhile: no less than twice the file.
        let shrunk = measured(&config, &path, after, before, 1);
        assert_eq!(shrunk.memory_bytes, 2_000);
        assert_eq!(expected(&config, &path), InstanceShare { cores: 2.0, memory_bytes: 2_000, gpu_memory_bytes: 0 });
    }
}
