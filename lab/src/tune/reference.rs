//! The model alone: how fast the variant's sessions answer when nothing serves them
//! (no queue, no batching, no preprocessing), run back to back with zero-filled
//! batches. In a closed loop of `c` clients, Little's law makes `c ÷ rows per second`
//! the mean latency of a server that added nothing to the session; the best of the
//! batch sizes the clients can fill, on one session with every core or one session
//! per core, is the reference a tuned setting is held against.

use std::time::{Duration, Instant};

use modelless::RuntimeConfig;
use modelless::backend::{Backend, Batch};
use modelless_runtime::warmup::zero_batch;

use super::TuneError;

/// Runs before the timed ones, per batch size and session.
const WARM_RUNS: usize = 2;

/// What the model alone reached.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ModelAlone {
    /// Rows per second at its best batch size.
    pub rows_per_s: f64,
    /// That batch size.
    pub batch: usize,
}

impl ModelAlone {
    /// The mean latency, ms, of `clients` clients sending back to back to a server
    /// that answers this fast.
    pub fn closed_loop_latency_ms(&self, clients: usize) -> f64 {
        clients as f64 * 1000.0 / self.rows_per_s
    }
}

/// Batch sizes `clients` clients can fill, up to `max_batch`: powers of two and the
/// largest.
pub fn batch_sizes(clients: usize, max_batch: usize) -> Vec<usize> {
    let largest = clients.min(max_batch).max(1);
    let mut sizes: Vec<usize> =
        std::iter::successors(Some(1usize), |b| Some(b * 2)).take_while(|&b| b < largest).collect();
    sizes.push(largest);
    sizes
}

/// The variant's sessions, loaded once and run as often as asked.
pub struct Sessions {
    backends: Vec<Box<dyn Backend + Send>>,
    max_batch: usize,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions").field("sessions", &self.backends.len()).field("max_batch", &self.max_batch).finish()
    }
}

impl Sessions {
    /// `sessions` sessions of `variant` in `config` (whose ONNX Runtime settings are
    /// already applied).
    pub fn load(config: &RuntimeConfig, task: &str, variant: &str, sessions: usize) -> Result<Self, TuneError> {
        let configured = config
            .tasks
            .iter()
            .filter(|t| t.name == task)
            .flat_map(|t| &t.variants)
            .find(|v| v.name == variant)
            .ok_or_else(|| TuneError::UnknownVariant { task: task.into(), variant: variant.into() })?;
        let factory = configured.backend_factory(&config.onnxruntime, &configured.path);
        let backends = (0..sessions.max(1))
            .map(|_| factory().map_err(|source| TuneError::LoadVariant { variant: variant.into(), source }))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Sessions { backends, max_batch: configured.batching.max_batch_size })
    }

    /// Each session running batches back to back for `seconds` split over the batch
    /// sizes `clients` clients can fill; as many sessions run as the clients can keep
    /// busy.
    pub fn run(&mut self, clients: usize, seconds: f64) -> Result<ModelAlone, TuneError> {
        let sizes = batch_sizes(clients, self.max_batch);
        let each = Duration::from_secs_f64((seconds / sizes.len() as f64).max(0.3));
        let mut best: Option<ModelAlone> = None;
        for &batch in &sizes {
            let busy = (clients / batch).clamp(1, self.backends.len());
            let rows = std::thread::scope(|s| {
                let runs: Vec<_> = self.backends[..busy]
                    .iter_mut()
                    .map(|backend| s.spawn(move || run_back_to_back(backend.as_mut(), batch, each)))
                    .collect();
                runs.into_iter()
                    .map(|r| r.join().map_err(|_| TuneError::Measurement("a session's thread panicked".into()))?)
                    .collect::<Result<Vec<_>, _>>()
            })?;
            let rows_per_s: f64 = rows.iter().map(|&(n, took)| n as f64 / took.as_secs_f64()).sum();
            if best.is_none_or(|b| rows_per_s > b.rows_per_s) {
                best = Some(ModelAlone { rows_per_s, batch });
            }
        }
        best.ok_or_else(|| TuneError::Measurement("no batch size to run".into()))
    }
}

/// Rows one session ran at `batch` in about `each`, and how long that took.
fn run_back_to_back(
    backend: &mut (dyn Backend + Send),
    batch: usize,
    each: Duration,
) -> Result<(usize, Duration), TuneError> {
    let inputs = zero_batch(backend.metadata(), batch)
        .ok_or_else(|| TuneError::Measurement("the model has open dimensions besides the batch".into()))?;
    for _ in 0..WARM_RUNS {
        backend.infer(Batch { inputs: inputs.clone() })?;
    }
    let start = Instant::now();
    let mut runs = 0;
    while start.elapsed() < each {
        backend.infer(Batch { inputs: inputs.clone() })?;
        runs += 1;
    }
    Ok((runs * batch, start.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_batch_sizes_are_those_the_clients_can_fill() {
        assert_eq!(batch_sizes(1, 32), vec![1]);
        assert_eq!(batch_sizes(8, 32), vec![1, 2, 4, 8]);
        assert_eq!(batch_sizes(32, 24), vec![1, 2, 4, 8, 16, 24]);
        assert_eq!(batch_sizes(12, 32), vec![1, 2, 4, 8, 12]);
    }

    #[test]
    fn little_s_law_turns_a_rate_into_a_closed_loop_latency() {
        let alone = ModelAlone { rows_per_s: 250.0, batch: 8 };
        assert!((alone.closed_loop_latency_ms(32) - 128.0).abs() < 1e-9);
        assert!((alone.closed_loop_latency_ms(1) - 4.0).abs() < 1e-9);
    }
}
