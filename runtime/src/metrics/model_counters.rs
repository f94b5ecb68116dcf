//! One model's counters, bound to its labels once when it starts, so that serving a
//! request costs a few atomic adds; and the totals read back from them.

use std::time::Duration;

use prometheus::{Histogram, IntCounter};

use super::failures::ModelFailures;
use crate::error::Error;
use crate::request::Timings;

/// The stages of a request, each with a histogram named after Triton's cumulative
/// counters: decode and preprocess (its images), queue, compute input, infer, output.
pub(super) const STAGES: [(&str, &str); 6] = [
    ("modelless_inference_decode_duration_seconds", "Time decoding a request's images"),
    ("modelless_inference_preprocess_duration_seconds", "Time resizing and normalising a request's images"),
    ("modelless_inference_queue_wait_duration_seconds", "Time a request waited for preprocessing and its batch"),
    ("modelless_inference_compute_input_duration_seconds", "Time joining a request's batch inputs"),
    ("modelless_inference_compute_infer_duration_seconds", "Time the backend ran a request's batch"),
    ("modelless_inference_compute_output_duration_seconds", "Time splitting a request's batch outputs"),
];

/// One model's counters, bound to its labels.
pub struct ModelCounters {
    pub(super) success: IntCounter,
    pub(super) failures: ModelFailures,
    pub(super) inferences: IntCounter,
    pub(super) executions: IntCounter,
    pub(super) request_us: IntCounter,
    pub(super) queue_us: IntCounter,
    pub(super) compute_us: IntCounter,
    pub(super) io_us: IntCounter,
    pub(super) batch_run_us: IntCounter,
    pub(super) needless_refusals: IntCounter,
    pub(super) latency: Histogram,
    /// In the order of [`STAGES`].
    pub(super) stages: [Histogram; STAGES.len()],
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for ModelCounters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelCounters").finish_non_exhaustive()
    }
}

impl ModelCounters {
    /// Counts one batch run, which its session took `run` to run.
    pub fn executed(&self, run: Duration) {
        self.executions.inc();
        self.batch_run_us.inc_by(run.as_micros() as u64);
    }

    /// Counts a request of `rows` rows answered after `timings`.
    pub fn served(&self, rows: usize, timings: &Timings) {
        self.success.inc();
        self.inferences.inc_by(rows as u64);
        self.request_us.inc_by(timings.total.as_micros() as u64);
        self.queue_us.inc_by(timings.queue.as_micros() as u64);
        self.compute_us.inc_by(timings.compute.as_micros() as u64);
        self.io_us.inc_by((timings.compute_input + timings.postprocess).as_micros() as u64);
        self.latency.observe(timings.total.as_secs_f64());
        let stages = [
            timings.decode,
            timings.preprocess,
            timings.queue,
            timings.compute_input,
            timings.compute,
            timings.postprocess,
        ];
        for (histogram, took) in self.stages.iter().zip(stages) {
            histogram.observe(took.as_secs_f64());
        }
    }

    /// Counts and logs (rate-limited) a request that failed with `error`.
    pub fn failed(&self, error: &Error) {
        self.failures.failed(error);
    }

    /// Counts and logs (rate-limited) a request refused for `reason` before it became
    /// an [`Error`] (an endpoint could not decode it), as `message` says.
    pub fn refused(&self, reason: &'static str, message: &dyn std::fmt::Display) {
        self.failures.failed_with(reason, message);
    }

    /// Counts `count` refusals the model had the time to serve (already counted by
    /// reason when they were refused).
    pub fn needless_refusals(&self, count: u64) {
        if count > 0 {
            self.needless_refusals.inc_by(count);
        }
    }

    /// Refusals so far that the model had the time to serve.
    pub fn needless_refused(&self) -> u64 {
        self.needless_refusals.get()
    }

    /// Counts a request whose caller went away before it ran.
    pub fn canceled(&self) {
        self.failures.canceled();
    }

    /// Requests failed so far for `reason` (an error's [`Error::kind`]).
    pub fn failed_of(&self, reason: &str) -> u64 {
        self.failures.of(reason)
    }

    /// The totals so far.
    pub fn totals(&self) -> ModelTotals {
        ModelTotals {
            success: self.success.get(),
            failure: self.failures.total(),
            inferences: self.inferences.get(),
            executions: self.executions.get(),
            request: Duration::from_micros(self.request_us.get()),
            queue: Duration::from_micros(self.queue_us.get()),
            compute: Duration::from_micros(self.compute_us.get()),
            io: Duration::from_micros(self.io_us.get()),
            batch_run: Duration::from_micros(self.batch_run_us.get()),
        }
    }
}

/// A model's counters read at one moment, for statistics endpoints.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ModelTotals {
    /// Requests answered.
    pub success: u64,
    /// Requests not answered, all reasons.
    pub failure: u64,
    /// Rows inferred.
    pub inferences: u64,
    /// Batches run.
    pub executions: u64,
    /// Time of successful requests, admission to answer.
    pub request: Duration,
    /// Time they waited in the queue.
    pub queue: Duration,
    /// Time their batches ran.
    pub compute: Duration,
    /// Time joining and splitting their batches.
    pub io: Duration,
    /// Time the sessions ran the batches, each batch once, not counting waits for a
    /// turn.
    pub batch_run: Duration,
}
