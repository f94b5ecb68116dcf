//! Refusals the machine could have served. A refusal is *needless* when the variant
//! that would have served the request had an empty queue, or answered under
//! [`BUSY_SHARE`] of its profiled capacity in the second it was refused in: admission
//! turned work away that the variant had the time to do. A refusal of a variant that
//! was answering about all it can is admission doing its job. Pure (time is passed
//! in): the runtime's queues and the simulator count them alike.

use std::time::{Duration, Instant};

/// The share of its profiled capacity a variant must answer in a second for the
/// refusals of that second (made with a queue) to count as needed.
pub const BUSY_SHARE: f64 = 0.8;

const SECOND: Duration = Duration::from_secs(1);

/// One variant's refusals and answers, second by second.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RefusalLedger {
    /// When the open second began; `None` until the first refusal or answer.
    second: Option<Instant>,
    /// Rows answered in the open second.
    answered: u64,
    /// Rows answered in the second before it (0 when it was not the one just before).
    answered_before: u64,
    /// Refusals in the open second made while requests were queued: needless unless
    /// the second ends busy.
    refused_with_queue: u64,
    /// Needless refusals so far.
    needless: u64,
}

impl RefusalLedger {
    /// A request was refused at `now`, its variant's queue empty or not, the variant
    /// able to answer `capacity_per_s` (`None` where no profile says). Returns how
    /// many refusals became needless by it (this one, and those of a second it ended).
    pub fn refused(&mut self, now: Instant, queue_empty: bool, capacity_per_s: Option<f64>) -> u64 {
        let ended = self.roll(now, capacity_per_s);
        if queue_empty {
            self.needless += 1;
            return ended + 1;
        }
        self.refused_with_queue += 1;
        ended
    }

    /// `rows` rows were answered at `now`. Returns how many refusals became needless by
    /// it (those of a second it ended).
    pub fn answered(&mut self, now: Instant, rows: u64, capacity_per_s: Option<f64>) -> u64 {
        let ended = self.roll(now, capacity_per_s);
        self.answered += rows;
        ended
    }

    /// Ends the open second if `now` is past it, as a refusal or an answer at `now`
    /// would. Returns how many refusals became needless by it.
    pub fn settle(&mut self, now: Instant, capacity_per_s: Option<f64>) -> u64 {
        if self.second.is_none() {
            return 0;
        }
        self.roll(now, capacity_per_s)
    }

    /// Needless refusals so far (those of the open second not yet judged).
    pub fn needless(&self) -> u64 {
        self.needless
    }

    /// Whether the variant answers about all it can at `now`: over the last second
    /// (the open second's rows and the share of the one before that the window still
    /// covers), at least `BUSY_SHARE` (0.8) of `capacity_per_s`. Without a capacity, it is
    /// taken as busy. A refusal made while it is not busy would be needless.
    pub fn busy(&self, now: Instant, capacity_per_s: Option<f64>) -> bool {
        let Some(capacity) = capacity_per_s else { return true };
        let Some(second) = self.second else { return false };
        let into = now.saturating_duration_since(second);
        let (open, before) = match into.as_secs_f64() {
            s if s < 1.0 => (self.answered as f64, self.answered_before as f64 * (1.0 - s)),
            // The open second has ended: it is the one before now.
            s if s < 2.0 => (0.0, self.answered as f64 * (2.0 - s)),
            _ => (0.0, 0.0),
        };
        open + before >= BUSY_SHARE * capacity
    }

    /// Ends the open second if `now` is past it: its refusals made with a queue are
    /// needless if it answered under [`BUSY_SHARE`] of `capacity_per_s`. Returns them.
    fn roll(&mut self, now: Instant, capacity_per_s: Option<f64>) -> u64 {
        let Some(second) = self.second else {
            self.second = Some(now);
            return 0;
        };
        if now.saturating_duration_since(second) < SECOND {
            return 0;
        }
        let busy = capacity_per_s.is_none_or(|c| self.answered as f64 >= BUSY_SHARE * c);
        let needless = if busy { 0 } else { self.refused_with_queue };
        self.needless += needless;
        // Seconds stay aligned with the first one; those with nothing in them pass.
        let passed = (now.saturating_duration_since(second).as_secs_f64()).floor();
        self.second = Some(second + SECOND.mul_f64(passed));
        self.answered_before = if passed < 2.0 { self.answered } else { 0 };
        (self.answered, self.refused_with_queue) = (0, 0);
        needless
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(start: Instant, ms: u64) -> Instant {
        start + Duration::from_millis(ms)
    }

    #[test]
    fn a_refusal_with_nothing_queued_is_needless_at_once() {
        let start = Instant::now();
        let mut ledger = RefusalLedger::default();
        assert_eq!(ledger.refused(start, true, Some(100.0)), 1);
        assert_eq!(ledger.refused(at(start, 10), true, None), 1, "with or without a profile");
        assert_eq!(ledger.needless(), 2);
    }

    #[test]
    fn refusals_with_a_queue_are_needless_only_in_a_second_the_variant_answered_little() {
        let start = Instant::now();
        let mut ledger = RefusalLedger::default();
        let capacity = Some(100.0);
        // Second 0: 85 rows answered of 100 it can, three refusals: needed.
        for i in 0..85 {
            ledger.answered(at(start, i * 10), 1, capacity);
        }
        for i in 0..3 {
            assert_eq!(ledger.refused(at(start, 900 + i), false, capacity), 0);
        }
        // Second 1 ends second 0 busy; 50 rows and two refusals of its own.
        assert_eq!(ledger.answered(at(start, 1_000), 50, capacity), 0);
        ledger.refused(at(start, 1_500), false, capacity);
        ledger.refused(at(start, 1_600), false, capacity);
        assert_eq!(ledger.needless(), 0);
        // Second 3 (second 2 had nothing) ends second 1: 50 of 100 is under 0.8.
        assert_eq!(ledger.answered(at(start, 3_200), 1, capacity), 2);
        assert_eq!(ledger.needless(), 2);
        // Settled by a reading after the second, its refusals are judged at once.
        ledger.refused(at(start, 3_300), false, capacity);
        assert_eq!(ledger.settle(at(start, 3_900), capacity), 0, "the second is still open");
        assert_eq!(ledger.settle(at(start, 4_100), capacity), 1);
        assert_eq!(ledger.needless(), 3);
        // Without a profile, a second with a queue is taken as busy.
        ledger.refused(at(start, 4_300), false, None);
        assert_eq!(ledger.answered(at(start, 5_100), 1, None), 0);
        assert_eq!(ledger.needless(), 3);
    }

    #[test]
    fn a_variant_is_busy_while_it_answers_most_of_its_capacity_over_the_last_second() {
        let start = Instant::now();
        let mut ledger = RefusalLedger::default();
        let capacity = Some(100.0);
        assert!(!ledger.busy(start, capacity), "nothing answered yet");
        assert!(ledger.busy(start, None), "without a capacity, nothing says otherwise");
        for i in 0..90 {
            ledger.answered(at(start, i * 10), 1, capacity);
        }
        assert!(ledger.busy(at(start, 950), capacity), "90 in the second");
        // Half a second into the next: half of the 90 before, and 20 since.
        for i in 0..20 {
            ledger.answered(at(start, 1_000 + i * 20), 1, capacity);
        }
        assert!(!ledger.busy(at(start, 1_500), capacity), "45 + 20 of 100");
        assert!(!ledger.busy(at(start, 4_000), capacity), "a quiet spell after it");
    }
}
