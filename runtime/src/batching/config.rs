//! The dynamic batcher's knobs, named as Triton users know them.

use serde::{Deserialize, Serialize};

use crate::error::Error;

/// The longest queue delay a batcher takes, in µs: a minute. Longer than any latency
/// target, and a bound on how long a request can be held by a knob set too high
/// (whether by a config, an override or a policy).
pub const MAX_QUEUE_DELAY_US: u64 = 60_000_000;

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
