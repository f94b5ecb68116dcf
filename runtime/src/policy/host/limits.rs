//! What one policy instance may hold: linear memory summed over all its memories (a
//! component holds several core instances, each with its own), tables, and instances.

use wasmtime::ResourceLimiter;

/// Table elements an instance may hold: CPython's and StarlingMonkey's function tables
/// hold tens of thousands.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Core instances one policy may be made of: a component of an interpreter links a
/// handful (the interpreter, libc, adapters).
const MAX_INSTANCES: usize = 64;

/// The error a grow past the cap traps with, told apart from other traps by type.
#[derive(Debug, thiserror::Error)]
#[error("grew its memory past the cap of {limit_bytes} bytes")]
pub(super) struct MemoryCapReached {
    pub(super) limit_bytes: usize,
}

/// Caps the linear memory of all an instance's memories together.
pub(super) struct MemoryCap {
    limit_bytes: usize,
    held_bytes: usize,
}

impl MemoryCap {
    pub(super) fn new(limit_bytes: usize) -> Self {
        MemoryCap { limit_bytes, held_bytes: 0 }
    }

    /// Linear memory held now, over all memories.
    pub(super) fn held_bytes(&self) -> usize {
        self.held_bytes
    }
}

impl ResourceLimiter for MemoryCap {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let held = self.held_bytes + desired.saturating_sub(current);
        if held > self.limit_bytes {
            return Err(MemoryCapReached { limit_bytes: self.limit_bytes }.into());
        }
        self.held_bytes = held;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_INSTANCES
    }
}
