//! The batch-size sweep: for each size, the first run (a warm-up outlier) and then
//! warm runs, on the variant's own device and settings; memory after each size, and a
//! stop before any size predicted to exceed the memory budget.

use std::time::Instant;

use modelless_policy_abi::BatchPoint;

use super::fit::{Line, fit_line, percentile};
use super::memory::MemoryProbe;
use crate::backend::{Backend, Batch};
use crate::error::BackendError;
use crate::warmup::zero_batch;

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// Batch sizes, smallest first.
    pub batch_sizes: Vec<usize>,
    /// Warm runs per size, after the first.
    pub warm_runs: usize,
    /// Never run a batch predicted to need more memory than this (bytes above what
    /// was in use before the sweep).
    pub memory_budget_bytes: Option<u64>,
}

impl SweepConfig {
    /// Powers of two up to `max_batch_size` (and it), 20 warm runs, no budget.
    pub fn new(max_batch_size: usize) -> Self {
        let mut sizes: Vec<usize> = (0..).map(|i| 1usize << i).take_while(|&b| b <= max_batch_size).collect();
        if sizes.last() != Some(&max_batch_size) && max_batch_size > 0 {
            sizes.push(max_batch_size);
        }
        SweepConfig { batch_sizes: sizes, warm_runs: 20, memory_budget_bytes: None }
    }

    /// Sets the memory budget.
    pub fn with_memory_budget(mut self, bytes: u64) -> Self {
        self.memory_budget_bytes = Some(bytes);
        self
    }

    /// Sets the warm runs per size.
    pub fn with_warm_runs(mut self, runs: usize) -> Self {
        self.warm_runs = runs;
        self
    }
}

/// Progress of a sweep, for progress bars.
#[derive(Clone, Debug, PartialEq)]
pub enum SweepEvent {
    /// A run finished: `done` of `total` runs of this batch size.
    Ran {
        /// The batch size.
        batch_size: usize,
        /// Runs done at this size.
        done: usize,
        /// Runs planned at this size.
        total: usize,
    },
    /// A batch size is measured.
    Measured(BatchPoint),
    /// The sweep stopped before this size: it would need more memory than the budget.
    Stopped {
        /// The size not run.
        batch_size: usize,
        /// Memory it was predicted to need.
        predicted_bytes: u64,
    },
}

/// What a sweep found.
#[derive(Clone, Debug, PartialEq)]
pub struct Sweep {
    /// One point per size run.
    pub points: Vec<BatchPoint>,
    /// The largest batch predicted to fit the budget (when there is one and memory
    /// was measured).
    pub max_safe_batch: Option<u32>,
}

/// Runs the sweep on `backend`.
pub fn sweep(
    backend: &mut dyn Backend,
    config: &SweepConfig,
    probe: &dyn MemoryProbe,
    on_event: &mut dyn FnMut(SweepEvent),
) -> Result<Sweep, BackendError> {
    let metadata = backend.metadata().clone();
    let baseline = probe.bytes_in_use();
    let mut points: Vec<BatchPoint> = Vec::new();
    for &batch_size in &config.batch_sizes {
        if let (Some(budget), Some(predicted)) = (config.memory_budget_bytes, predict_memory(&points, batch_size))
            && predicted > budget
        {
            on_event(SweepEvent::Stopped { batch_size, predicted_bytes: predicted });
            break;
        }
        let inputs = || {
            zero_batch(&metadata, batch_size)
                .ok_or_else(|| BackendError::OutputMismatch("an input has an open dimension besides the batch".into()))
        };
        let total = config.warm_runs + 1;
        let mut times = Vec::with_capacity(total);
        for done in 1..=total {
            let batch = Batch { inputs: inputs()? };
            let start = Instant::now();
            backend.infer(batch)?;
            times.push(start.elapsed().as_secs_f64() * 1e3);
            on_event(SweepEvent::Ran { batch_size, done, total });
        }
        let first_run_ms = times[0];
        let warm = &mut times[1..];
        let memory_bytes = baseline.zip(probe.bytes_in_use()).map(|(before, now)| now.saturating_sub(before));
        let point = BatchPoint {
            batch_size: batch_size as u32,
            first_run_ms,
            warm_p50_ms: percentile(warm, 0.5),
            warm_p99_ms: percentile(warm, 0.99),
            warm_runs: warm.len() as u32,
            memory_bytes,
        };
        on_event(SweepEvent::Measured(point.clone()));
        points.push(point);
    }
    let max_safe_batch = config.memory_budget_bytes.and_then(|budget| largest_batch_within(&points, budget));
    Ok(Sweep { points, max_safe_batch })
}

