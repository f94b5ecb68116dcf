//! What callers send and get back: named input tensors, outputs with their timings.

use std::sync::Arc;
use std::time::Duration;

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
    /// Model that served it.
    pub model: Arc<str>,
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
