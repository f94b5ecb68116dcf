//! Failed requests of one model: counted by reason (the label of the failure's
//! [`Error::kind`], [`ErrorKind::as_str`](crate::ErrorKind::as_str)) and
//! logged as warnings, at most one per reason per interval, so that an overload or a
//! broken variant fills neither the logs nor the disk. Each warning says how many like
//! it were held back since the one before.

use std::fmt::Display;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use prometheus::{IntCounter, IntCounterVec};

use crate::error::{Error, ErrorKind};

/// The reasons a request admitted, or offered, to a model can fail with: the label of
/// every [`ErrorKind`], then [`CANCELED`]. They are bound in advance, so that counting
/// one costs an atomic add and every reason shows in the metrics from the start, at
/// zero. Any other reason is bound when it first happens.
pub fn model_failure_reasons() -> impl Iterator<Item = &'static str> {
    ErrorKind::ALL.iter().map(|kind| kind.as_str()).chain([CANCELED])
}

/// The reason of a request whose caller went away before it ran. No error reaches
/// anyone, so none is logged.
pub const CANCELED: &str = "canceled";

/// How often a warning of one reason may be logged for one model.
pub const WARNING_INTERVAL: Duration = Duration::from_secs(10);

/// One model's failure counters and warnings.
pub struct ModelFailures {
    task: String,
    variant: String,
    by_reason: Vec<IntCounter>,
    family: IntCounterVec,
    others: Mutex<Vec<(&'static str, IntCounter)>>,
    warnings: WarningGate,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for ModelFailures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelFailures").field("task", &self.task).finish_non_exhaustive()
    }
}

impl ModelFailures {
    /// Counters of `family` (labelled task, variant, reason) for one model, every
    /// reason of `model_failure_reasons` bound in advance.
    pub fn new(family: &IntCounterVec, task: &str, variant: &str) -> Self {
        let bound = model_failure_reasons().map(|r| family.with_label_values(&[task, variant, r])).collect();
        Self::with_bound(family, task, variant, bound)
    }

    /// Counters of `family` bound only as each reason first happens, for failures
    /// that are rare or of few reasons.
    pub fn unbound(family: &IntCounterVec, task: &str, variant: &str) -> Self {
        Self::with_bound(family, task, variant, Vec::new())
    }

    fn with_bound(family: &IntCounterVec, task: &str, variant: &str, by_reason: Vec<IntCounter>) -> Self {
        ModelFailures {
            task: task.to_string(),
            variant: variant.to_string(),
            by_reason,
            family: family.clone(),
            others: Mutex::new(Vec::new()),
            warnings: WarningGate::new(WARNING_INTERVAL),
        }
    }

    /// Counts and logs a request that failed with `error`.
    pub fn failed(&self, error: &Error) {
        self.failed_with(error.kind().as_str(), error);
    }

    /// Counts and logs a request that failed for `reason`, as `message` says.
    pub fn failed_with(&self, reason: &'static str, message: &dyn Display) {
        self.count(reason);
        if let Some(held_back) = self.warnings.admit(reason, Instant::now()) {
            tracing::warn!(
                task = %self.task,
                variant = %self.variant,
                reason,
                held_back,
                "request failed: {message}"
            );
        }
    }

    /// Counts a request whose caller went away before it ran.
    pub fn canceled(&self) {
        self.count(CANCELED);
    }

    /// Failures so far, all reasons.
    pub fn total(&self) -> u64 {
        let bound: u64 = self.by_reason.iter().map(IntCounter::get).sum();
        bound + self.lock_others().iter().map(|(_, c)| c.get()).sum::<u64>()
    }

    /// Failures so far of `reason`.
    pub fn of(&self, reason: &str) -> u64 {
        match self.bound_index(reason) {
            Some(i) => self.by_reason[i].get(),
            None => self.lock_others().iter().filter(|(r, _)| *r == reason).map(|(_, c)| c.get()).sum(),
        }
    }

    fn count(&self, reason: &'static str) {
        if let Some(i) = self.bound_index(reason) {
            return self.by_reason[i].inc();
        }
        let mut others = self.lock_others();
        match others.iter().find(|(r, _)| *r == reason) {
            Some((_, counter)) => counter.inc(),
            None => {
                let counter = self.family.with_label_values(&[&self.task, &self.variant, reason]);
                counter.inc();
                others.push((reason, counter));
            }
        }
    }

