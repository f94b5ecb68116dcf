//! How much slower or faster than its profile a variant's batches ran, by the batch's
//! rows: what calibration finds and a calibrated model runs by.

use serde::{Deserialize, Serialize};

/// Bounds of a ratio to the profile: beyond them the counts or the profile are wrong,
/// not the machine.
pub(super) const FASTEST: f64 = 0.5;
pub(super) const SLOWEST: f64 = 3.0;

/// A batch's time over its profile's line, by the batch's rows:
/// `at_one + per_row · (rows − 1)`, within [0.5, 3].
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct RatioLine {
    /// The ratio for a batch of one row.
    pub at_one: f64,
    /// How it changes with each further row.
    pub per_row: f64,
}

impl RatioLine {
    /// The ratio for a batch of `rows`.
    pub fn at(&self, rows: f64) -> f64 {
        (self.at_one + self.per_row * (rows - 1.0)).clamp(FASTEST, SLOWEST)
    }
}
