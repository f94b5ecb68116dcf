//! First runs in fresh sessions: every batch size once per session, in a random order,
//! with what the process was doing at the time (involuntary context switches during
//! the run, memory in use before it). The warm-up predictor learns from them.

use std::time::Instant;

use modelless_policy_abi::FirstRunSample;

use super::memory::MemoryProbe;
use crate::backend::{Backend, BackendFactory, Batch};
use crate::error::BackendError;
use crate::warmup::zero_batch;

/// Progress: `done` of `total` first runs.
pub type FirstRunProgress<'a> = &'a mut dyn FnMut(usize, usize);

/// Creates `sessions` fresh backends with `factory`; each runs every size of
/// `batch_sizes` once, in an order drawn from `seed`.
pub fn sample_first_runs(
    factory: &BackendFactory,
    batch_sizes: &[usize],
    sessions: usize,
    seed: u64,
    probe: &dyn MemoryProbe,
    on_progress: FirstRunProgress,
) -> Result<Vec<FirstRunSample>, BackendError> {
    let mut state = seed;
    let total = sessions * batch_sizes.len();
    let mut samples = Vec::with_capacity(total);
    for _ in 0..sessions {
        let mut backend = factory()?;
        let mut order = batch_sizes.to_vec();
        shuffle(&mut order, &mut state);
        let mut largest_before = 0;
        for batch_size in order {
            samples.push(first_run(backend.as_mut(), batch_size, largest_before, probe)?);
            largest_before = largest_before.max(batch_size as u32);
            on_progress(samples.len(), total);
        }
    }
    Ok(samples)
}

/// Shuffles `items` (Fisher–Yates) with numbers drawn from `state` by SplitMix64: the
/// same seed gives the same orders on every machine, with no random-number crate.
fn shuffle<T>(items: &mut [T], state: &mut u64) {
    for i in (1..items.len()).rev() {
        *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = *state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        items.swap(i, (z % (i as u64 + 1)) as usize);
    }
}

fn first_run(
    backend: &mut dyn Backend,
    batch_size: usize,
    largest_before: u32,
    probe: &dyn MemoryProbe,
) -> Result<FirstRunSample, BackendError> {
    let inputs = zero_batch(backend.metadata(), batch_size)
        .ok_or_else(|| BackendError::InputMismatch("an input has an open dimension besides the batch".into()))?;
    let memory_in_use_bytes = probe.bytes_in_use().unwrap_or(0);
    let switches_before = involuntary_context_switches();
    let start = Instant::now();
    backend.infer(Batch { inputs })?;
    let first_run_ms = start.elapsed().as_secs_f64() * 1e3;
    let involuntary_switches = involuntary_context_switches().saturating_sub(switches_before);
    Ok(FirstRunSample {
        batch_size: batch_size as u32,
        largest_before,
        involuntary_switches,
        memory_in_use_bytes,
        first_run_ms,
    })
}

/// Involuntary context switches of all the process's threads so far (0 where /proc
/// is missing): how much others took the cores from it.
pub fn involuntary_context_switches() -> u64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0;
    };
    tasks
        .flatten()
        .filter_map(|task| std::fs::read_to_string(task.path().join("status")).ok())
        .filter_map(|s| involuntary_in(&s))
        .sum()
}

/// The involuntary context switches a `/proc/…/status` file reports.
fn involuntary_in(status: &str) -> Option<u64> {
    status.lines().find_map(|line| line.strip_prefix("nonvoluntary_ctxt_switches:")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};

    #[test]
    fn every_session_runs_every_size_once_in_its_own_order() {
        let log = BatchLog::default();
        let fake = FakeConfig { per_row: std::time::Duration::from_millis(1), ..FakeConfig::default() };
        let factory = FakeBackend::factory(fake, log.clone());
        let mut progress = Vec::new();
        let samples =
            sample_first_runs(&factory, &[1, 2, 3, 4], 3, 7, &log, &mut |d, t| progress.push((d, t))).unwrap();
        assert_eq!(samples.len(), 12);
        assert_eq!(progress.last(), Some(&(12, 12)));
        let sessions: Vec<Vec<u32>> = samples.chunks(4).map(|c| c.iter().map(|s| s.batch_size).collect()).collect();
        for order in &sessions {
            let mut sorted = order.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, vec![1, 2, 3, 4]);
        }
        assert!(sessions.windows(2).any(|w| w[0] != w[1]), "orders differ: {sessions:?}");
        for session in samples.chunks(4) {
            assert_eq!(session[0].largest_before, 0);
            let largest = session.iter().map(|s| s.batch_size).take(3).max().unwrap();
            assert_eq!(session[3].largest_before, largest);
        }
        assert!(samples.iter().all(|s| s.first_run_ms >= f64::from(s.batch_size)));
    }

    #[test]
    fn a_thread_that_was_preempted_reports_its_involuntary_switches() {
        // More spinning threads than cores: the scheduler must take the cores from some.
        let threads = 4 * std::thread::available_parallelism().map_or(2, |n| n.get());
        let counts: Vec<Option<u64>> = std::thread::scope(|s| {
            let spinning: Vec<_> = (0..threads)
                .map(|_| {
                    s.spawn(|| {
                        let until = Instant::now() + std::time::Duration::from_millis(300);
                        while Instant::now() < until {
                            std::hint::spin_loop();
                        }
                        std::fs::read_to_string("/proc/thread-self/status").ok().and_then(|s| involuntary_in(&s))
                    })
                })
                .collect();
            spinning.into_iter().map(|t| t.join().unwrap()).collect()
        });
        assert!(counts.iter().all(Option::is_some), "{counts:?}");
        assert!(counts.iter().flatten().sum::<u64>() > 0, "{counts:?}");
        assert!(involuntary_context_switches() > 0);
    }
}
