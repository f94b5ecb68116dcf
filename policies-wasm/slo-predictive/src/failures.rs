//! Variants a task left because they were seen failing (answers late, or turned away)
//! while the prediction said they would not. The prediction was wrong there, by
//! something it does not see (a host that stalls, preprocessing beside the sessions),
//! and stepping straight back up would fail again: a task flaps between two variants.
//!
//! A step back up is a bet: it gains the accuracy between the two variants on every
//! request while it holds, and the last time it cost the late answers seen. So it waits
//! until the accuracy it would have gained since outweighs what the failure cost,
//! `late · accuracy / (Δaccuracy · demand)` seconds, twice that after a second failure
//! soon after the first, and so on; and then until the demand a step up is judged by
//! is below the demand the variant failed at (that demand is what it could not serve),
//! or two minutes have passed (the machine may have changed). No variant at least as
//! accurate (as costly) is tried before then either.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Longest wait before a failed variant is tried again, at any demand, ms.
const MOST_WAIT_MS: f64 = 120_000.0;
/// Most doublings of the wait.
const MOST_REPEATS: u32 = 4;

/// One task's failure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Failure {
    /// The variant's accuracy: variants at least as accurate wait as well.
    pub accuracy: f64,
    /// When it failed, ms.
    pub at_ms: u64,
    /// How long a step up to it (or above) waits from then, ms.
    pub wait_ms: u64,
    /// Failures soon after the one before, in a row.
    pub repeats: u32,
    /// The demand it failed at, requests/s.
    pub demand: f64,
}

/// What a task saw when it stepped down from a variant that failed.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Seen {
    /// The accuracy of the variant left, and of the one stepped down to.
    pub left: f64,
    pub to: f64,
    /// Answers late or turned away in the window.
    pub late: u64,
    /// Requests per second.
    pub demand: f64,
}

/// Per task, its last failure.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Failures {
    tasks: BTreeMap<String, Failure>,
}

impl Failures {
    /// `task` stepped down at `now_ms` after `seen`; `least_wait_ms` is the shortest
    /// wait (the policy's own after any change).
    pub fn failed(&mut self, task: &str, seen: Seen, now_ms: u64, least_wait_ms: u64) {
        let gain_per_s = (seen.left - seen.to).max(0.0) * seen.demand.max(1.0);
        let cost = seen.late as f64 * seen.left;
        let repeats = match self.tasks.get(task) {
            // Failing again within twice the last wait, at the same variant or above:
            // the last wait was too short.
            Some(last) if seen.left >= last.accuracy && now_ms < last.at_ms + 2 * last.wait_ms => {
                (last.repeats + 1).min(MOST_REPEATS)
            }
            _ => 0,
        };
        let wait_ms = if gain_per_s > 0.0 { cost / gain_per_s * 1e3 } else { MOST_WAIT_MS };
        let wait_ms = (wait_ms * f64::from(1u32 << repeats)).clamp(least_wait_ms as f64, MOST_WAIT_MS) as u64;
        let failure = Failure { accuracy: seen.left, at_ms: now_ms, wait_ms, repeats, demand: seen.demand };
        self.tasks.insert(task.into(), failure);
    }

    /// Whether `task` may step up to a variant of `accuracy` at `now_ms`, a step up
    /// being judged at `demand`.
    pub fn may_try(&self, task: &str, accuracy: f64, demand: f64, now_ms: u64) -> bool {
        self.tasks.get(task).is_none_or(|f| {
            let waited = now_ms >= f.at_ms + f.wait_ms && demand < f.demand;
            accuracy < f.accuracy || waited || now_ms as f64 >= f.at_ms as f64 + MOST_WAIT_MS
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEEN: Seen = Seen { left: 77.6, to: 76.7, late: 3, demand: 18.0 };

    #[test]
    fn a_step_back_up_waits_until_the_accuracy_gained_would_repay_the_late_answers() {
        let mut failures = Failures::default();
        failures.failed("t", SEEN, 10_000, 3_000);
        // 3 late answers of 77.6 against 0.9 points on 18 requests a second: 14.4 s.
        let wait = 3.0 * 77.6 / (0.9 * 18.0) * 1e3;
        let after = 10_000 + wait as u64;
        assert!(!failures.may_try("t", 77.6, 15.0, after - 1));
        assert!(failures.may_try("t", 77.6, 15.0, after + 1));
        assert!(!failures.may_try("t", 77.6, 18.0, after + 1), "not at the demand it failed at");
        assert!(failures.may_try("t", 77.6, 18.0, 130_000), "two minutes on, at any");
        assert!(!failures.may_try("t", 78.0, 15.0, 20_000), "a variant more accurate waits as well");
        assert!(failures.may_try("t", 76.7, 18.0, 10_001), "one less accurate does not");
        assert!(failures.may_try("u", 77.6, 18.0, 10_001), "nor another task");
    }

    #[test]
    fn failing_again_soon_after_doubles_the_wait_and_a_failure_long_after_starts_afresh() {
        let mut failures = Failures::default();
        failures.failed("t", SEEN, 0, 3_000);
        let first = failures.tasks["t"].wait_ms;
        failures.failed("t", SEEN, first + 1_000, 3_000);
        assert_eq!(failures.tasks["t"].wait_ms, 2 * first);
        failures.failed("t", SEEN, 1_000_000, 3_000);
        assert_eq!(failures.tasks["t"].wait_ms, first);
        // One late answer at a high demand repays within a second: the least wait holds.
        failures.failed("t", Seen { late: 1, demand: 200.0, ..SEEN }, 2_000_000, 3_000);
        assert_eq!(failures.tasks["t"].wait_ms, 3_000);
    }
}
