//! Requests to a KServe V2 endpoint over gRPC: modelless's own, or any other server
//! that speaks the protocol (the SLO travels as the `latency_ms` parameter).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use modelless::Tensor;
use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::infer_parameter::ParameterChoice;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::{InferParameter, ModelInferRequest, ModelMetadataRequest};
use modelless_runtime::kserve::tensors::{parse_datatype, to_raw};
use modelless_runtime::kserve::tonic::{Code, Status, transport::Channel};

use bytes::Bytes;

use super::images::ImageSet;
use super::record::{Outcome, Stages};
use super::runner::{Answer, Target};
use super::summary::TaskTarget;
use super::{LoadError, LoadSpec};

/// A KServe V2 gRPC endpoint.
pub struct Grpc {
    client: GrpcInferenceServiceClient<Channel>,
    tasks: Vec<(TaskTarget, ModelInferRequest)>,
    /// The images sent to tasks that take them (a BYTES input), in turn, each already
    /// a BYTES element (length-prefixed), and how many were sent.
    images: Option<(Vec<Bytes>, AtomicUsize)>,
    /// Per task, the index of the input its images go to, if it takes images.
    image_inputs: Vec<Option<usize>>,
    /// The variant that answered each task last, standing in for its active one.
    last_variant: Arc<Mutex<Vec<Option<String>>>>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Grpc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Grpc").finish_non_exhaustive()
    }
}

impl Grpc {
    /// Connects to `url` (`http://host:port`) and prepares a request per task of `spec`
    /// from the model's metadata: one row of zeros per input, or one of `images` for
    /// an input that takes encoded images (BYTES). Each task needs `slo_ms` in the
    /// spec; `accuracies` (task → variant → accuracy) are what the endpoint's variants
    /// are worth, for the effective accuracy of the run.
    pub async fn connect(
        url: &str,
        spec: &LoadSpec,
        accuracies: &BTreeMap<String, BTreeMap<String, f64>>,
        images: Option<&ImageSet>,
    ) -> Result<Self, LoadError> {
        let target = |e: &dyn std::fmt::Display| LoadError::Target(format!("{url}: {e}"));
        let channel = Channel::from_shared(url.to_string()).map_err(|e| target(&e))?;
        let channel = channel.tcp_nodelay(true).connect().await.map_err(|e| target(&e))?;
        let mut client = GrpcInferenceServiceClient::new(channel).max_decoding_message_size(usize::MAX);
        let (mut tasks, mut image_inputs) = (Vec::new(), Vec::new());
        for load in &spec.tasks {
            let request = ModelMetadataRequest { name: load.task.clone(), version: String::new() };
            let metadata = client.model_metadata(request).await.map_err(|e| target(&e.message()))?.into_inner();
            let mut inputs = Vec::new();
            let mut raw = Vec::new();
            let mut image_input = None;
            for input in metadata.inputs {
                if input.datatype == "BYTES" {
                    if images.is_none() {
                        return Err(target(&format!(
                            "`{}` takes encoded images in `{}`: give images to send",
                            load.task, input.name
                        )));
                    }
                    image_input = Some(inputs.len());
                    raw.push(Default::default());
                    inputs.push(InferInputTensor {
                        name: input.name,
                        datatype: input.datatype,
                        shape: vec![1],
                        ..Default::default()
                    });
                    continue;
                }
                let dtype = parse_datatype(&input.datatype).map_err(|e| target(&e))?;
                let shape: Vec<i64> = input.shape.iter().map(|&d| d.max(1)).collect();
                let zeros = Tensor::zeros(dtype, shape.iter().map(|&d| d as usize).collect::<Vec<_>>());
                raw.push(to_raw(&zeros).into());
                inputs.push(InferInputTensor {
                    name: input.name,
                    datatype: input.datatype,
                    shape,
                    ..Default::default()
                });
            }
            let slo_ms = load.slo_ms_or(None)?;
            let mut parameters = HashMap::from([("latency_ms".to_string(), double(slo_ms))]);
            if let Some(accuracy) = load.min_accuracy {
                parameters.insert("min_accuracy".into(), double(accuracy));
            }
            let request = ModelInferRequest {
                model_name: load.task.clone(),
                inputs,
                raw_input_contents: raw,
                parameters,
                ..Default::default()
            };
            let accuracies = accuracies.get(&load.task).cloned().unwrap_or_default();
            tasks.push((TaskTarget { task: load.task.clone(), slo_ms, accuracies }, request));
            image_inputs.push(image_input);
        }
        let last_variant = Arc::new(Mutex::new(vec![None; tasks.len()]));
        let images = images
            .map(|images| ((0..images.len()).map(|n| bytes_element(&images.get(n))).collect(), AtomicUsize::new(0)));
        Ok(Grpc { client, tasks, images, image_inputs, last_variant })
    }
}

