//! The margin admission keeps between a predicted answer and its deadline, learned
//! from how answers came against their predictions. Pure (time is passed in).
//!
//! An answer comes later than predicted when something the prediction does not see
//! slows the batch or its queue: photos decoding on the cores the session runs on, a
//! descheduled process, a page-fault storm. The margin holds a high quantile of how
//! far recent batches' answers came after their predictions (each batch's worst
//! answer, late or in time, early ones included), so it follows the error's
//! distribution rather than its worst case:
//! - an error that persists, one batch in a few overrunning, holds the margin at its
//!   size for as long as it lasts ([`QUANTILE`] of the last [`WINDOW`] batches);
//! - slowdowns that recur, a few batches in a hundred, hold it at their size too
//!   ([`TAIL_QUANTILE`] of the last [`TAIL_WINDOW`]): under overload every queue is
//!   filled to its deadline, so each batch that overruns the margin makes the
//!   requests at the queue's end late, and a margin that covered only nine batches
//!   in ten would let about one request in a hundred miss;
//! - one stall, a batch or two late, moves nothing: the queue it left is in the
//!   predictions already, and refusing for it would turn away requests the machine
//!   then had the time for.
//!
//! Until a variant has answered [`WINDOW`] batches, the batches it has not run count as
//! answered as predicted: it starts from its profile (and again when it is switched
//! to, or an instance joins). A request with nothing queued ahead of it is judged
//! without the margin (see the queue): refusing it would be a certain miss.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Of the time a request has left, the share admission keeps in hand even when
/// answers come as predicted: an answer predicted for its very deadline would be late
/// as often as not (the answer still has to reach the caller).
const HEADROOM_SHARE: f64 = 0.05;
/// The least headroom admission keeps.
const MIN_HEADROOM: Duration = Duration::from_millis(1);
/// An overrun is measured against the prediction, or against this share of the
/// request's time when the prediction was shorter: a 1 ms hiccup on a 1 ms prediction
/// says nothing about a 300 ms one.
const FLOOR_SHARE: f64 = 0.1;
/// The most predictions are stretched by: a request stalled for seconds (a
/// descheduled process) would otherwise close the model to everything.
pub const MAX_STRETCH: f64 = 4.0;
/// Batches whose overruns the quantile is taken over: at the rates CPU variants serve,
/// about half a second to two of batches.
pub const WINDOW: usize = 20;
/// The quantile of recent batches' overruns the margin keeps: two batches of
/// [`WINDOW`] may overrun it, so that a stall's batch or two moves nothing while an
/// error of one batch in seven or more holds it; the batch's own spread and the
/// headroom cover most of the rest.
pub const QUANTILE: f64 = 0.9;
/// Batches the tail quantile is taken over: a few seconds of batches at the rates CPU
/// variants serve under overload.
pub const TAIL_WINDOW: usize = 200;
/// The quantile of the last [`TAIL_WINDOW`] batches' overruns the margin keeps at
/// least: two stalls of [`TAIL_WINDOW`] move nothing, a third sets it.
pub const TAIL_QUANTILE: f64 = 0.99;
/// Batches older than this say nothing of now: a variant that served a minute ago,
/// under another load, starts again from its predictions.
pub const MAX_AGE: Duration = Duration::from_secs(5);

/// What admission predicted for a request it let in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prediction {
    /// When admission judged it.
    pub made: Instant,
    /// When it predicted the answer.
    pub answer: Instant,
    /// When the answer is due.
    pub deadline: Instant,
}

impl Prediction {
    /// The prediction's wait, or the floor share of the time left when that is longer.
    fn scale(&self) -> Duration {
        let predicted = self.answer.saturating_duration_since(self.made);
        predicted.max(self.deadline.saturating_duration_since(self.made).mul_f64(FLOOR_SHARE))
    }

