//! The batch-size sweep: for each size, the first run (a warm-up outlier) and then
//! warm runs, on the variant's own device and settings; memory after each size, and a
//! stop before any size predicted to exceed the memory budget.

use std::time::Instant;

use modelless_policy_abi::BatchPoint;

use super::fit::{Line, fit_line_or_proportional};
use super::memory::MemoryProbe;
use crate::backend::{Backend, Batch, ModelMetadata};
use crate::error::BackendError;
use crate::stats::percentile;
use crate::warmup::zero_batch;

/// What to measure.
#[derive(Clone, Debug, PartialEq)]
pub struct SweepConfig {
    /// Batch sizes, smallest first.
    pub batch_sizes: Vec<usize>,
    /// Warm runs per size, after the first.
    pub warm_runs: usize,
    /// The warm runs are spread over this many passes across all sizes, so that a
    /// machine whose speed drifts slows every size alike rather than a few.
    pub passes: usize,
    /// Never run a batch predicted to need more memory than this (bytes above what
    /// was in use before the sweep).
    pub memory_budget_bytes: Option<u64>,
    /// Untimed runs each time a pass comes back to a size, before its timed ones:
    /// a GPU session that meets another input shape than its last sets up its kernels
    /// for it again, and that run is not what a batch of the size costs while sizes
    /// repeat. `None`: one on a GPU, none on a CPU.
    pub settle_runs: Option<usize>,
}

