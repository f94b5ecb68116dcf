//! The dynamic batcher's knobs, named as Triton users know them.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The longest queue delay a batcher takes, in µs: a minute. Longer than any latency
/// target, and a bound on how long a request can be held by a knob set too high
/// (whether by a config, an override or a policy).
pub const MAX_QUEUE_DELAY_US: u64 = 60_000_000;

/// The two knobs a policy (or an operator) turns while a model serves; `None` keeps
/// the value in force.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct BatchingKnobs {
    /// Most rows in one batch.
    pub max_batch_size: Option<usize>,
    /// How long the oldest queued request may wait for a batch to fill, in µs.
    pub max_queue_delay_us: Option<u64>,
}

impl BatchingKnobs {
    /// Whether it changes nothing.
    pub fn is_empty(&self) -> bool {
        self.max_batch_size.is_none() && self.max_queue_delay_us.is_none()
    }

    /// These knobs within bounds: the batch size between 1 and `ceiling` (the largest
    /// batch the variant was configured, and its memory sized, for), the delay at most
    /// [`MAX_QUEUE_DELAY_US`]. The one place these bounds are drawn, so that what a
    /// policy is told was applied is what the batcher runs.
    pub fn clamped(self, ceiling: usize) -> BatchingKnobs {
        BatchingKnobs {
            max_batch_size: self.max_batch_size.map(|rows| rows.clamp(1, ceiling.max(1))),
            max_queue_delay_us: self.max_queue_delay_us.map(|delay| delay.min(MAX_QUEUE_DELAY_US)),
        }
    }

    /// `self`, with the knobs `later` sets replacing those it sets too.
    pub fn then(self, later: BatchingKnobs) -> BatchingKnobs {
        BatchingKnobs {
            max_batch_size: later.max_batch_size.or(self.max_batch_size),
            max_queue_delay_us: later.max_queue_delay_us.or(self.max_queue_delay_us),
        }
    }
}

/// How requests of one model are gathered into batches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct BatchingConfig {
    /// Most rows (dimension 0 summed over requests) in one batch. A model whose
    /// dimension 0 is fixed is served one request at a time whatever this says.
    pub max_batch_size: usize,
    /// How long the oldest queued request may wait for a batch to fill, in µs.
    /// 0 sends whatever is queued as soon as an instance is free.
    pub max_queue_delay_us: u64,
    /// Batch sizes to prefer: a batch that reaches the largest one leaves at once, and
    /// a batch cut at the delay is cut to the largest one it can form.
    pub preferred_batch_sizes: Vec<usize>,
    /// Most requests waiting; beyond it requests are refused (`queue_full`).
    pub max_queue_size: usize,
    /// The most of the rows batched lately that high-priority requests take while
    /// normal ones wait, in percent: 100 is strict priority, which lets sustained
    /// high-priority load starve normal requests.
    pub high_priority_share_percent: u8,
}

impl Default for BatchingConfig {
    fn default() -> Self {
        BatchingConfig {
            max_batch_size: 8,
            max_queue_delay_us: 0,
            preferred_batch_sizes: Vec::new(),
            max_queue_size: 1024,
            high_priority_share_percent: 80,
        }
    }
}

impl BatchingConfig {
    /// Sets `max_batch_size`.
    pub fn with_max_batch_size(mut self, rows: usize) -> Self {
        self.max_batch_size = rows;
        self
    }

    /// Sets `max_queue_delay_us`.
    pub fn with_max_queue_delay_us(mut self, micros: u64) -> Self {
        self.max_queue_delay_us = micros;
        self
    }

    /// Sets `preferred_batch_sizes`.
    pub fn with_preferred_batch_sizes(mut self, sizes: impl Into<Vec<usize>>) -> Self {
        self.preferred_batch_sizes = sizes.into();
        self
    }

    /// Sets `high_priority_share_percent`.
    pub fn with_high_priority_share_percent(mut self, percent: u8) -> Self {
        self.high_priority_share_percent = percent;
        self
    }

    /// Sets `max_queue_size`.
    pub fn with_max_queue_size(mut self, requests: usize) -> Self {
        self.max_queue_size = requests;
        self
    }

    /// These knobs with `knobs` set (as they are: clamp them first); preferred batch
    /// sizes above the batch size go, as a batch never reaches them.
    // The runtime's own: `modelless` does not offer it.
    #[doc(hidden)]
    pub fn with_knobs(mut self, knobs: BatchingKnobs) -> Self {
        if let Some(rows) = knobs.max_batch_size {
            self.max_batch_size = rows;
            self.preferred_batch_sizes.retain(|&b| b <= rows);
        }
        if let Some(delay) = knobs.max_queue_delay_us {
            self.max_queue_delay_us = delay;
        }
        self
    }

    /// The largest preferred size a batch may reach, if any.
    pub fn largest_preferred(&self) -> Option<usize> {
        self.preferred_batch_sizes.iter().copied().filter(|&p| p <= self.max_batch_size).max()
    }

    /// Checks that the knobs are usable.
    pub fn validate(&self) -> Result<(), Error> {
        if self.max_batch_size == 0 {
            return Err(Error::Config("max_batch_size must be at least 1".into()));
        }
        if self.max_queue_size == 0 {
            return Err(Error::Config("max_queue_size must be at least 1".into()));
        }
        if self.max_queue_delay_us > MAX_QUEUE_DELAY_US {
            return Err(Error::Config(format!(
                "max_queue_delay_us {} is over the bound of {MAX_QUEUE_DELAY_US} (a minute)",
                self.max_queue_delay_us
            )));
        }
        if !(1..=100).contains(&self.high_priority_share_percent) {
            return Err(Error::Config(format!(
                "high_priority_share_percent {} is outside 1..=100",
                self.high_priority_share_percent
            )));
        }
        if let Some(bad) = self.preferred_batch_sizes.iter().find(|&&p| p == 0 || p > self.max_batch_size) {
            return Err(Error::Config(format!("preferred batch size {bad} is outside 1..={}", self.max_batch_size)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_are_clamped_to_the_ceiling_and_the_longest_delay() {
        let asked = BatchingKnobs { max_batch_size: Some(99), max_queue_delay_us: Some(u64::MAX) };
        let clamped = asked.clamped(8);
        assert_eq!(clamped, BatchingKnobs { max_batch_size: Some(8), max_queue_delay_us: Some(MAX_QUEUE_DELAY_US) });
        let none = BatchingKnobs { max_batch_size: Some(0), ..BatchingKnobs::default() };
        assert_eq!(none.clamped(8).max_batch_size, Some(1), "a batch holds one row at least");
        assert_eq!(none.clamped(0).max_batch_size, Some(1), "whatever the ceiling");
        assert_eq!(BatchingKnobs::default().clamped(8), BatchingKnobs::default(), "what is not set stays unset");
    }

    #[test]
    fn later_knobs_replace_earlier_ones_and_preferred_sizes_above_the_batch_go() {
        let earlier = BatchingKnobs { max_batch_size: Some(4), max_queue_delay_us: Some(100) };
        let later = BatchingKnobs { max_queue_delay_us: Some(250), ..BatchingKnobs::default() };
        assert_eq!(earlier.then(later), BatchingKnobs { max_batch_size: Some(4), max_queue_delay_us: Some(250) });
        let batching = BatchingConfig::default().with_preferred_batch_sizes([8, 4, 2]);
        let set = batching.with_knobs(earlier.then(later));
        assert_eq!((set.max_batch_size, set.max_queue_delay_us, set.preferred_batch_sizes), (4, 250, vec![4, 2]));
    }
}
