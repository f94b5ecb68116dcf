//! How much memory a backend holds, for the profiler's memory column and stop.

/// Reads the memory in use on a device, in bytes.
pub trait MemoryProbe {
    /// Bytes in use now.
    fn bytes_in_use(&self) -> Option<u64>;
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
