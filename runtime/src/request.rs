//! What callers send and get back: named input tensors, outputs with their timings.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::classify::{Class, top_k};
use crate::error::{BackendError, Error};
use crate::tensor::Tensor;

/// How urgent a request is. Higher priorities are batched first.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    /// Batched before every normal request.
    High,
    /// The default.
    #[default]
    Normal,
}

/// One image of a request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageData {
    /// A JPEG or PNG file's bytes.
    Encoded(Bytes),
    /// Pixels already decoded: 8-bit RGB, row-major, upright.
    Rgb {
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// `width × height × 3` bytes.
        pixels: Bytes,
    },
}

impl ImageData {
    /// Bytes it carries: the file's, or the pixels'.
    pub fn len(&self) -> usize {
        match self {
            ImageData::Encoded(bytes) | ImageData::Rgb { pixels: bytes, .. } => bytes.len(),
        }
    }

    /// Whether it carries no bytes.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl From<Vec<u8>> for ImageData {
    fn from(encoded: Vec<u8>) -> Self {
        ImageData::Encoded(Bytes::from(encoded))
    }
}

impl From<Bytes> for ImageData {
    fn from(encoded: Bytes) -> Self {
        ImageData::Encoded(encoded)
    }
}

impl From<&'static [u8]> for ImageData {
    fn from(encoded: &'static [u8]) -> Self {
        ImageData::Encoded(Bytes::from_static(encoded))
    }
}

/// The inputs of one request. A model with a single input also takes one unnamed
/// tensor (`Inputs::from(tensor)`). A task whose variants declare `preprocess` also
/// takes images for that input, one per row, which are decoded and preprocessed for
/// the variant that serves the request.
#[derive(Clone, Debug, Default)]
pub struct Inputs {
    pub(crate) tensors: Vec<(Option<String>, Tensor)>,
    pub(crate) images: Vec<(Option<String>, Vec<ImageData>)>,
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

    /// One image (JPEG or PNG bytes, or [`ImageData::Rgb`]) for the task's image input.
    pub fn image(image: impl Into<ImageData>) -> Self {
        Inputs { tensors: Vec::new(), images: vec![(None, vec![image.into()])] }
    }

    /// Images for the input `name`, one row each.
    pub fn with_images<I: Into<ImageData>>(
        mut self,
        name: impl Into<String>,
        images: impl IntoIterator<Item = I>,
    ) -> Self {
        self.images.push((Some(name.into()), images.into_iter().map(Into::into).collect()));
        self
    }

    /// Whether it carries images, which a task preprocesses before batching.
    pub fn has_images(&self) -> bool {
        !self.images.is_empty()
    }

    /// The rows it will take in a batch: its images, else its first tensor's batch
    /// dimension (1 for none).
    pub(crate) fn rows(&self) -> usize {
        match (self.images.first(), self.tensors.first()) {
            (Some((_, images)), _) => images.len().max(1),
            (None, Some((_, tensor))) => tensor.shape().first().copied().unwrap_or(1).max(1),
            (None, None) => 1,
        }
    }
}

impl From<Tensor> for Inputs {
    fn from(tensor: Tensor) -> Self {
        Inputs { tensors: vec![(None, tensor)], images: Vec::new() }
    }
}

impl<S: Into<String>> FromIterator<(S, Tensor)> for Inputs {
    fn from_iter<I: IntoIterator<Item = (S, Tensor)>>(iter: I) -> Self {
        Inputs { tensors: iter.into_iter().map(|(name, t)| (Some(name.into()), t)).collect(), images: Vec::new() }
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

/// Where the time of one request went, stage by stage. The stages add up to about
/// `total`; a request without images spends nothing decoding or preprocessing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timings {
    /// Decoding its images.
    pub decode: Duration,
    /// Resizing and normalising its images.
    pub preprocess: Duration,
    /// Waiting: for a preprocessing thread, then for its batch to start.
    pub queue: Duration,
    /// Joining the batch's inputs (Triton's `compute_input`); part of `compute` instead
    /// where the session joins them in its own staging memory.
    pub compute_input: Duration,
    /// The backend's run of the whole batch (`compute_infer`).
    pub compute: Duration,
    /// Splitting the batch's outputs into answers (`compute_output`).
    pub postprocess: Duration,
    /// From arrival until the answer was ready.
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
    /// The task's class labels, for [`Output::classes`].
    pub labels: Option<Arc<[String]>>,
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

    /// The `k` highest scores of each row of output `name`, with their class index and
    /// label (the task's label file), as Triton's classification extension answers.
    pub fn classes(&self, name: &str, k: usize) -> Result<Vec<Vec<Class>>, Error> {
        let output = self.get(name).ok_or_else(|| Error::InvalidInput {
            model: self.model.to_string(),
            reason: format!("no output `{name}` to classify; outputs: {}", self.names.join(", ")),
        })?;
        top_k(&self.model, output, k, self.labels.as_deref())
    }

    /// The outputs, in the model's order.
    pub fn into_tensors(self) -> Vec<Tensor> {
        self.tensors
    }

    /// The answer to a request that ran split, from its parts' answers in row order:
    /// outputs joined along dimension 0; served by, batch size and timings are the
    /// first part's, but for the total time, which is the slowest part's.
    pub(crate) fn joined(mut parts: Vec<Output>) -> Result<Output, Error> {
        if parts.len() == 1 {
            return Ok(parts.remove(0));
        }
        let total = parts.iter().map(|p| p.timings.total).max().unwrap_or_default();
        let names = parts[0].names.clone();
        let same_outputs = parts.iter().all(|p| p.names == names && p.tensors.len() == names.len());
        let mut columns: Vec<Vec<Tensor>> = names.iter().map(|_| Vec::with_capacity(parts.len())).collect();
        for part in &mut parts {
            for (column, tensor) in columns.iter_mut().zip(part.tensors.drain(..)) {
                column.push(tensor);
            }
        }
        let mut joined = parts.swap_remove(0);
        // Only parts that a switch moved to a variant with other outputs can disagree.
        let tensors = columns.into_iter().map(Tensor::concat_rows).collect::<Option<Vec<_>>>();
        joined.tensors = tensors.filter(|_| same_outputs).ok_or_else(|| Error::Backend {
            model: joined.model.to_string(),
            source: Arc::new(BackendError::OutputMismatch("the parts of a split request disagree on outputs".into())),
        })?;
        joined.timings.total = total;
        Ok(joined)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn part(values: Vec<f32>, total_ms: u64) -> Output {
        let rows = values.len();
        Output {
            names: Arc::from(vec!["y".to_string()]),
            tensors: vec![Tensor::new([rows, 1], values).unwrap()],
            model: Arc::from("m"),
            version: 1,
            task: None,
            labels: None,
            batch_size: rows,
            timings: Timings { total: Duration::from_millis(total_ms), ..Timings::default() },
        }
    }

    #[test]
    fn a_split_request_is_answered_with_its_parts_joined_in_row_order() {
        let joined = Output::joined(vec![part(vec![1.0, 2.0], 9), part(vec![3.0], 14), part(vec![4.0], 5)]).unwrap();
        assert_eq!(joined.get("y").unwrap().shape(), &[4, 1]);
        assert_eq!(joined.get("y").unwrap().as_slice::<f32>().unwrap(), &[1.0, 2.0, 3.0, 4.0]);
        assert_eq!(joined.timings.total, Duration::from_millis(14));
        let mut other = part(vec![5.0], 1);
        other.names = Arc::from(vec!["z".to_string()]);
        assert!(matches!(Output::joined(vec![part(vec![1.0], 1), other]), Err(Error::Backend { .. })));
    }
}
