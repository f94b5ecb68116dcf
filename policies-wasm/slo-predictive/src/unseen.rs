//! What a lone task's predictions miss: the latency its requests spend where the
//! simulated batcher does not look (decoding and resizing images before the queue, a
//! host that stalls, sessions slowed by the threads beside them), measured as the p99
//! seen against the same quantile simulated at the demand seen, and added to every
//! prediction. It is smoothed over the last few hundred answers: one tick's few dozen
//! are too few to move it far.
//!
//! A tick's nearest-rank p99 of `n < 100` answers is their slowest, which sits about
//! at the `n/(n+1)` quantile: that is the quantile simulated to compare it with.

use serde::{Deserialize, Serialize};

/// Answers whose measurements the figure mostly rests on.
const MEMORY_ANSWERS: f64 = 300.0;
/// Fewest answers in a tick worth a measurement.
const LEAST_ANSWERS: u64 = 5;

/// The latency the predictions miss, ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Unseen {
    ms: f64,
}

impl Unseen {
    /// The quantile a tick's p99 of `answers` answers is compared with.
    pub fn quantile(answers: u64) -> f64 {
        if answers >= 100 { 0.99 } else { answers as f64 / (answers as f64 + 1.0) }
    }

    /// Takes in a tick of `answers` answers whose p99 was `seen_ms` where the
    /// simulation says `simulated_ms` (at [`Unseen::quantile`]).
    pub fn observe(&mut self, answers: u64, seen_ms: f64, simulated_ms: f64) {
        if answers < LEAST_ANSWERS {
            return;
        }
        let weight = answers as f64 / (answers as f64 + MEMORY_ANSWERS);
        self.ms += weight * ((seen_ms - simulated_ms) - self.ms);
    }

    /// What to add to a prediction, ms (never less than nothing: the simulation is
    /// not trusted to be slower than the machine).
    pub fn ms(&self) -> f64 {
        self.ms.max(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_latency_missed_is_learnt_over_hundreds_of_answers_and_never_taken_off() {
        let mut unseen = Unseen::default();
        unseen.observe(3, 500.0, 20.0);
        assert_eq!(unseen.ms(), 0.0, "three answers tell nothing");
        // 20 ms missed, tick after tick of 20 answers: about half learnt after 10.
        for _ in 0..10 {
            unseen.observe(20, 70.0, 50.0);
        }
        assert!((8.0..14.0).contains(&unseen.ms()), "{}", unseen.ms());
        for _ in 0..200 {
            unseen.observe(20, 70.0, 50.0);
        }
        assert!((unseen.ms() - 20.0).abs() < 0.1);
        for _ in 0..400 {
            unseen.observe(20, 40.0, 50.0);
        }
        assert_eq!(unseen.ms(), 0.0, "a simulation slower than the machine is kept as it is");
        assert_eq!((Unseen::quantile(19), Unseen::quantile(500)), (0.95, 0.99));
    }
}