/// Memory against batch size: a line through the sizes measured, or through 0 and the
/// one measured.
fn memory_line(points: &[BatchPoint]) -> Option<Line> {
    let measured: Vec<(f64, f64)> =
        points.iter().filter_map(|p| Some((f64::from(p.batch_size), p.memory_bytes? as f64))).collect();
    match measured.as_slice() {
        [] => None,
        [(b, m)] => Some(Line { slope: m / b, intercept: 0.0, r2: 1.0 }),
        _ => fit_line(&measured),
    }
}

/// Memory a batch of `batch_size` is predicted to need.
fn predict_memory(points: &[BatchPoint], batch_size: usize) -> Option<u64> {
    memory_line(points).map(|line| line.at(batch_size as f64).max(0.0) as u64)
}

/// The largest batch the memory line keeps within `budget`.
fn largest_batch_within(points: &[BatchPoint], budget: u64) -> Option<u32> {
    let line = memory_line(points)?;
    if line.slope <= 0.0 {
        return points.last().map(|p| p.batch_size);
    }
    Some(((budget as f64 - line.intercept) / line.slope).floor().max(0.0) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};

    const MIB: u64 = 1 << 20;

    #[test]
    fn sizes_are_powers_of_two_up_to_the_largest() {
        assert_eq!(SweepConfig::new(8).batch_sizes, vec![1, 2, 4, 8]);
        assert_eq!(SweepConfig::new(12).batch_sizes, vec![1, 2, 4, 8, 12]);
    }

    #[test]
    fn measures_the_first_and_the_warm_runs_of_each_size() {
        let log = BatchLog::default();
        let fake = FakeConfig { per_row: std::time::Duration::from_millis(1), ..FakeConfig::default() };
        let mut backend = FakeBackend::factory(fake, log.clone())().unwrap();
        let mut events = Vec::new();
        let config = SweepConfig::new(4).with_warm_runs(3);
        let result = sweep(backend.as_mut(), &config, &log, &mut |e| events.push(e)).unwrap();
        assert_eq!(log.sizes(), vec![1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4]);
        let sizes: Vec<u32> = result.points.iter().map(|p| p.batch_size).collect();
        assert_eq!(sizes, vec![1, 2, 4]);
        assert!(result.points.iter().all(|p| p.warm_runs == 3 && p.warm_p50_ms >= f64::from(p.batch_size)));
        assert_eq!(events.iter().filter(|e| matches!(e, SweepEvent::Measured(_))).count(), 3);
    }

    #[test]
    fn never_runs_a_batch_predicted_to_exceed_the_memory_budget() {
        let log = BatchLog::default();
        let fake = FakeConfig { memory_per_row: MIB, ..FakeConfig::default() };
        let mut backend = FakeBackend::factory(fake, log.clone())().unwrap();
        let config = SweepConfig::new(64).with_warm_runs(1).with_memory_budget(20 * MIB);
        let mut stopped = None;
        let result = sweep(backend.as_mut(), &config, &log, &mut |e| {
            if let SweepEvent::Stopped { batch_size, .. } = e {
                stopped = Some(batch_size);
            }
        })
        .unwrap();
        assert_eq!(stopped, Some(32));
        assert_eq!(log.sizes().into_iter().max(), Some(16), "nothing above the budget ran");
        assert_eq!(result.max_safe_batch, Some(20));
        assert_eq!(result.points.last().and_then(|p| p.memory_bytes), Some(16 * MIB));
    }
}
