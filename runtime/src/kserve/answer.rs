//! What an inference call and its answer are to both endpoints, whichever protocol
//! carried them: the call decoded, the outputs asked for, the answer's tensors and
//! their encodings, and a model's description and statistics.

use std::time::{Duration, Instant};

use super::params::{InferParams, ParamValue};
use super::status::ServeError;
use super::tensors;
use super::trace_context::RemoteParent;
use crate::backend::TensorSpec;
use crate::metrics::ModelTotals;
use crate::registry::StageTime;
use crate::request::Timings;
use crate::tensor::Tensor;

/// One inference call, decoded from either protocol.
#[derive(Debug, Default)]
pub struct InferCall {
    /// Task, variant or model.
    pub model: String,
    /// Version asked for; empty for any.
    pub version: String,
    /// The caller's id, echoed.
    pub id: String,
    /// SLO and scheduling parameters.
    pub params: InferParams,
    /// Named inputs.
    pub inputs: Vec<(String, Tensor)>,
    /// Named inputs of encoded images (BYTES), one image per element.
    pub images: Vec<(String, Vec<bytes::Bytes>)>,
    /// Outputs wanted; empty for all.
    pub outputs: Vec<RequestedOutput>,
    /// The transport's deadline (gRPC's `grpc-timeout`).
    pub deadline: Option<Instant>,
    /// The caller's span, which the request span continues.
    pub parent: RemoteParent,
}

/// The answer to an [`InferCall`].
#[derive(Debug)]
pub struct InferAnswer {
    /// The variant or model that served it.
    pub model: String,
    /// Its version.
    pub version: u64,
    /// The caller's id.
    pub id: String,
    /// The task asked, when a task was.
    pub task: Option<String>,
    /// Rows of the batch it ran in.
    pub batch_size: usize,
    /// Where its time went.
    pub timings: Timings,
    /// Named outputs, in the model's order.
    pub outputs: Vec<(String, AnswerTensor)>,
    /// A pipeline's stages: each one's items and time.
    pub stages: Vec<StageTime>,
}

/// An output a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestedOutput {
    /// Its name.
    pub name: String,
    /// With parameter `classification: k`: the top `k` classes of each row, as BYTES.
    pub classification: Option<usize>,
}

/// The most classes one classification answer lists per row.
pub const MAX_CLASSIFICATION: usize = 1 << 16;

impl RequestedOutput {
    /// The output `name`, with its parameter `classification` if given.
    pub fn parse(name: String, classification: Option<&ParamValue>) -> Result<Self, ServeError> {
        let count = match classification {
            None => None,
            Some(ParamValue::Int(k)) => usize::try_from(*k).ok(),
            Some(ParamValue::UInt(k)) => usize::try_from(*k).ok(),
            Some(_) => None,
        };
        match (classification, count) {
            (None, _) => Ok(RequestedOutput { name, classification: None }),
            (Some(_), Some(k)) if (1..=MAX_CLASSIFICATION).contains(&k) => {
                Ok(RequestedOutput { name, classification: Some(k) })
            }
            (Some(value), _) => Err(ServeError::invalid(format!(
                "output `{name}`: classification {} is not a count of classes in 1..={MAX_CLASSIFICATION}",
                value.to_json()
            ))),
        }
    }
}

/// One output of an answer: a tensor, or classification strings (BYTES).
#[derive(Clone, Debug, PartialEq)]
pub enum AnswerTensor {
    /// The model's output as it is.
    Tensor(Tensor),
    /// Strings: `score:index:label` per class, `[rows, k]`, or a pipeline's texts.
    Strings {
        /// Its shape.
        shape: Vec<i64>,
        /// The strings, row-major.
        strings: Vec<String>,
    },
    /// Runs of bytes (a pipeline's encoded images): raw over gRPC; over HTTP's JSON,
    /// which carries only text, each as UTF-8 with what is not replaced.
    Bytes {
        /// Its shape.
        shape: Vec<i64>,
        /// The runs, row-major.
        items: Vec<Vec<u8>>,
    },
}

