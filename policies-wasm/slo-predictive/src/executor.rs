//! How much of the executor the batches really take, against what the latency lines
//! say full batches of the same rows would. Co-located tasks that take turns run
//! small batches (1–1.5 rows each beside the others, measured at 40–98 % busy), and
//! a busy host slows every batch: the share predicted from full batches then falls
//! short of the busy time measured, and it is the busy time that queues build on.
//! The ratio of the two, smoothed over ticks, scales every predicted share.

use serde::{Deserialize, Serialize};

/// Bounds of the ratio: beyond them the counts are wrong, not the machine.
const LOWEST: f64 = 0.8;
const HIGHEST: f64 = 2.5;
/// Rows a window needs for its ratio to count: fewer are mostly single-row noise.
const MIN_ROWS: f64 = 20.0;
/// Weight of the newest window.
const NEWEST: f64 = 0.5;

/// The ratio of busy time to the full-batch time the lines predict.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Executor {
    factor: f64,
}

impl Default for Executor {
    fn default() -> Self {
        Executor { factor: 1.0 }
    }
}

impl Executor {
    /// Takes in a window in which the variants ran `rows` rows in `busy_ms`, where full
    /// batches would have taken `full_batches_ms`.
    pub fn observe(&mut self, rows: f64, busy_ms: f64, full_batches_ms: f64) {
        if rows < MIN_ROWS || full_batches_ms <= 0.0 {
            return;
        }
        let ratio = (busy_ms / full_batches_ms).clamp(LOWEST, HIGHEST);
        self.factor = NEWEST * ratio + (1.0 - NEWEST) * self.factor;
    }

    /// What a share predicted from full batches is to be multiplied by.
    pub fn factor(&self) -> f64 {
        self.factor
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_batches_raise_the_factor_towards_their_ratio_and_a_quiet_window_changes_nothing() {
        let mut executor = Executor::default();
        assert_eq!(executor.factor(), 1.0);
        executor.observe(10.0, 500.0, 100.0);
        assert_eq!(executor.factor(), 1.0, "10 rows say nothing");
        executor.observe(50.0, 600.0, 400.0);
        assert!((executor.factor() - 1.25).abs() < 1e-9, "half way to 1.5");
        executor.observe(50.0, 600.0, 400.0);
        assert!((executor.factor() - 1.375).abs() < 1e-9);
        executor.observe(50.0, 5_000.0, 400.0);
        assert!(executor.factor() <= HIGHEST, "bounded");
    }
}
