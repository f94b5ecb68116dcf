//! Profiles: what a variant costs on the machine it runs on. Measured by the runtime,
//! stored beside the model, and read by policies inside the snapshot.

use serde::{Deserialize, Serialize};

/// What a profile was measured for; a stored profile is reused only when all match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProfileKey {
    /// SHA-256 of the model file, hex.
    pub model_sha256: String,
    /// Device it ran on, e.g. `cpu`.
    pub device: String,
    /// The settings it ran with (threads, optimisation level, …), as canonical JSON.
    pub settings: String,
}

/// Latency of one batch size.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct BatchPoint {
    /// Rows in the batch.
    pub batch_size: u32,
    /// The first run at this size (a warm-up outlier), in ms.
    pub first_run_ms: f64,
    /// Median of the warm runs, in ms.
    pub warm_p50_ms: f64,
    /// 99th percentile of the warm runs, in ms.
    pub warm_p99_ms: f64,
    /// Warm runs measured.
    pub warm_runs: u32,
    /// Memory in use after running it, above what was in use before the sweep.
    pub memory_bytes: Option<u64>,
}

/// Warm batch latency as a line: `L(b) = a·b + c`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencyFit {
    /// Milliseconds each row adds.
    pub a_ms: f64,
    /// Milliseconds every batch costs.
    pub c_ms: f64,
    /// Coefficient of determination of the fit over the points it was made from.
    pub r2: f64,
}

/// The least R² a latency fit needs to be kept and trusted: below it the points are
/// noise about the line (a first-run outlier, a device that had not settled), and a
/// cost predicted from it would refuse or admit at random.
pub const MIN_FIT_R2: f64 = 0.9;

impl LatencyFit {
    /// Whether the fit is good enough to predict from: its R² is at least
    /// [`MIN_FIT_R2`], its figures are finite, and it prices every batch (a batch of
    /// one costs something, and a row never costs less than nothing).
    pub fn is_trusted(&self) -> bool {
        self.distrust().is_none()
    }

    /// Why the fit is not trusted, for logs and reports; `None` where it is.
    pub fn distrust(&self) -> Option<String> {
        let figures = format!("a {:.3} ms/row, c {:.3} ms", self.a_ms, self.c_ms);
        if !(self.r2 >= MIN_FIT_R2 && self.a_ms.is_finite() && self.c_ms.is_finite()) {
            return Some(format!(
                "R² {:.3} below {MIN_FIT_R2} ({figures}): the batch sizes' latencies do not lie on a line",
                self.r2
            ));
        }
        let one = self.predict_ms(1);
        if one <= 0.0 || self.a_ms < 0.0 {
            // High R² over large batches can hide a curve: per-row cost that grows with
            // the batch gives a line through the large ones that is negative at one row.
            return Some(format!(
                "it predicts {one:.3} ms for a batch of 1 ({figures}, R² {:.3}): the latencies bend away from a line at small batches",
                self.r2
            ));
        }
        None
    }

    /// Predicted warm latency of a batch of `batch_size` rows, in ms.
    pub fn predict_ms(&self, batch_size: u32) -> f64 {
        self.a_ms * f64::from(batch_size) + self.c_ms
    }
}

/// The most requests per second a variant sustains, and the batch size it takes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Throughput {
    /// Requests (rows) per second.
    pub requests_per_s: f64,
    /// Batch size at which it is reached.
    pub batch_size: u32,
}

/// One first run of a batch size in a fresh session, with what the machine was doing:
/// the data the warm-up predictor learns from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct FirstRunSample {
    /// Rows in the batch.
    pub batch_size: u32,
    /// The largest batch the session had run before (0 for none).
    pub largest_before: u32,
    /// Involuntary context switches of the process's threads during the run.
    pub involuntary_switches: u64,
    /// Memory the process had in use before the run, in bytes.
    pub memory_in_use_bytes: u64,
    /// The run's time, in ms.
    pub first_run_ms: f64,
}

/// A variant's profile.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Profile {
    /// What it was measured for.
    pub key: ProfileKey,
    /// One point per batch size run, smallest first.
    pub points: Vec<BatchPoint>,
    /// Warm latency against batch size, when measured and trusted (R² at least
    /// [`MIN_FIT_R2`]).
    pub fit: Option<LatencyFit>,
    /// Why the measured fit was not kept, when it was not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fit_refused: Option<String>,
    /// Maximal throughput, when measured.
    pub max_throughput: Option<Throughput>,
    /// The memory budget the sweep respected.
    pub memory_budget_bytes: Option<u64>,
    /// The largest batch predicted to fit the budget.
    pub max_safe_batch: Option<u32>,
    /// First runs in fresh sessions, every batch size in random orders.
    #[serde(default)]
    pub first_runs: Vec<FirstRunSample>,
}

impl Profile {
    /// The profile priced as if every batch ran `factor` times as long as measured
    /// (at least 1): what a machine planned on more cores than it has gives each
    /// instance. The line's slope and intercept grow by the factor and the maximal
    /// throughput shrinks by it; the measured points stay as measured.
    pub fn slowed_by(mut self, factor: f64) -> Profile {
        let factor = if factor.is_finite() { factor.max(1.0) } else { 1.0 };
        if let Some(fit) = &mut self.fit {
            fit.a_ms *= factor;
            fit.c_ms *= factor;
        }
        if let Some(throughput) = &mut self.max_throughput {
            throughput.requests_per_s /= factor;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slowed_profile_prices_batches_longer_and_answers_fewer() {
        let profile = Profile {
            key: ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() },
            points: Vec::new(),
            fit: Some(LatencyFit { a_ms: 2.0, c_ms: 4.0, r2: 0.99 }),
            fit_refused: None,
            max_throughput: Some(Throughput { requests_per_s: 300.0, batch_size: 8 }),
            memory_budget_bytes: None,
            max_safe_batch: None,
            first_runs: Vec::new(),
        };
        let slowed = profile.clone().slowed_by(2.0);
        assert_eq!(slowed.fit, Some(LatencyFit { a_ms: 4.0, c_ms: 8.0, r2: 0.99 }));
        assert_eq!(slowed.max_throughput.map(|t| t.requests_per_s), Some(150.0));
        assert_eq!(profile.clone().slowed_by(0.5), profile, "never faster than measured");
        assert_eq!(profile.clone().slowed_by(f64::NAN), profile);
    }
}
