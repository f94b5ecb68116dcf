//! How much of the executor each request takes. Co-located tasks that take turns run
//! small batches (1–1.5 rows each beside the others, measured at 40–98 % busy), whose
//! rows cost more than full batches' by each variant's own line: more for a variant
//! whose fixed cost is a larger part of a row (MobileNetV2-1.0 against 1.4). So the
//! rows a task's batches hold are counted, and a request's share is its variant's
//! line at that batch size, per row. What the lines still miss (a busy host slows
//! every batch) is the ratio of the busy time measured to what the lines say of the
//! batches as they ran, smoothed over ticks, which scales every share.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Bounds of the ratio: beyond them the counts are wrong, not the machine.
const LOWEST: f64 = 0.8;
const HIGHEST: f64 = 2.5;
/// Rows a window needs for its ratio to count: fewer are mostly single-row noise.
const MIN_ROWS: f64 = 20.0;
/// Batches a task's window needs for its batch size to count.
const MIN_BATCHES: f64 = 5.0;
/// Weight of the newest window.
const NEWEST: f64 = 0.5;

/// The rows of each task's batches, and the ratio of busy time to what the lines say.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Executor {
    factor: f64,
    rows_per_batch: BTreeMap<String, f64>,
}

impl Default for Executor {
    fn default() -> Self {
        Executor { factor: 1.0, rows_per_batch: BTreeMap::new() }
    }
}

impl Executor {
    /// Takes in a window in which the variants ran `rows` rows in `busy_ms`, where the
    /// lines say `lines_ms` for the same batches.
    pub fn observe(&mut self, rows: f64, busy_ms: f64, lines_ms: f64) {
        if rows < MIN_ROWS || lines_ms <= 0.0 {
            return;
        }
        self.factor = smoothed(self.factor, (busy_ms / lines_ms).clamp(LOWEST, HIGHEST));
    }

    /// Takes in a window in which `task` ran `rows` rows in `batches` batches.
    pub fn observe_batches(&mut self, task: &str, batches: f64, rows: f64) {
        if batches < MIN_BATCHES {
            return;
        }
        let size = rows / batches;
        let size = self.rows_per_batch.get(task).map_or(size, |&before| smoothed(before, size));
        self.rows_per_batch.insert(task.to_string(), size);
    }

    /// What a share by the lines is to be multiplied by.
    pub fn factor(&self) -> f64 {
        self.factor
    }

    /// Rows a batch of `task` has held lately, if it ran enough to tell.
    pub fn rows_per_batch(&self, task: &str) -> Option<f64> {
        self.rows_per_batch.get(task).copied()
    }
}

/// `before` moved `NEWEST` of the way to `newest`.
fn smoothed(before: f64, newest: f64) -> f64 {
    NEWEST * newest + (1.0 - NEWEST) * before
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slower_executor_raises_the_factor_towards_its_ratio_and_a_quiet_window_changes_nothing() {
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

    #[test]
    fn batch_sizes_are_kept_per_task_and_smoothed() {
        let mut executor = Executor::default();
        executor.observe_batches("a", 4.0, 20.0);
        assert_eq!(executor.rows_per_batch("a"), None, "4 batches say nothing");
        executor.observe_batches("a", 10.0, 10.0);
        assert_eq!(executor.rows_per_batch("a"), Some(1.0));
        executor.observe_batches("a", 10.0, 30.0);
        assert_eq!(executor.rows_per_batch("a"), Some(2.0), "half way to 3");
        assert_eq!(executor.rows_per_batch("b"), None);
    }
}