    /// How far an answer at `answered` came after the predicted one, as a share of the
    /// prediction's scale: negative when it came early.
    fn overrun(&self, answered: Instant) -> f64 {
        let scale = self.scale().as_secs_f64();
        if scale <= 0.0 {
            return 0.0;
        }
        let after = answered.saturating_duration_since(self.answer).as_secs_f64();
        let before = self.answer.saturating_duration_since(answered).as_secs_f64();
        (after - before) / scale
    }
}

/// How answers came against their predictions lately.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct AdmissionMargin {
    /// The last [`TAIL_WINDOW`] batches answered: when, and the overrun of their
    /// worst answer. Newest last.
    recent: VecDeque<(Instant, f64)>,
    /// The overrun the margin keeps ([`kept_overrun`]), as of the last batch.
    quantile: f64,
}

impl AdmissionMargin {
    /// What predictions are stretched by at `now` (1: taken as they are).
    pub fn stretch(&self, now: Instant) -> f64 {
        let fresh = |at: Instant| now.saturating_duration_since(at) < MAX_AGE;
        let quantile = match self.recent.front() {
            None => 0.0,
            Some(&(oldest, _)) if fresh(oldest) => self.quantile,
            // Some batches aged out since the quantile was taken: take it again.
            Some(_) => kept_overrun(self.recent.iter().filter(|&&(at, _)| fresh(at)).map(|&(_, o)| o)),
        };
        1.0 + quantile.clamp(0.0, MAX_STRETCH - 1.0)
    }

    /// Whether an answer predicted at `answer` for a request judged at `now` and due at
    /// `deadline`, stretched by the margin, leaves the headroom in hand; `Err` holds
    /// the stretched answer when it does not.
    pub fn admits(&self, now: Instant, answer: Instant, deadline: Instant) -> Result<(), Instant> {
        let prediction = Prediction { made: now, answer, deadline };
        let stretched = answer + prediction.scale().mul_f64(self.stretch(now) - 1.0);
        let left = deadline.saturating_duration_since(now);
        let headroom = left.mul_f64(HEADROOM_SHARE).max(MIN_HEADROOM);
        if stretched + headroom <= deadline { Ok(()) } else { Err(stretched) }
    }

    /// A batch whose requests were admitted on `predictions` was answered at
    /// `answered`: its worst overrun joins the recent ones.
    pub fn observe_batch(&mut self, predictions: &[Prediction], answered: Instant) {
        let worst = predictions.iter().map(|p| p.overrun(answered)).max_by(f64::total_cmp);
        if let Some(overrun) = worst {
            self.remember(answered, overrun);
        }
    }

    /// Requests admitted on `predictions` were given up at `at` as unable to make
    /// their deadlines: as late as answers at their deadlines, together one batch.
    pub fn observe_given_up(&mut self, predictions: &[Prediction], at: Instant) {
        let worst = predictions.iter().map(|p| p.overrun(at.max(p.deadline))).max_by(f64::total_cmp);
        if let Some(overrun) = worst {
            self.remember(at, overrun);
        }
    }

    /// Forgets every batch: the variant starts again from its predictions (it was
    /// just switched to, or an instance just joined it).
    pub fn forget(&mut self) {
        *self = AdmissionMargin::default();
    }

    fn remember(&mut self, at: Instant, overrun: f64) {
        if self.recent.len() == TAIL_WINDOW {
            self.recent.pop_front();
        }
        self.recent.push_back((at, overrun));
        while self.recent.front().is_some_and(|&(then, _)| at.saturating_duration_since(then) >= MAX_AGE) {
            self.recent.pop_front();
        }
        self.quantile = kept_overrun(self.recent.iter().map(|&(_, o)| o));
    }
}

/// The overrun the margin keeps for `overruns` (oldest first): the larger of the
/// last [`WINDOW`]'s [`QUANTILE`] and the [`TAIL_QUANTILE`] of them all.
fn kept_overrun(overruns: impl Iterator<Item = f64>) -> f64 {
    let all: Vec<f64> = overruns.collect();
    let last = all[all.len().saturating_sub(WINDOW)..].to_vec();
    quantile_of(last, QUANTILE, WINDOW).max(quantile_of(all, TAIL_QUANTILE, TAIL_WINDOW))
}

