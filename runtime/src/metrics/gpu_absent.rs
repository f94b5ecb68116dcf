//! GPU figures in a build without the `nvml` feature: none, and a reason that says
//! how to get them. The API is that of the NVML build's module.

use modelless_policy_abi::GpuSnapshot;

/// Why there are no GPU figures: this build does not read NVML.
pub fn gpus_absent_reason() -> Option<&'static str> {
    Some("built without the `nvml` feature: no GPU figures")
}

/// No GPU figures.
pub fn gpu_snapshots() -> Vec<GpuSnapshot> {
    Vec::new()
}

/// Device memory this process holds on GPU `index`: unknown without NVML.
pub fn process_gpu_memory(_index: u32) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_nvml_there_are_no_figures_and_the_reason_names_the_feature() {
        assert!(gpus_absent_reason().is_some_and(|r| r.contains("`nvml` feature")));
        assert!(gpu_snapshots().is_empty() && process_gpu_memory(0).is_none());
    }
}
