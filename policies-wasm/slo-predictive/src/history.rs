//! A task's arrivals over the last minute, as running totals at each tick: what the
//! spread of per-second demand (see [`crate::queue::spread`]) and a ramp (see
//! [`crate::ramp`]) are measured from. Ticks come about once a second, early ones
//! between them, and each lands a few milliseconds off the second; so the arrivals
//! counted at each tick are kept as a running total, and each second's count is the
//! total's growth over that second, read between ticks as if arrivals came evenly
//! (seconds end at the last tick: a count never straddles two ticks' worth).

use serde::{Deserialize, Serialize};

/// How far back the totals go, ms (the seconds counted, plus one to read from).
const KEPT_MS: u64 = 61_000;

/// Running totals of arrivals at each tick: (time ms, arrivals so far), oldest first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct History {
    totals: Vec<(u64, u64)>,
}

impl History {
    /// Counts `arrived` requests at a tick at `now_ms`.
    pub fn record(&mut self, now_ms: u64, arrived: u64) {
        let total = self.totals.last().map_or(0, |t| t.1) + arrived;
        self.totals.push((now_ms, total));
        // Keep the last total before the oldest second, to read its start from.
        let start = now_ms.saturating_sub(KEPT_MS);
        let before = self.totals.iter().take_while(|t| t.0 <= start).count();
        self.totals.drain(..before.saturating_sub(1));
    }

    /// The arrivals of each whole second up to the last tick, oldest first.
    pub fn counts(&self) -> Vec<f64> {
        let (Some(&(first_ms, _)), Some(&(last_ms, _))) = (self.totals.first(), self.totals.last()) else {
            return Vec::new();
        };
        // The first tick's total holds what came before it, from any time: seconds start after it.
        let seconds = (last_ms - first_ms) / 1_000;
        (0..seconds)
            .rev()
            .filter_map(|k| {
                let end = last_ms - k * 1_000;
                Some(self.total_at(end)? - self.total_at(end - 1_000)?)
            })
            .collect()
    }

    /// The first tick kept: its time and running total.
    pub fn first(&self) -> Option<&(u64, u64)> {
        self.totals.first()
    }

    /// The last tick's time and running total.
    pub fn last(&self) -> Option<&(u64, u64)> {
        self.totals.last()
    }

    /// The running total at `at_ms`, read linearly between the ticks around it;
    /// `None` before the first tick or after the last.
    pub fn total_at(&self, at_ms: u64) -> Option<f64> {
        let after = self.totals.iter().position(|t| t.0 >= at_ms)?;
        let (t1, c1) = self.totals[after];
        if after == 0 {
            return (t1 == at_ms).then_some(c1 as f64);
        }
        let (t0, c0) = self.totals[after - 1];
        let share = (at_ms - t0) as f64 / (t1 - t0).max(1) as f64;
        Some(c0 as f64 + share * (c1 as f64 - c0 as f64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_second_counts_what_came_in_it_however_the_ticks_fall() {
        let mut history = History::default();
        history.record(1_000, 50);
        history.record(2_000, 10);
        assert_eq!(history.counts(), vec![10.0], "what came before the first tick is no second's");
        // A tick 4 ms late, then one on time: the seconds still hold 10 each, not 0
        // and 20.
        history.record(3_004, 10);
        history.record(4_000, 10);
        let counts = history.counts();
        assert_eq!(counts.len(), 3);
        assert!(counts.iter().all(|c| (c - 10.0).abs() < 0.1), "{counts:?}");
        // Seconds end at the last tick: after an early one at 4.3 s and the next at
        // 5.3 s, the last second is what came after the early tick, and the one
        // before it the early tick's 3 and 0.7 s of the second before (7).
        history.record(4_300, 3);
        history.record(5_300, 7);
        let counts = history.counts();
        assert_eq!(counts.last(), Some(&7.0));
        assert!((counts[counts.len() - 2] - 10.0).abs() < 0.1, "{counts:?}");
    }

    #[test]
    fn ticks_between_seconds_are_interpolated() {
        let mut history = History::default();
        for (t, n) in [(0, 0), (1_000, 10), (1_500, 10), (3_000, 20)] {
            history.record(t, n);
        }
        assert_eq!(history.total_at(1_250), Some(15.0));
        assert_eq!(history.total_at(2_250), Some(30.0));
        assert_eq!(history.total_at(4_000), None);
    }

    #[test]
    fn a_minute_is_kept() {
        let mut history = History::default();
        for s in 1..=100 {
            history.record(s * 1_000, s);
        }
        let counts = history.counts();
        assert_eq!(counts.len(), 61);
        assert_eq!(counts.last(), Some(&100.0));
    }
}