fn double(value: f64) -> InferParameter {
    InferParameter { parameter_choice: Some(ParameterChoice::DoubleParam(value)) }
}

/// `data` as the one element of a BYTES tensor's raw contents: its length (u32, little
/// endian), then itself.
fn bytes_element(data: &[u8]) -> Bytes {
    let mut element = Vec::with_capacity(4 + data.len());
    element.extend_from_slice(&(data.len() as u32).to_le_bytes());
    element.extend_from_slice(data);
    element.into()
}

/// The stages an answer's parameters (`decode_us`, …) tell, read by `ms_of`; none
/// where the server does not tell its total.
fn stages(ms_of: &dyn Fn(&str) -> Option<f64>) -> Option<Stages> {
    let ms = |name: &str| ms_of(name).unwrap_or(0.0);
    Some(Stages {
        total_ms: ms_of("total_us")?,
        decode_ms: ms("decode_us"),
        preprocess_ms: ms("preprocess_us"),
        queue_ms: ms("queue_us"),
        compute_ms: ms("compute_input_us") + ms("compute_us") + ms("compute_output_us"),
    })
}

/// How a gRPC status counts in a run.
fn status_of(code: Code) -> Outcome {
    match code {
        Code::ResourceExhausted | Code::FailedPrecondition | Code::OutOfRange => Outcome::Rejected,
        Code::DeadlineExceeded => Outcome::Expired,
        _ => Outcome::Failed,
    }
}

/// The wait a refusal's `grpc-retry-pushback-ms` asks for, as gRPC's own retries read it.
fn pushback(status: &Status) -> Option<Duration> {
    let ms: u64 = status.metadata().get("grpc-retry-pushback-ms")?.to_str().ok()?.parse().ok()?;
    Some(Duration::from_millis(ms))
}

/// A gRPC code as a failure kind: `InvalidArgument` → `invalid_argument`.
fn code_name(code: Code) -> String {
    let mut name = String::new();
    for (i, c) in format!("{code:?}").chars().enumerate() {
        if c.is_uppercase() && i > 0 {
            name.push('_');
        }
        name.push(c.to_ascii_lowercase());
    }
    name
}

impl Target for Grpc {
    fn targets(&self) -> Vec<TaskTarget> {
        self.tasks.iter().map(|t| t.0.clone()).collect()
    }

    fn send(&self, task: usize) -> Pin<Box<dyn Future<Output = Answer> + Send + 'static>> {
        let (mut client, mut request) = (self.client.clone(), self.tasks[task].1.clone());
        if let (Some(input), Some((elements, next))) = (self.image_inputs[task], &self.images) {
            let n = next.fetch_add(1, Ordering::Relaxed);
            request.raw_input_contents[input] = elements[n % elements.len()].clone();
        }
        let last_variant = self.last_variant.clone();
        Box::pin(async move {
            match client.model_infer(request).await {
                Ok(response) => {
                    let response = response.into_inner();
                    let parameter = |name: &str| response.parameters.get(name).and_then(|p| p.parameter_choice.clone());
                    let variant = match parameter("variant") {
                        Some(ParameterChoice::StringParam(v)) => Some(v),
                        _ => Some(response.model_name.clone()),
                    };
                    let batch_size = match parameter("batch_size") {
                        Some(ParameterChoice::Int64Param(b)) => u32::try_from(b).ok(),
                        _ => None,
                    };
                    if let Ok(mut last) = last_variant.lock() {
                        last[task].clone_from(&variant);
                    }
                    let stages = stages(&|name| match parameter(name) {
                        Some(ParameterChoice::Int64Param(us)) => Some(us as f64 / 1e3),
                        _ => None,
                    });
                    Answer { status: Outcome::Served, variant, batch_size, reason: None, stages, retry_after: None }
                }
                Err(status) => Answer {
                    status: status_of(status.code()),
                    variant: None,
                    batch_size: None,
                    reason: Some(super::record::reason(&code_name(status.code()), status.message())),
                    stages: None,
                    retry_after: pushback(&status),
                },
            }
        })
    }

    fn observe(&self, task: usize) -> (Option<String>, Option<u64>) {
        (self.last_variant.lock().ok().and_then(|l| l[task].clone()), None)
    }
}
