//! The GPUs' gauges: per GPU, labelled by its index and model name.

use modelless_policy_abi::GpuSnapshot;
use prometheus::{GaugeVec, Opts, Registry as PromRegistry};

use super::register::register;

/// Per GPU, labelled by its index and model name; none where NVML finds no GPU.
pub(super) struct GpuGauges {
    utilization: GaugeVec,
    memory_used_bytes: GaugeVec,
    memory_total_bytes: GaugeVec,
    temperature_celsius: GaugeVec,
    power_watts: GaugeVec,
    sm_clock_mhz: GaugeVec,
    throttled: GaugeVec,
}

const GPU_LABELS: [&str; 2] = ["gpu", "name"];

impl GpuGauges {
    pub(super) fn new(registry: &PromRegistry) -> Self {
        let gauges =
            |name: &str, help: &str, labels: &[&str]| register(registry, GaugeVec::new(Opts::new(name, help), labels));
        GpuGauges {
            utilization: gauges(
                "modelless_gpu_utilization",
                "GPU busy time over NVML's last sample period, 0 to 1",
                &GPU_LABELS,
            ),
            memory_used_bytes: gauges("modelless_gpu_memory_used_bytes", "GPU memory in use", &GPU_LABELS),
            memory_total_bytes: gauges("modelless_gpu_memory_total_bytes", "GPU memory in all", &GPU_LABELS),
            temperature_celsius: gauges("modelless_gpu_temperature_celsius", "GPU temperature", &GPU_LABELS),
            power_watts: gauges("modelless_gpu_power_watts", "GPU power draw", &GPU_LABELS),
            sm_clock_mhz: gauges("modelless_gpu_sm_clock_mhz", "GPU streaming-multiprocessor clock", &GPU_LABELS),
            throttled: gauges(
                "modelless_gpu_clocks_throttled",
                "1 for each reason NVML gives for holding the GPU's clocks down",
                &["gpu", "name", "reason"],
            ),
        }
    }

    /// Sets every gauge from `gpus`; a figure a GPU does not give is left out.
    pub(super) fn read(&self, gpus: &[GpuSnapshot]) {
        let all = [
            &self.utilization,
            &self.memory_used_bytes,
            &self.memory_total_bytes,
            &self.temperature_celsius,
            &self.power_watts,
            &self.sm_clock_mhz,
            &self.throttled,
        ];
        all.iter().for_each(|g| g.reset());
        for gpu in gpus {
            let index = gpu.index.to_string();
            let labels = [index.as_str(), gpu.name.as_str()];
            let figures = [
                (&self.utilization, gpu.utilisation_percent.map(|p| p / 100.0)),
                (&self.memory_used_bytes, gpu.memory_used_bytes.map(|b| b as f64)),
                (&self.memory_total_bytes, gpu.memory_total_bytes.map(|b| b as f64)),
                (&self.temperature_celsius, gpu.temperature_c),
                (&self.power_watts, gpu.power_w),
                (&self.sm_clock_mhz, gpu.sm_clock_mhz.map(f64::from)),
            ];
            for (gauge, value) in figures {
                if let Some(value) = value {
                    gauge.with_label_values(&labels).set(value);
                }
            }
            for reason in &gpu.throttle_reasons {
                self.throttled.with_label_values(&[labels[0], labels[1], reason]).set(1.0);
            }
        }
    }
}
