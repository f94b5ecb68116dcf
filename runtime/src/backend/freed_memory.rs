//! Keeping freed memory in the process, for libtorch on the CPU.
//!
//! libtorch's CPU allocator takes every activation from `malloc` and returns it with
//! `free` after each run. glibc hands blocks over its mmap threshold back to the
//! kernel at once, and trims the top of its heaps, so the next batch faults its
//! activations in again, page by page: MobileNetV2-1.0 at batch 8 on 2 cores faulted
//! 45 000–88 000 pages a batch and ran 81–118 ms, against 36 ms with freed memory kept
//! (0 faults from the third batch on). `modelless profile` on the CPU measured 5.2 ms a
//! row with it and 17.0 without (R² 0.997 against 0.954: faults are not linear in the
//! batch), 157 against 91 requests/s at most. So the first TorchScript session
//! raises both thresholds for the whole process: memory freed stays mapped for the
//! next batch, and the process's resident size stays near its peak.

use std::sync::Once;

/// Blocks up to this size come from malloc's heaps rather than their own mappings.
const MMAP_THRESHOLD_BYTES: i32 = 256 << 20;
/// Free memory at a heap's top is returned to the kernel only beyond this.
const TRIM_THRESHOLD_BYTES: i32 = 1 << 30;

/// Raises glibc's mmap and trim thresholds once per process; elsewhere, does nothing.
pub(crate) fn keep_freed_memory() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if !set_thresholds() {
            tracing::warn!("malloc kept its thresholds: libtorch's batches will fault their memory in again");
        }
    });
}

// The one call into the C library that has no safe binding.
#[allow(unsafe_code)]
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_thresholds() -> bool {
    // glibc's parameter numbers (malloc.h).
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    unsafe extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    // SAFETY: mallopt only sets allocator parameters; it takes no pointers and
    // glibc serialises it against allocations in progress.
    let (mmap, trim) =
        unsafe { (mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES), mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES)) };
    mmap == 1 && trim == 1
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_thresholds() -> bool {
    true
}

#[cfg(all(test, target_os = "linux", target_env = "gnu"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use crate::metrics::pages_faulted_by_this_thread;

    /// Faults of allocating, touching and freeing `bytes`, the last of `times` rounds.
    fn faults_of_the_last_round(bytes: usize, times: usize) -> u64 {
        let mut last = 0;
        for _ in 0..times {
            let before = pages_faulted_by_this_thread().unwrap();
            let block = vec![1u8; bytes];
            assert!(block.iter().step_by(4096).all(|&b| b == 1));
            drop(block);
            last = pages_faulted_by_this_thread().unwrap() - before;
        }
        last
    }

    #[test]
    fn memory_freed_is_reused_without_faulting_it_in_again() {
        // Larger than glibc's largest default mmap threshold (32 MiB): without the
        // setting, every round maps and faults it afresh (10 240 pages).
        let bytes = 40 << 20;
        keep_freed_memory();
        let faults = faults_of_the_last_round(bytes, 3);
        assert!(faults < 100, "{faults} pages faulted in the third round");
    }
}
