//! A request waiting in a model's queue, with when it arrived and what its images cost
//! before it queued: what the queue holds and an instance thread answers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use super::margin::Prediction;
use super::state::{Priority, Queued};
use crate::error::Error;
use crate::preprocess::ImageSource;
use crate::request::Output;
use crate::tensor::Tensor;
use crate::trace::Traced;

/// A request waiting in the queue.
pub(crate) struct Pending {
    pub tensors: Vec<Tensor>,
    pub rows: usize,
    pub key: Vec<usize>,
    pub deadline: Option<Instant>,
    pub priority: Priority,
    /// When it arrived (before any preprocessing).
    pub admitted: Instant,
    /// Time its images took to decode and preprocess before it queued.
    pub prepared: Prepared,
    /// What admission predicted for it, where a profile priced it.
    pub prediction: Option<Prediction>,
    /// The images its image input was made from, to make it again for another variant.
    pub source: Option<Arc<ImageSource>>,
    pub reply: oneshot::Sender<Result<Output, Error>>,
    /// Its request span and the stage it is in, carried across the queue's threads.
    pub traced: Traced,
}

/// When a request arrived, and what admission predicted for it then (where a profile
/// priced it): a request judged before its images were prepared keeps that first
/// prediction.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub at: Instant,
    pub prediction: Option<Prediction>,
}

impl Arrival {
    /// A request arriving now, not judged yet.
    pub fn now() -> Arrival {
        Arrival { at: Instant::now(), prediction: None }
    }
}

/// Time spent on a request's images before it queued.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Prepared {
    pub decode: Duration,
    pub preprocess: Duration,
}

impl Queued for Pending {
    fn priority(&self) -> Priority {
        self.priority
    }
    fn rows(&self) -> usize {
        self.rows
    }
    fn deadline(&self) -> Option<Instant> {
        self.deadline
    }
    fn is_abandoned(&self) -> bool {
        self.reply.is_closed()
    }
    fn can_batch_with(&self, other: &Self) -> bool {
        self.key == other.key
    }
}
