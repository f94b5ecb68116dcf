//! What the control loop measures: CPU utilisation of the machine and the process.

mod cpu;

pub use cpu::{CpuSample, CpuUtilisation};
