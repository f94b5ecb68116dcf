//! Property-based fuzzing on stable Rust (feature `test-util`, and this crate's own
//! tests): [`fuzz`] runs a target's property over generated hostile inputs for a
//! number of cases or for a time, and [`PeakAllocator`] records the largest single
//! allocation a thread makes, so that a target can assert that no size a peer sent
//! reached the allocator unchecked.
//!
//! A short run is part of the tests; `MODELLESS_FUZZ_SECONDS=600 cargo test ... fuzz_`
//! runs every target for ten minutes instead (`MODELLESS_FUZZ_CASES` sets the short
//! run's cases per target, `MODELLESS_FUZZ_SEED` replays a seed a failure printed).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::time::{Duration, Instant};

use proptest::strategy::Strategy;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseResult, TestRng, TestRunner};

/// Cases of a short run, per target.
const SHORT_RUN_CASES: u32 = 256;
/// Cases between two looks at the clock in a timed run.
const ROUND_CASES: u32 = 512;

/// Runs `property` over inputs drawn from `strategy`: `MODELLESS_FUZZ_CASES` cases
/// (256 by default), or for `MODELLESS_FUZZ_SECONDS`. A failing input is shrunk, and
/// the panic names it and the seed that found it. Prints how many inputs ran.
pub fn fuzz<S: Strategy>(target: &str, strategy: S, property: impl Fn(S::Value) -> TestCaseResult) {
    let seconds = env_number("MODELLESS_FUZZ_SECONDS").map(Duration::from_secs);
    let cases = env_number("MODELLESS_FUZZ_CASES").map_or(SHORT_RUN_CASES, |n| n as u32);
    let mut seed = env_number("MODELLESS_FUZZ_SEED").unwrap_or_else(rand::random);
    let started = Instant::now();
    let executed = Cell::new(0u64);
    loop {
        let round_cases = if seconds.is_some() { ROUND_CASES } else { cases };
        let config = Config { cases: round_cases, failure_persistence: None, ..Config::default() };
        let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes(seed));
        let mut runner = TestRunner::new_with_rng(config, rng);
        let counted = |value| {
            executed.set(executed.get() + 1);
            property(value)
        };
        if let Err(failure) = runner.run(&strategy, counted) {
            panic!("fuzz {target}: {failure} (MODELLESS_FUZZ_SEED={seed} replays it)");
        }
        seed = seed.wrapping_add(1);
        if seconds.is_none_or(|s| started.elapsed() >= s) {
            break;
        }
    }
    println!("fuzz {target}: {} inputs in {:.1} s, no failure", executed.get(), started.elapsed().as_secs_f64());
}

fn env_number(name: &str) -> Option<u64> {
    std::env::var(name).ok()?.trim().parse().ok()
}

fn seed_bytes(seed: u64) -> [u8; 32] {
    let mut bytes = [0u8; 32];
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        chunk.copy_from_slice(&seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(i as u64).to_le_bytes());
    }
    bytes
}

/// Strategies for hostile inputs that several decoders share.
pub mod hostile {
    use proptest::collection::vec;
    use proptest::prelude::*;
    use serde_json::Value;

    /// A dimension: small, typical, enormous, negative or anything.
    pub fn dim() -> impl Strategy<Value = i64> + Clone {
        prop_oneof![
            4 => 0i64..5,
            1 => Just(224i64),
            1 => Just(1_000_000_000i64),
            1 => Just(i64::MAX),
            1 => Just(-1i64),
            1 => any::<i64>(),
        ]
    }

    /// A shape: mostly short, sometimes far too long.
    pub fn shape() -> impl Strategy<Value = Vec<i64>> + Clone {
        prop_oneof![8 => vec(dim(), 0..6), 1 => vec(dim(), 30..40)]
    }

    /// A JSON number or other scalar where a number is expected: huge, tiny,
    /// negative, fractional, or not a number at all.
    pub fn scalar() -> impl Strategy<Value = Value> + Clone {
        prop_oneof![
            4 => (-300i64..300).prop_map(Value::from),
            2 => any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(Value::from),
            1 => any::<u64>().prop_map(Value::from),
            1 => any::<i64>().prop_map(Value::from),
            1 => any::<bool>().prop_map(Value::from),
            1 => "\\PC{0,8}".prop_map(Value::from),
            1 => Just(Value::Null),
        ]
    }

    /// Any JSON value, nested a few levels.
    pub fn json() -> impl Strategy<Value = Value> + Clone {
        scalar().prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                vec(inner.clone(), 0..8).prop_map(Value::Array),
                vec(("\\PC{0,6}", inner), 0..6).prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Text as a peer might mangle it: whole, cut short, with bytes (invalid UTF-8
    /// among them) spliced in, or nested far too deep.
    pub fn mangled(text: String) -> impl Strategy<Value = Vec<u8>> {
        let len = text.len();
        let bytes = text.into_bytes();
        let spliced = {
            let bytes = bytes.clone();
            (0..=len, vec(any::<u8>(), 1..4)).prop_map(move |(at, extra)| {
                let mut out = bytes.clone();
                out.splice(at..at, extra);
                out
            })
        };
        let cut = {
            let bytes = bytes.clone();
            (0..=len).prop_map(move |at| bytes[..at].to_vec())
        };
        let deep = (1usize..200_000).prop_map(|depth| "[".repeat(depth).into_bytes());
        prop_oneof![12 => Just(bytes), 2 => spliced, 2 => cut, 1 => deep]
    }
}

thread_local! {
    static LARGEST: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, recording the largest single allocation each thread asks
/// for. Install it in a test binary with `#[global_allocator]`.
#[derive(Debug)]
pub struct PeakAllocator;

impl PeakAllocator {
    /// Forgets this thread's largest allocation so far.
    pub fn reset() {
        LARGEST.with(|largest| largest.set(0));
    }

    /// The largest allocation this thread asked for since [`reset`](Self::reset), in
    /// bytes.
    pub fn largest() -> usize {
        LARGEST.with(Cell::get)
    }

    fn record(size: usize) {
        // `try_with`: a thread being torn down still allocates.
        let _ = LARGEST.try_with(|largest| largest.set(largest.get().max(size)));
    }
}

#[allow(unsafe_code)]
// SAFETY: the allocator trait is unsafe to implement: every call goes straight to the
// system allocator with the caller's arguments, and only the sizes are looked at.
unsafe impl GlobalAlloc for PeakAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        Self::record(layout.size());
        // SAFETY: the caller's layout, passed on as it is.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        Self::record(layout.size());
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, which is the system's.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        Self::record(new_size);
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn the_largest_allocation_of_this_thread_is_recorded() {
        PeakAllocator::reset();
        let small = vec![0u8; 1000];
        let large = vec![0u8; 3 << 20];
        assert_eq!(PeakAllocator::largest(), 3 << 20);
        drop((small, large));
        PeakAllocator::reset();
        assert!(PeakAllocator::largest() < 1000);
    }

    #[test]
    #[should_panic(expected = "fuzz always-small")]
    fn a_failing_property_fails_the_run_naming_its_target() {
        fuzz("always-small", 0u32..1000, |n| {
            prop_assert!(n < 10, "{n} is not small");
            Ok(())
        });
    }
}