impl AnswerTensor {
    /// Its datatype as the protocol names it.
    pub fn datatype(&self) -> &'static str {
        match self {
            AnswerTensor::Tensor(t) => tensors::datatype(t.dtype()),
            AnswerTensor::Strings { .. } | AnswerTensor::Bytes { .. } => "BYTES",
        }
    }

    /// Its shape.
    pub fn shape(&self) -> Vec<i64> {
        match self {
            AnswerTensor::Tensor(t) => tensors::shape_of(t),
            AnswerTensor::Strings { shape, .. } | AnswerTensor::Bytes { shape, .. } => shape.clone(),
        }
    }

    /// Its raw bytes: little-endian elements, or each string after its 4-byte
    /// little-endian length, as the protocol carries BYTES.
    pub fn to_raw(&self) -> Vec<u8> {
        match self {
            AnswerTensor::Tensor(t) => tensors::to_raw(t),
            AnswerTensor::Strings { strings, .. } => length_prefixed(strings.iter().map(String::as_bytes)),
            AnswerTensor::Bytes { items, .. } => length_prefixed(items.iter().map(Vec::as_slice)),
        }
    }

    /// Its elements as JSON, flat.
    pub fn to_json(&self) -> serde_json::Value {
        match self {
            AnswerTensor::Tensor(t) => tensors::to_json(t),
            AnswerTensor::Strings { strings, .. } => serde_json::json!(strings),
            AnswerTensor::Bytes { items, .. } => {
                serde_json::json!(items.iter().map(|b| String::from_utf8_lossy(b)).collect::<Vec<_>>())
            }
        }
    }
}

/// Each run after its 4-byte little-endian length, as the protocol carries BYTES.
fn length_prefixed<'a>(runs: impl Iterator<Item = &'a [u8]> + Clone) -> Vec<u8> {
    let mut raw = Vec::with_capacity(runs.clone().map(|r| 4 + r.len()).sum());
    for run in runs {
        raw.extend_from_slice(&(run.len() as u32).to_le_bytes());
        raw.extend_from_slice(run);
    }
    raw
}

/// What a name serves, for metadata calls.
#[derive(Clone, Debug)]
pub struct ModelDescription {
    /// The name asked.
    pub name: String,
    /// Versions ready to serve.
    pub versions: Vec<String>,
    /// `modelless_task` for a task, else the backend's platform.
    pub platform: &'static str,
    /// Inputs.
    pub inputs: Vec<TensorSpec>,
    /// Outputs.
    pub outputs: Vec<TensorSpec>,
    /// The input that takes encoded images, presented as BYTES `[-1]`.
    pub image_input: Option<String>,
    /// Outputs of strings, presented as BYTES `[-1]`.
    pub text_outputs: Vec<String>,
}

impl ModelDescription {
    /// The protocol's datatype and shape of `spec`, one of its inputs or outputs.
    pub fn presented(&self, spec: &TensorSpec) -> (&'static str, Vec<i64>) {
        if self.image_input.as_deref() == Some(spec.name.as_str()) || self.text_outputs.contains(&spec.name) {
            return ("BYTES", vec![-1]);
        }
        (tensors::datatype(spec.dtype), tensors::spec_shape(spec))
    }
}

impl InferAnswer {
    /// What the answer's parameters say about how it was served, for both protocols:
    /// the variant, the batch, where the time went; for a pipeline, each stage's
    /// items, time and variants as `stage_<task>_items`, `_us` and `_variant`.
    pub fn parameters(&self) -> Vec<(String, ParamValue)> {
        let mut parameters = vec![("variant".to_string(), ParamValue::Str(self.model.clone()))];
        if let Some(task) = &self.task {
            parameters.push(("task".into(), ParamValue::Str(task.clone())));
        }
        parameters.push(("batch_size".into(), ParamValue::Int(self.batch_size as i64)));
        let t = &self.timings;
        for (name, took) in [
            ("decode_us", t.decode),
            ("preprocess_us", t.preprocess),
            ("queue_us", t.queue),
            ("compute_input_us", t.compute_input),
            ("compute_us", t.compute),
            ("compute_output_us", t.postprocess),
            ("total_us", t.total),
        ] {
            parameters.push((name.into(), ParamValue::Int(took.as_micros() as i64)));
        }
        for stage in &self.stages {
            let task = &stage.task;
            parameters.push((format!("stage_{task}_items"), ParamValue::Int(stage.items as i64)));
            parameters.push((format!("stage_{task}_us"), ParamValue::Int(stage.elapsed.as_micros() as i64)));
            parameters.push((format!("stage_{task}_variant"), ParamValue::Str(stage.variants.join(","))));
        }
        parameters
    }
}

/// Cumulative statistics of one variant or model.
#[derive(Clone, Debug)]
pub struct ModelStats {
    /// The variant or model.
    pub name: String,
    /// Its serving version, if one is loaded.
    pub version: Option<u64>,
    /// Its counters.
    pub totals: ModelTotals,
}

impl ModelStats {
    /// The protocol's cumulative durations, named as its `InferStatistics` fields,
    /// each with its count: success, fail, queue, compute_input, compute_infer,
    /// compute_output.
    pub fn durations(&self) -> [(&'static str, u64, Duration); 6] {
        let t = &self.totals;
        [
            ("success", t.success, t.request),
            ("fail", t.failure, Duration::ZERO),
            ("queue", t.success, t.queue),
            ("compute_input", t.success, t.io),
            ("compute_infer", t.success, t.compute),
            ("compute_output", 0, Duration::ZERO),
        ]
    }
}