/// The `quantile` of `overruns`, the batches of `window` they do not fill counted as
/// answered as predicted (0): the smallest value that at least that share of them do
/// not exceed.
fn quantile_of(mut overruns: Vec<f64>, quantile: f64, window: usize) -> f64 {
    overruns.resize(overruns.len().max(window), 0.0);
    overruns.sort_by(f64::total_cmp);
    let rank = ((quantile * overruns.len() as f64).ceil() as usize).clamp(1, overruns.len());
    overruns[rank - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// A prediction made at `made`, of an answer `answer_ms` later, due `due_ms` later.
    fn predicted(made: Instant, answer_ms: u64, due_ms: u64) -> Prediction {
        Prediction { made, answer: made + ms(answer_ms), deadline: made + ms(due_ms) }
    }

    /// `count` batches of four, each predicted at 40 ms of 250 and answered
    /// `answered_ms` after it was predicted, one after the other from `now`.
    fn batches(margin: &mut AdmissionMargin, now: &mut Instant, count: usize, answered_ms: u64) {
        for _ in 0..count {
            margin.observe_batch(&[predicted(*now, 40, 250); 4], *now + ms(answered_ms));
            *now += ms(answered_ms);
        }
    }

    /// `rounds` times: `in_time` batches answered as predicted (40 ms), then one
    /// answered at `slow_ms`.
    fn recurring(margin: &mut AdmissionMargin, now: &mut Instant, rounds: usize, in_time: usize, slow_ms: u64) {
        for _ in 0..rounds {
            batches(margin, now, in_time, 40);
            batches(margin, now, 1, slow_ms);
        }
    }

    #[test]
    fn without_overruns_admission_keeps_only_the_headroom_both_ways() {
        let now = Instant::now();
        let margin = AdmissionMargin::default();
        // Due in 100 ms, the headroom is 5 ms: an answer predicted at 95 ms just holds.
        assert_eq!(margin.admits(now, now + ms(95), now + ms(100)), Ok(()));
        let late = now + Duration::from_micros(95_001);
        assert_eq!(margin.admits(now, late, now + ms(100)), Err(late));
        // Below 20 ms left the headroom is the 1 ms floor.
        assert_eq!(margin.admits(now, now + ms(5), now + ms(6)), Ok(()));
        assert!(margin.admits(now, now + Duration::from_micros(5_001), now + ms(6)).is_err());
    }

    #[test]
    fn after_one_stall_admission_admits_again_once_the_next_batch_answers_in_time() {
        let mut now = Instant::now();
        let mut margin = AdmissionMargin::default();
        batches(&mut margin, &mut now, 25, 40);
        assert_eq!(margin.stretch(now), 1.0);
        // A stall: two batches in a row, predicted at 120 ms of 250, answered at 300
        // (50 ms late) and at 270.
        margin.observe_batch(&[predicted(now, 120, 250); 4], now + ms(300));
        margin.observe_batch(&[predicted(now, 120, 250); 4], now + ms(270));
        now += ms(300);
        // The next batch answers in time: a request predicted at 120 ms of 250 is
        // admitted as it was before the stall (refused were its prediction stretched
        // by the stall's 2.5).
        batches(&mut margin, &mut now, 1, 40);
        assert_eq!(margin.stretch(now), 1.0);
        assert_eq!(margin.admits(now, now + ms(120), now + ms(250)), Ok(()));
    }

    #[test]
    fn a_fresh_variant_starts_from_its_profile_and_one_late_batch_moves_nothing() {
        let now = Instant::now();
        let mut margin = AdmissionMargin::default();
        margin.observe_batch(&[predicted(now, 100, 150); 2], now + ms(300));
        assert_eq!(margin.stretch(now + ms(300)), 1.0, "one batch of the window; the rest as predicted");
        margin.observe_batch(&[predicted(now, 100, 150)], now + ms(300));
        margin.observe_batch(&[predicted(now, 100, 150)], now + ms(300));
        assert_eq!(margin.stretch(now + ms(300)), 3.0, "three of twenty overran twice their prediction");
        margin.forget();
        assert_eq!(margin.stretch(now + ms(300)), 1.0);
        assert_eq!(margin, AdmissionMargin::default());
    }

    #[test]
    fn an_error_that_persists_holds_the_margin_while_batches_come_in_time() {
        let mut now = Instant::now();
        let mut margin = AdmissionMargin::default();
        // One batch in five comes at twice its prediction, in time; the others as
        // predicted.
        recurring(&mut margin, &mut now, 8, 4, 80);
        assert!((margin.stretch(now) - 2.0).abs() < 1e-9, "{}", margin.stretch(now));
        // A request predicted at 120 ms of 250 is refused while it lasts.
        assert!(margin.admits(now, now + ms(120), now + ms(250)).is_err());
        // Once it stops, a window of batches in time leaves its eight slow batches to
        // the tail, which holds the margin; batches in time for longer than a tail is
        // kept forget it.
        batches(&mut margin, &mut now, WINDOW, 40);
        assert!((margin.stretch(now) - 2.0).abs() < 1e-9, "{}", margin.stretch(now));
        batches(&mut margin, &mut now, (MAX_AGE.as_millis() / 40) as usize, 40);
        assert_eq!(margin.stretch(now), 1.0);
    }

    #[test]
    fn slowdowns_that_recur_hold_the_margin_at_their_size() {
        let mut now = Instant::now();
        let mut margin = AdmissionMargin::default();
        // One batch in forty comes at 1.5 times its prediction: never two in the
        // last twenty, so the window's quantile sees none of them.
        recurring(&mut margin, &mut now, 3, 39, 60);
        assert!((margin.stretch(now) - 1.5).abs() < 1e-9, "{}", margin.stretch(now));
        // Two such slowdowns alone move nothing.
        let mut now = Instant::now();
        let mut margin = AdmissionMargin::default();
        recurring(&mut margin, &mut now, 2, 39, 60);
        batches(&mut margin, &mut now, WINDOW, 40);
        assert_eq!(margin.stretch(now), 1.0);
    }

    #[test]
    fn the_margin_follows_the_error_distribution_not_its_worst_case() {
        let mut now = Instant::now();
        let mut margin = AdmissionMargin::default();
        // Batches that come early hold it at none, whatever the odd late one did.
        batches(&mut margin, &mut now, 9, 30);
        batches(&mut margin, &mut now, 1, 160);
        batches(&mut margin, &mut now, 9, 30);
        assert_eq!(margin.stretch(now), 1.0);
        // Three more at 1.5, 2 and 3 times their prediction: of the four of twenty
        // that overran, the margin is the third worst, not the worst.
        batches(&mut margin, &mut now, 1, 60);
        batches(&mut margin, &mut now, 1, 80);
        batches(&mut margin, &mut now, 1, 120);
        assert!((margin.stretch(now) - 2.0).abs() < 1e-9, "{}", margin.stretch(now));
    }

    #[test]
    fn batches_age_out_and_the_stretch_is_bounded() {
        let now = Instant::now();
        let mut margin = AdmissionMargin::default();
        // Given up at their deadlines after stalls of seconds: as far as it goes.
        for i in 0..3 {
            let made = now + ms(i);
            margin.observe_given_up(&[predicted(made, 10, 100)], made + Duration::from_secs(3));
        }
        let then = now + Duration::from_secs(3) + ms(2);
        assert_eq!(margin.stretch(then), MAX_STRETCH);
        // With no batch since, they are forgotten once they are old.
        assert_eq!(margin.stretch(then + MAX_AGE), 1.0);
        // And dropped once a batch comes after that.
        margin.observe_batch(&[predicted(then + MAX_AGE, 40, 250)], then + MAX_AGE + ms(40));
        assert_eq!(margin.recent.len(), 1);
    }
}
