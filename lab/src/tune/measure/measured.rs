//! What one slice measured: the answer a measuring process gives, as a line of JSON.

use serde::{Deserialize, Serialize};

use crate::load::{Outcome, RunResult};
use crate::stats::mean_and_sd;
use crate::tune::reference::ModelAlone;

/// What one slice measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    /// Answers per second.
    pub throughput_per_s: f64,
    /// Answers within their SLO per second.
    pub goodput_per_s: f64,
    /// The mean latency of the answered requests, ms; `None` where none was.
    pub mean_ms: Option<f64>,
    /// Their 99th percentile latency, ms.
    pub p99_ms: Option<f64>,
    /// Requests sent and not answered.
    pub failed: u64,
}

impl Measured {
    /// What the model alone's rate means to `clients` closed-loop clients.
    pub fn of_model_alone(alone: &ModelAlone, clients: usize) -> Self {
        let latency = alone.closed_loop_latency_ms(clients);
        Measured {
            throughput_per_s: alone.rows_per_s,
            goodput_per_s: alone.rows_per_s,
            mean_ms: Some(latency),
            p99_ms: Some(latency),
            failed: 0,
        }
    }

    /// What a load run measured of its task.
    pub fn of_run(result: &RunResult) -> Self {
        let summary = result.summaries().into_iter().find(|s| s.task != "all").unwrap_or_default();
        let answered: Vec<f64> =
            result.records.iter().filter(|r| r.status == Outcome::Served).map(|r| r.latency_ms).collect();
        Measured {
            throughput_per_s: summary.throughput_per_s,
            goodput_per_s: summary.goodput_per_s,
            mean_ms: mean_and_sd(&answered).map(|(mean, _)| mean),
            p99_ms: summary.p99_ms,
            failed: summary.sent.saturating_sub(summary.completed),
        }
    }
}
