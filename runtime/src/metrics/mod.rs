//! What the control loop measures: CPU utilisation of the machine and the process, GPUs
//! (NVML), and each task's traffic over the last minute; and the Prometheus metrics of the
//! process.

mod cpu;
pub(crate) mod exposition;
mod failures;
// GPU figures from NVML, or none in a build without the `nvml` feature.
#[cfg(feature = "nvml")]
mod gpu;
#[cfg(not(feature = "nvml"))]
#[path = "gpu_absent.rs"]
mod gpu;
mod gpu_gauges;
mod memory;
mod model_counters;
mod photo_mix;
mod register;
mod traffic;
mod window;

pub use cpu::{CpuSample, CpuUtilisation};
pub use exposition::{GaugeReading, PoolGauges, ServingMetrics, serving_metrics};
pub use failures::ModelFailures;
pub use gpu::{gpu_snapshots, gpus_absent_reason, process_gpu_memory};
pub use memory::{
    cgroup_memory_limit, machine_memory, machine_page_faults, pages_faulted_by_this_thread, process_rss_bytes,
};
pub use model_counters::{ModelCounters, ModelTotals};
pub use photo_mix::PhotoMix;
pub use traffic::{TaskTraffic, TrafficReading};
pub use window::{TickCounts, TrafficWindow};
