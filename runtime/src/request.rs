//! What callers send and get back: named input tensors, outputs with their timings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::batching::state::Priority;
use crate::tensor::Tensor;

/// The inputs of one request. A model with a single input also takes one unnamed
/// tensor (`Inputs::from(tensor)`).
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub(crate) tensors: Vec<(Option<String>, Tensor)>,
}

impl Inputs {
    /// No inputs yet.
    pub fn new() -> Self {
        Inputs::default()
    }

    /// Adds the input `name`.
    pub fn with(mut self, name: impl Into<String>, tensor: Tensor) -> Self {
        self.tensors.push((Some(name.into()), tensor));
        self
    }
}

impl From<Tensor> for Inputs {
    fn from(tensor: Tensor) -> Self {
        Inputs { tensors: vec![(None, tensor)] }
    }
}

impl<S: Into<String>> FromIterator<(S, Tensor)> for Inputs {
    fn from_iter<I: IntoIterator<Item = (S, Tensor)>>(iter: I) -> Self {
        Inputs { tensors: iter.into_iter().map(|(name, t)| (Some(name.into()), t)).collect() }
    }
}

/// Per-request options.
#[derive(Clone, Copy, Debug, Default)]
pub struct InferOptions {
    /// Past this instant the request is answered `DeadlineExceeded` instead of run.
    pub deadline: Option<Instant>,
    /// How urgent it is; higher priorities are batched first.
    pub priority: Priority,
}

impl InferOptions {
    /// Gives up on the request if it has not started within `timeout` from now.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.deadline = Some(Instant::now() + timeout);
        self
    }

    /// Gives up on the request if it has not started by `deadline`.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }

    /// Sets the priority.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }
}

/// What a request to a task asks for: how fast, how accurate, how urgent. The runtime
/// picks the variant that serves it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Slo {
    /// Latency target. Unless [`Slo::without_deadline`] is set, a request that has not
    /// started within it is answered `DeadlineExceeded` instead of run late.
    pub latency: Option<Duration>,
    /// Least accuracy (the unit variants are registered in, e.g. top-1 %) of the
    /// variant that may serve it.
    pub min_accuracy: Option<f64>,
    /// How urgent it is.
    pub priority: Priority,
    /// Keep the latency target as a target only, never as a deadline.
    pub no_deadline: bool,
}

impl Slo {
    /// Sets the latency target.
    pub fn with_latency(mut self, latency: Duration) -> Self {
        self.latency = Some(latency);
        self
    }

    /// Sets the least accuracy.
    pub fn with_min_accuracy(mut self, accuracy: f64) -> Self {
        self.min_accuracy = Some(accuracy);
        self
    }

    /// Sets the priority.
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// Serves the request even after its latency target has passed.
    pub fn without_deadline(mut self) -> Self {
        self.no_deadline = true;
        self
    }

    /// The options a request with this SLO runs with, admitted at `now`.
    pub fn options(&self, now: Instant) -> InferOptions {
        let deadline = if self.no_deadline { None } else { self.latency.map(|l| now + l) };
        InferOptions { deadline, priority: self.priority }
    }
}

/// Where the time of one request went.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// From admission until its batch started.
    pub queue: Duration,
    /// Joining the batch's inputs and splitting its outputs.
    pub processing: Duration,
    /// The backend's run of the whole batch.
    pub compute: Duration,
    /// From admission until the answer reached the caller.
    pub total: Duration,
}

/// The answer to one request.
#[derive(Clone, Debug)]
pub struct Output {
    pub(crate) names: Arc<[String]>,
    pub(crate) tensors: Vec<Tensor>,
    /// Model, or variant of a task, that served it.
    pub model: Arc<str>,
    /// Version of that model or variant.
    pub version: u64,
    /// The task, when it was asked of a task.
    pub task: Option<Arc<str>>,
    /// Rows in the batch it ran in (its own rows included).
    pub batch_size: usize,
    /// Where the time went.
    pub timings: Timings,
}

impl Output {
    /// The output called `name`.
    pub fn get(&self, name: &str) -> Option<&Tensor> {
        self.names.iter().position(|n| n == name).map(|i| &self.tensors[i])
    }

    /// Outputs with their names, in the model's order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Tensor)> {
        self.names.iter().map(String::as_str).zip(&self.tensors)
    }

    /// The first output (the only one, for most models).
    pub fn first(&self) -> Option<&Tensor> {
        self.tensors.first()
    }

    /// The outputs, in the model's order.
    pub fn into_tensors(self) -> Vec<Tensor> {
        self.tensors
    }
}