    fn bound_index(&self, reason: &str) -> Option<usize> {
        model_failure_reasons().position(|r| r == reason).filter(|i| *i < self.by_reason.len())
    }

    fn lock_others(&self) -> std::sync::MutexGuard<'_, Vec<(&'static str, IntCounter)>> {
        self.others.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Lets one warning per key through per interval and counts those it holds back.
pub struct WarningGate {
    interval: Duration,
    keys: Mutex<Vec<(&'static str, Gate)>>,
}

struct Gate {
    last_logged: Instant,
    held_back: u64,
}

impl WarningGate {
    /// A gate that lets one warning per key through every `interval`.
    pub fn new(interval: Duration) -> Self {
        WarningGate { interval, keys: Mutex::new(Vec::new()) }
    }

    /// Whether a warning of `key` may be logged at `now`: `Some` with how many were
    /// held back since the last one logged, or `None` to hold this one back.
    pub fn admit(&self, key: &'static str, now: Instant) -> Option<u64> {
        let mut keys = self.keys.lock().unwrap_or_else(PoisonError::into_inner);
        let Some((_, gate)) = keys.iter_mut().find(|(k, _)| *k == key) else {
            keys.push((key, Gate { last_logged: now, held_back: 0 }));
            return Some(0);
        };
        if now.saturating_duration_since(gate.last_logged) < self.interval {
            gate.held_back += 1;
            return None;
        }
        gate.last_logged = now;
        Some(std::mem::take(&mut gate.held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_warning_per_key_and_interval_passes_and_says_how_many_were_held_back() {
        let gate = WarningGate::new(Duration::from_secs(10));
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        assert_eq!(gate.admit("overloaded", at(0)), Some(0));
        assert_eq!(gate.admit("overloaded", at(1)), None);
        assert_eq!(gate.admit("overloaded", at(9)), None);
        assert_eq!(gate.admit("backend_failed", at(9)), Some(0), "each key has its own gate");
        assert_eq!(gate.admit("overloaded", at(10)), Some(2));
        assert_eq!(gate.admit("overloaded", at(11)), None);
        assert_eq!(gate.admit("overloaded", at(25)), Some(1));
        assert_eq!(gate.admit("overloaded", at(40)), Some(0));
    }

    #[test]
    fn failures_are_counted_under_their_own_reason_bound_or_not() {
        let family = IntCounterVec::new(prometheus::Opts::new("failures_test", "test"), &["task", "variant", "reason"])
            .unwrap_or_else(|e| unreachable!("{e}"));
        let failures = ModelFailures::new(&family, "t", "v");
        let overloaded = Error::Overloaded { model: "v".into(), max_queue_size: 4 };
        for _ in 0..3 {
            failures.failed(&overloaded);
        }
        failures.failed(&Error::UnknownTask("x".into()));
        failures.failed_with("made_up", &"a reason of no kind");
        failures.canceled();
        assert_eq!(failures.of("queue_full"), 3);
        assert_eq!(failures.of("unknown_task"), 1);
        assert_eq!(failures.of("made_up"), 1, "a reason not bound in advance is counted too");
        assert_eq!(failures.of(CANCELED), 1);
        assert_eq!(failures.of("backend_failed"), 0);
        assert_eq!(failures.total(), 6);
        let other = ModelFailures::new(&family, "t", "w");
        assert_eq!(other.total(), 0, "another variant's failures are its own");
    }

    #[test]
    fn every_kind_of_error_is_a_reason_shown_at_zero_from_the_start() {
        let family = IntCounterVec::new(prometheus::Opts::new("failures_zero", "test"), &["task", "variant", "reason"])
            .unwrap_or_else(|e| unreachable!("{e}"));
        let _failures = ModelFailures::new(&family, "t", "v");
        let shown: Vec<String> = prometheus::core::Collector::collect(&family)
            .iter()
            .flat_map(|f| f.get_metric().iter().map(|m| m.get_label()[0].value().to_string()).collect::<Vec<_>>())
            .collect();
        for kind in ErrorKind::ALL {
            assert!(shown.iter().any(|r| r == kind.as_str()), "{kind:?} not bound: {shown:?}");
        }
        assert!(shown.iter().any(|r| r == CANCELED));
        assert_eq!(shown.len(), ErrorKind::ALL.len() + 1);
    }
}
