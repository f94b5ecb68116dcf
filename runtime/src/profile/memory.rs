//! How much memory a backend holds, for the profiler's memory column and stop.

use crate::backend::Device;

/// Reads the memory in use on a device, in bytes.
pub trait MemoryProbe {
    /// Bytes in use now.
    fn bytes_in_use(&self) -> Option<u64>;
}

/// The fake backend's log reports the most memory a batch of it held.
#[cfg(any(test, feature = "test-util"))]
impl MemoryProbe for crate::backend::fake::BatchLog {
    fn bytes_in_use(&self) -> Option<u64> {
        Some(self.peak_memory())
    }
}

/// The process's resident set (on the CPU, sessions' memory is the process's).
#[derive(Clone, Copy, Debug, Default)]
pub struct ProcessMemory;

impl MemoryProbe for ProcessMemory {
    fn bytes_in_use(&self) -> Option<u64> {
        // /proc/self/statm: size resident shared text lib data dt, in pages.
        let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
        let resident: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
        Some(resident * page_size())
    }
}

/// Device memory this process holds on GPU `index` (NVML's count for the process: on
/// a GPU, the framework's caching allocator holds what a batch needed after it ran,
/// so the growth after each batch size is what that size needs).
#[derive(Clone, Copy, Debug)]
pub struct GpuMemory {
    /// The GPU, as in `cuda:N`.
    pub index: u32,
}

impl MemoryProbe for GpuMemory {
    fn bytes_in_use(&self) -> Option<u64> {
        crate::metrics::process_gpu_memory(self.index)
    }
}

/// The probe of the memory sessions on `device` use.
pub fn memory_probe(device: Device) -> Box<dyn MemoryProbe> {
    match device.cuda_index() {
        Some(index) => Box::new(GpuMemory { index }),
        None => Box::new(ProcessMemory),
    }
}

fn page_size() -> u64 {
    rustix::param::page_size() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_resident_set_grows_when_memory_is_touched() {
        let before = ProcessMemory.bytes_in_use().unwrap();
        let block = vec![1u8; 64 << 20];
        let after = ProcessMemory.bytes_in_use().unwrap();
        assert!(after >= before + (32 << 20), "{before} -> {after}");
        drop(std::hint::black_box(block));
    }
}
