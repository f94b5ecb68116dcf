//! The margin admission keeps between a predicted answer and its deadline, learned
//! from how late answers came against their predictions. Pure (time is passed in).
//!
//! The batch cost's correction follows the model's runs, but not what happens around
//! them: on the cores a decoder shares with the session, a batch formed while large
//! photos decode runs three to five times its idle time, and a request admitted while
//! the decoder was quiet answers late. The margin stretches each prediction by the
//! worst overrun seen lately, so that what admission lets in is answered in time. A
//! request with nothing ahead of it on an idle instance is judged as predicted: the
//! queue a stall leaves is what the stretch guards against, and refusing a request
//! that waits for nothing is a certain miss (after one stall, a stretched margin
//! refused every request for seconds with the queue empty).

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
/// The most one overrun stretches predictions by: a request stalled for seconds (a
/// descheduled process) would otherwise close the model to everything.
const MAX_STRETCH: f64 = 4.0;
/// Half of the stretch beyond 1 is gone after this long without a late answer. Time,
/// not answers, wears it down: a stretch that refuses every request would otherwise
/// never see the answers that lower it.
const HALF_LIFE: Duration = Duration::from_secs(2);

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
}

/// How far answers overran their predictions lately.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdmissionMargin {
    /// 1 + the overrun as a share of the prediction's scale: the worst seen, as of
    /// `since`, and decaying from then.
    stretch: f64,
    since: Option<Instant>,
}

impl Default for AdmissionMargin {
    fn default() -> Self {
        AdmissionMargin { stretch: 1.0, since: None }
    }
}

impl AdmissionMargin {
    /// What predictions are stretched by at `now` (1: taken as they are).
    pub fn stretch(&self, now: Instant) -> f64 {
        let Some(since) = self.since else { return self.stretch };
        let half_lives = now.saturating_duration_since(since).as_secs_f64() / HALF_LIFE.as_secs_f64();
        1.0 + (self.stretch - 1.0) * 0.5f64.powf(half_lives)
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

    /// A request admitted on `prediction` was answered at `answered` (or given up
    /// then, as unable to make its deadline). Answered late, its overrun sets the
    /// stretch at once where that is beyond the one in force; answered in time, however
    /// far past its prediction, it changes nothing: an overrun that still makes the
    /// deadline costs nothing, and stretching for it would refuse requests that would
    /// have been answered in time.
    pub fn observe(&mut self, prediction: &Prediction, answered: Instant) {
        let overrun = answered.saturating_duration_since(prediction.answer).as_secs_f64();
        let scale = prediction.scale().as_secs_f64();
        let late = answered >= prediction.deadline;
        if !late || scale <= 0.0 {
            return;
        }
        let seen = (1.0 + overrun / scale).min(MAX_STRETCH);
        let now = self.since.map_or(answered, |since| since.max(answered));
        let current = self.stretch(now);
        if seen > current {
            (self.stretch, self.since) = (seen, Some(now));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
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
    fn an_overrun_stretches_later_predictions_by_as_much_at_once() {
        let now = Instant::now();
        let mut margin = AdmissionMargin::default();
        // Predicted at 200 ms of 350, answered at 400: late by an overrun of one prediction.
        let prediction = Prediction { made: now, answer: now + ms(200), deadline: now + ms(350) };
        margin.observe(&prediction, now + ms(400));
        assert!((margin.stretch(now + ms(400)) - 2.0).abs() < 1e-9, "{}", margin.stretch(now + ms(400)));
        let now = now + ms(400);
        // 240 ms predicted, stretched to 480 + 25 ms headroom: over 500, refused.
        assert_eq!(margin.admits(now, now + ms(240), now + ms(500)), Err(now + ms(480)));
        assert_eq!(margin.admits(now, now + ms(230), now + ms(500)), Ok(()));
        // A short prediction is stretched by the floor share of its time (50 ms), so a
        // short one stays in: 10 + 50 ms.
        assert_eq!(margin.admits(now, now + ms(10), now + ms(500)), Ok(()));
        // 300 ms is stretched to 600: past even a deadline 3 ms beyond it.
        assert_eq!(margin.admits(now, now + ms(300), now + ms(603)), Err(now + ms(600)));
    }

    #[test]
    fn the_stretch_wears_down_with_time_and_one_stall_is_bounded() {
        let now = Instant::now();
        let mut margin = AdmissionMargin::default();
        let prediction = Prediction { made: now, answer: now + ms(100), deadline: now + ms(250) };
        let late = now + ms(300);
        margin.observe(&prediction, late);
        assert!((margin.stretch(late) - 3.0).abs() < 1e-9);
        // A smaller overrun does not lower it, nor do answers in time; time does,
        // whether or not anything is answered meanwhile (a margin that refuses every
        // request sees no answers).
        margin.observe(&prediction, now + ms(260));
        margin.observe(&prediction, now + ms(90));
        assert!((margin.stretch(late) - 3.0).abs() < 1e-9);
        let half = margin.stretch(late + HALF_LIFE);
        assert!((half - 2.0).abs() < 1e-9, "half the excess is gone: {half}");
        assert!(margin.stretch(late + HALF_LIFE * 10) < 1.002);
        // A new overrun beyond what is left sets it again, from then on.
        let made = late + HALF_LIFE;
        let prediction = Prediction { made, answer: made + ms(100), deadline: made + ms(150) };
        margin.observe(&prediction, made + ms(300));
        assert!((margin.stretch(made + ms(300)) - 3.0).abs() < 1e-9);
        margin.observe(&prediction, made + Duration::from_secs(60));
        assert_eq!(margin.stretch(made + Duration::from_secs(60)), MAX_STRETCH);
    }

    #[test]
    fn an_answer_in_time_leaves_the_stretch_alone_however_far_past_its_prediction() {
        let now = Instant::now();
        let mut margin = AdmissionMargin::default();
        let prediction = Prediction { made: now, answer: now + ms(10), deadline: now + ms(500) };
        margin.observe(&prediction, now + ms(400));
        assert_eq!(margin.stretch(now + ms(400)), 1.0);
        // Given up at its deadline, it counts as late: 490 ms over a 50 ms floor.
        margin.observe(&prediction, now + ms(500));
        assert_eq!(margin.stretch(now + ms(500)), MAX_STRETCH);
    }
}