impl SweepConfig {
    /// Powers of two up to `max_batch_size` (and it), 20 warm runs, no budget.
    pub fn new(max_batch_size: usize) -> Self {
        let mut sizes: Vec<usize> = (0..).map(|i| 1usize << i).take_while(|&b| b <= max_batch_size).collect();
        if sizes.last() != Some(&max_batch_size) && max_batch_size > 0 {
            sizes.push(max_batch_size);
        }
        SweepConfig { batch_sizes: sizes, warm_runs: 30, passes: 10, memory_budget_bytes: None, settle_runs: None }
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
    /// A run finished: `done` of the sweep's `total` runs.
    Ran {
        /// The batch size it ran.
        batch_size: usize,
        /// Runs done in the sweep.
        done: usize,
        /// Runs planned in the sweep.
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
    let batch_sizes = runnable_sizes(&config.batch_sizes, &metadata);
    let baseline = probe.bytes_in_use();
    let passes = config.passes.clamp(1, config.warm_runs.max(1));
    let settle = config.settle_runs.unwrap_or(usize::from(backend.device().cuda_index().is_some()));
    let total = batch_sizes.len() * (config.warm_runs + 1 + settle * passes);
    let mut done = 0;
    let mut run = |backend: &mut dyn Backend, batch_size: usize, on_event: &mut dyn FnMut(SweepEvent)| {
        let ms = time_batch(backend, &metadata, batch_size)?;
        done += 1;
        on_event(SweepEvent::Ran { batch_size, done, total });
        Ok::<f64, BackendError>(ms)
    };
    // The first pass runs each size for the first time (smallest first, stopping
    // before one predicted to exceed the memory budget); every pass adds warm runs.
    let mut points: Vec<BatchPoint> = Vec::new();
    let mut warm: Vec<Vec<f64>> = Vec::new();
    for pass in 0..passes {
        let runs = config.warm_runs * (pass + 1) / passes - config.warm_runs * pass / passes;
        for (i, &batch_size) in batch_sizes.iter().enumerate() {
            if pass == 0 {
                if let (Some(budget), Some(predicted)) =
                    (config.memory_budget_bytes, predict_memory(&points, batch_size))
                    && predicted > budget
                {
                    on_event(SweepEvent::Stopped { batch_size, predicted_bytes: predicted });
                    break;
                }
                let first_run_ms = run(backend, batch_size, on_event)?;
                let memory_bytes = baseline.zip(probe.bytes_in_use()).map(|(before, now)| now.saturating_sub(before));
                points.push(BatchPoint {
                    batch_size: batch_size as u32,
                    first_run_ms,
                    warm_p50_ms: f64::NAN,
                    warm_p99_ms: f64::NAN,
                    warm_runs: 0,
                    memory_bytes,
                });
                warm.push(Vec::new());
            }
            if i >= points.len() {
                break;
            }
            for _ in 0..if runs > 0 { settle } else { 0 } {
                run(backend, batch_size, on_event)?;
            }
            for _ in 0..runs {
                warm[i].push(run(backend, batch_size, on_event)?);
            }
        }
    }
    for (point, times) in points.iter_mut().zip(&mut warm) {
        point.warm_runs = times.len() as u32;
        point.warm_p50_ms = percentile(times, 0.5);
        point.warm_p99_ms = percentile(times, 0.99);
        on_event(SweepEvent::Measured(point.clone()));
    }
    let max_safe_batch = config.memory_budget_bytes.and_then(|budget| largest_batch_within(&points, budget));
    Ok(Sweep { points, max_safe_batch })
}

/// The sizes of `asked` that `metadata`'s model can run: a model whose batch
/// dimension is fixed runs batches of one only, and timing it at larger sizes would
/// time one row under each size's name (a flat line, refused as noise).
fn runnable_sizes(asked: &[usize], metadata: &ModelMetadata) -> Vec<usize> {
    if metadata.dynamic_batch() {
        return asked.to_vec();
    }
    if asked.is_empty() { Vec::new() } else { vec![1] }
}

/// Runs one zero-filled batch; its time in ms.
fn time_batch(backend: &mut dyn Backend, metadata: &ModelMetadata, batch_size: usize) -> Result<f64, BackendError> {
    let inputs = zero_batch(metadata, batch_size)
        .ok_or_else(|| BackendError::InputMismatch("an input has an open dimension besides the batch".into()))?;
    let start = Instant::now();
    backend.infer(Batch { inputs })?;
    Ok(start.elapsed().as_secs_f64() * 1e3)
}

/// Memory against batch size: a line through the sizes measured, or through 0 and the
/// one measured.
fn memory_line(points: &[BatchPoint]) -> Option<Line> {
    let measured: Vec<(f64, f64)> =
        points.iter().filter_map(|p| Some((f64::from(p.batch_size), p.memory_bytes? as f64))).collect();
    fit_line_or_proportional(&measured)
}

/// Memory a batch of `batch_size` is predicted to need.
pub(crate) fn predict_memory(points: &[BatchPoint], batch_size: usize) -> Option<u64> {
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
        let config = SweepConfig { passes: 1, ..SweepConfig::new(4).with_warm_runs(3) };
        let result = sweep(backend.as_mut(), &config, &log, &mut |e| events.push(e)).unwrap();
        assert_eq!(log.sizes(), vec![1, 1, 1, 1, 2, 2, 2, 2, 4, 4, 4, 4]);
        let sizes: Vec<u32> = result.points.iter().map(|p| p.batch_size).collect();
        assert_eq!(sizes, vec![1, 2, 4]);
        assert!(result.points.iter().all(|p| p.warm_runs == 3 && p.warm_p50_ms >= f64::from(p.batch_size)));
        assert_eq!(events.iter().filter(|e| matches!(e, SweepEvent::Measured(_))).count(), 3);
    }

    #[test]
    fn passes_take_turns_over_the_sizes_after_each_first_run() {
        let log = BatchLog::default();
        let mut backend = FakeBackend::factory(FakeConfig::default(), log.clone())().unwrap();
        let config = SweepConfig { passes: 2, ..SweepConfig::new(2).with_warm_runs(4) };
        let result = sweep(backend.as_mut(), &config, &log, &mut |_| {}).unwrap();
        assert_eq!(log.sizes(), vec![1, 1, 1, 2, 2, 2, 1, 1, 2, 2]);
        assert!(result.points.iter().all(|p| p.warm_runs == 4));
    }

    #[test]
    fn settling_runs_come_before_the_timed_ones_each_time_a_pass_returns_to_a_size() {
        let log = BatchLog::default();
        let mut backend = FakeBackend::factory(FakeConfig::default(), log.clone())().unwrap();
        let config = SweepConfig { passes: 2, settle_runs: Some(1), ..SweepConfig::new(2).with_warm_runs(2) };
        let mut last = None;
        let result = sweep(backend.as_mut(), &config, &log, &mut |e| {
            if let SweepEvent::Ran { done, total, .. } = e {
                last = Some((done, total));
            }
        })
        .unwrap();
        // First run, then per pass one settling run and one timed run of each size.
        assert_eq!(log.sizes(), vec![1, 1, 1, 2, 2, 2, 1, 1, 2, 2]);
        assert!(result.points.iter().all(|p| p.warm_runs == 2), "settling runs are not timed");
        assert_eq!(last, Some((10, 10)), "progress counts them");
    }

    #[test]
    fn a_model_whose_batch_dimension_is_fixed_is_swept_at_the_one_size_it_runs() {
        let log = BatchLog::default();
        let fake = FakeConfig { dynamic_batch: false, ..FakeConfig::default() };
        let mut backend = FakeBackend::factory(fake, log.clone())().unwrap();
        let config = SweepConfig { passes: 1, ..SweepConfig::new(8).with_warm_runs(2) };
        let result = sweep(backend.as_mut(), &config, &log, &mut |_| {}).unwrap();
        let sizes: Vec<u32> = result.points.iter().map(|p| p.batch_size).collect();
        assert_eq!(sizes, [1], "sizes 2, 4 and 8 would each have run one row");
        assert_eq!(log.sizes(), [1, 1, 1]);
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
