//! GPU figures from NVML, the NVIDIA driver's management library. It is opened at run
//! time (`libnvidia-ml.so.1`), so a machine without a GPU or a driver builds and runs
//! the same binary: there the GPU list is empty and nothing fails.

use std::ffi::OsStr;
use std::sync::OnceLock;

use modelless_policy_abi::GpuSnapshot;
use nvml_wrapper::Nvml;
use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::enums::device::UsedGpuMemory;

/// Where the driver's library is looked for: its SONAME first, which every driver
/// install has (the bare `.so` comes with development packages only).
const LIBRARIES: [&str; 2] = ["libnvidia-ml.so.1", "libnvidia-ml.so"];

/// NVML, opened once per process; why not, where it could not be.
fn nvml() -> Result<&'static Nvml, &'static str> {
    static NVML: OnceLock<Result<Nvml, String>> = OnceLock::new();
    let opened = NVML.get_or_init(|| {
        let mut errors = Vec::new();
        for library in LIBRARIES {
            match Nvml::builder().lib_path(OsStr::new(library)).init() {
                Ok(nvml) => return Ok(nvml),
                Err(e) => errors.push(format!("{library}: {e}")),
            }
        }
        let reason = format!("no NVML ({})", errors.join("; "));
        tracing::info!(%reason, "GPU figures are absent");
        Err(reason)
    });
    opened.as_ref().map_err(String::as_str)
}

/// Why there are no GPU figures, or `None` when NVML answers.
pub fn gpus_absent_reason() -> Option<&'static str> {
    nvml().err()
}

/// Every GPU NVML finds, with the figures it gives; empty without NVML. A figure a
/// device does not report (a laptop part without power readings, say) is absent.
pub fn gpu_snapshots() -> Vec<GpuSnapshot> {
    let Ok(nvml) = nvml() else { return Vec::new() };
    let count = nvml.device_count().unwrap_or(0);
    (0..count)
        .filter_map(|index| {
            let device = nvml.device_by_index(index).ok()?;
            let memory = device.memory_info().ok();
            Some(GpuSnapshot {
                index,
                name: device.name().unwrap_or_default(),
                utilisation_percent: device.utilization_rates().ok().map(|u| f64::from(u.gpu)),
                memory_used_bytes: memory.as_ref().map(|m| m.used),
                memory_total_bytes: memory.as_ref().map(|m| m.total),
                temperature_c: device.temperature(TemperatureSensor::Gpu).ok().map(f64::from),
                power_w: device.power_usage().ok().map(|mw| f64::from(mw) / 1e3),
                sm_clock_mhz: device.clock_info(Clock::SM).ok(),
                throttle_reasons: device.current_throttle_reasons().map(throttle_names).unwrap_or_default(),
            })
        })
        .collect()
}

/// Device memory this process holds on GPU `index`, in bytes, as NVML counts it (the
/// CUDA context, the framework's caching allocator, workspaces).
pub fn process_gpu_memory(index: u32) -> Option<u64> {
    let device = nvml().ok()?.device_by_index(index).ok()?;
    let pid = std::process::id();
    device.running_compute_processes().ok()?.into_iter().find(|p| p.pid == pid).and_then(|p| match p.used_gpu_memory {
        UsedGpuMemory::Used(bytes) => Some(bytes),
        UsedGpuMemory::Unavailable => None,
    })
}

/// The reasons set in `reasons`, in NVML's words; the idle reason is left out, as an
/// idle GPU is not held down.
fn throttle_names(reasons: ThrottleReasons) -> Vec<String> {
    reasons.difference(ThrottleReasons::GPU_IDLE).iter_names().map(|(name, _)| name.to_ascii_lowercase()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn throttle_reasons_are_named_and_idle_is_no_reason() {
        let reasons = ThrottleReasons::GPU_IDLE | ThrottleReasons::SW_POWER_CAP | ThrottleReasons::HW_SLOWDOWN;
        assert_eq!(throttle_names(reasons), ["sw_power_cap", "hw_slowdown"]);
        assert!(throttle_names(ThrottleReasons::GPU_IDLE).is_empty());
    }

    #[test]
    fn without_nvml_there_are_no_gpus_and_a_reason_why() {
        // Either way the calls return; which way depends on the machine.
        match gpus_absent_reason() {
            Some(reason) => {
                assert!(reason.contains("libnvidia-ml"), "{reason}");
                assert!(gpu_snapshots().is_empty());
                assert_eq!(process_gpu_memory(0), None);
            }
            None => assert!(!gpu_snapshots().is_empty(), "NVML opened but lists no GPU"),
        }
    }
}
