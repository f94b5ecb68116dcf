//! What the control loop measures: CPU utilisation of the machine and the process,
//! and each task's traffic over the last minute.

mod cpu;
mod memory;
mod traffic;
mod window;

pub use cpu::{CpuSample, CpuUtilisation};
pub use memory::machine_memory;
pub use traffic::{TaskTraffic, TrafficReading};
pub use window::{TickCounts, TrafficWindow};
