//! Loads offered to a model: a closed loop, whose rate is the most the model answers,
//! and a steady load at fixed intervals, to check that it sustains a rate without its
//! queue growing.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::Error;
use crate::model::{Model, Ticket};
use crate::request::{InferOptions, Inputs};
use crate::stats::percentile;
use crate::warmup::zero_batch;

/// Threads waiting for a steady load's answers; more than a batch, so that a whole
/// batch's answers are taken as they come.
const WAITERS: usize = 64;

/// What a steady load found.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SteadyLoad {
    /// Requests sent.
    pub sent: usize,
    /// Requests answered (with their outputs, not an error).
    pub answered: usize,
    /// Requests per second offered.
    pub offered_per_s: f64,
    /// Requests per second answered, over the time until the last answer.
    pub served_per_s: f64,
    /// Median latency of the requests sent in the first quarter, in ms.
    pub early_p50_ms: f64,
    /// Median latency of the requests sent in the last quarter, in ms.
    pub late_p50_ms: f64,
}

impl SteadyLoad {
    /// Whether the model kept up: latency did not climb over the run (a growing queue
    /// adds the backlog to every later request) and nearly all was served.
    pub fn sustained(&self) -> bool {
        self.late_p50_ms <= 2.0 * self.early_p50_ms + 50.0 && self.served_per_s >= 0.95 * self.offered_per_s
    }
}

/// One request of a single zero-filled row for `model`.
fn single_row(model: &Model) -> Result<Inputs, Error> {
    let row = zero_batch(model.metadata(), 1).ok_or_else(|| {
        Error::Precondition(format!(
            "`{}` has open dimensions besides the batch: no request can be made up for it",
            model.name()
        ))
    })?;
    Ok(model.metadata().inputs.iter().map(|s| s.name.clone()).zip(row).collect())
}

/// Requests per second `model` answers when `clients` callers each send single-row
/// requests one after another for `duration`; `on_progress(seconds done, of)`.
pub fn closed_loop(
    model: &Model,
    clients: usize,
    duration: Duration,
    on_progress: &mut dyn FnMut(f64, f64),
) -> Result<f64, Error> {
    let (served, elapsed) = closed_loop_count(model, clients, duration, on_progress)?;
    Ok(served as f64 / elapsed.as_secs_f64())
}

/// The requests a [`closed_loop`] had answered, and the time it took.
fn closed_loop_count(
    model: &Model,
    clients: usize,
    duration: Duration,
    on_progress: &mut dyn FnMut(f64, f64),
) -> Result<(usize, Duration), Error> {
    let request = single_row(model)?;
    let start = Instant::now();
    let served = std::thread::scope(|s| {
        let callers: Vec<_> = (0..clients)
            .map(|_| {
                s.spawn(|| {
                    let mut served = 0usize;
                    while start.elapsed() < duration {
                        model.submit(request.clone(), InferOptions::default())?.wait()?;
                        served += 1;
                    }
                    Ok::<usize, Error>(served)
                })
            })
            .collect();
        while start.elapsed() < duration {
            std::thread::sleep(Duration::from_millis(250));
            on_progress(start.elapsed().as_secs_f64().min(duration.as_secs_f64()), duration.as_secs_f64());
        }
        callers.into_iter().map(|c| c.join().unwrap_or(Err(Error::ShuttingDown))).sum::<Result<usize, Error>>()
    })?;
    Ok((served, start.elapsed()))
}

/// Offers `rate` requests per second to `model` for `duration`.
pub fn steady_load(model: &Model, rate: f64, duration: Duration) -> Result<SteadyLoad, Error> {
    let request = single_row(model)?;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let count = (duration.as_secs_f64() * rate) as usize;
    let answers = Mutex::new(Vec::with_capacity(count));
    let start = Instant::now();
    // The sender only submits; a fixed pool waits for the answers, so that the load
    // itself costs little CPU even at hundreds of requests a second.
    let (tickets, waiting) = crossbeam_channel::unbounded::<(usize, Instant, Result<Ticket, Error>)>();
    std::thread::scope(|s| {
        for _ in 0..WAITERS {
            let (waiting, answers) = (waiting.clone(), &answers);
            s.spawn(move || {
                for (i, scheduled, ticket) in waiting {
                    if ticket.and_then(Ticket::wait).is_ok()
                        && let Ok(mut a) = answers.lock()
                    {
                        a.push((i, scheduled.elapsed().as_secs_f64() * 1e3));
                    }
                }
            });
        }
        for i in 0..count {
            let scheduled = start + interval * i as u32;
            if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
            let _ = tickets.send((i, scheduled, model.submit(request.clone(), InferOptions::default())));
        }
        drop(tickets);
    });
    let elapsed = start.elapsed().as_secs_f64();
    let answers = answers.into_inner().unwrap_or_else(|p| p.into_inner());
    let quarter = |from: usize, to: usize| -> Vec<f64> {
        answers.iter().filter(|(i, _)| (from..to).contains(i)).map(|a| a.1).collect()
    };
    Ok(SteadyLoad {
        sent: count,
        answered: answers.len(),
        offered_per_s: rate,
        served_per_s: answers.len() as f64 / elapsed,
        early_p50_ms: percentile(&mut quarter(0, count / 4), 0.5),
        late_p50_ms: percentile(&mut quarter(count - count / 4, count), 0.5),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use crate::batching::BatchingConfig;

    /// A model that serves at most 100 requests a second: 10 ms a batch of one.
    fn slow_model_logged(log: BatchLog) -> Model {
        let fake = FakeConfig { per_batch: Duration::from_millis(10), ..FakeConfig::default() };
        let factory = FakeBackend::factory(fake, log);
        Model::start("fake", factory, 1, BatchingConfig::default().with_max_batch_size(1)).unwrap()
    }

    #[test]
    fn a_closed_loop_counts_every_request_the_model_ran_and_none_beyond() {
        let log = BatchLog::default();
        let model = slow_model_logged(log.clone());
        let before = log.sizes().len();
        let (served, _) = closed_loop_count(&model, 2, Duration::from_millis(300), &mut |_, _| {}).unwrap();
        // Batches of one: each request counted is one batch run.
        assert!(served > 0);
        assert_eq!(served, log.sizes().len() - before);
    }

    #[test]
    fn a_steady_load_sends_its_rate_for_its_duration_and_waits_for_every_answer() {
        // Three times what the fake's sleep allows: its queue grows, yet every request
        // sent is answered before the load returns.
        let log = BatchLog::default();
        let model = slow_model_logged(log.clone());
        let load = steady_load(&model, 300.0, Duration::from_millis(400)).unwrap();
        assert_eq!(load.sent, 120);
        assert_eq!(load.answered, 120);
        assert_eq!(log.sizes().len(), 120);
        assert_eq!(load.offered_per_s, 300.0);
    }

    #[test]
    fn a_load_is_sustained_when_latency_holds_and_nearly_all_is_served() {
        let load = |served_per_s, early_p50_ms, late_p50_ms| SteadyLoad {
            sent: 100,
            answered: 100,
            offered_per_s: 100.0,
            served_per_s,
            early_p50_ms,
            late_p50_ms,
        };
        assert!(load(99.0, 10.0, 12.0).sustained());
        assert!(load(95.0, 10.0, 70.0).sustained(), "within twice the early latency and 50 ms");
        assert!(!load(99.0, 10.0, 71.0).sustained(), "latency climbed: a queue grew");
        assert!(!load(94.0, 10.0, 10.0).sustained(), "a twentieth went unserved");
    }
}
