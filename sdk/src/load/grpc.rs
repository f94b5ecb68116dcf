//! Requests to a KServe V2 endpoint over gRPC: modelless's own, or any other server
//! that speaks the protocol (the SLO travels as the `latency_ms` parameter).

use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};

use modelless_runtime::Tensor;
use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::infer_parameter::ParameterChoice;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::{InferParameter, ModelInferRequest, ModelMetadataRequest};
use modelless_runtime::kserve::tensors::{parse_datatype, to_raw};
use modelless_runtime::kserve::tonic::{Code, transport::Channel};

use super::record::Status;
use super::runner::{Answer, Target};
use super::summary::TaskTarget;
use super::{LoadError, LoadSpec};

/// A KServe V2 gRPC endpoint.
pub struct Grpc {
    client: GrpcInferenceServiceClient<Channel>,
    tasks: Vec<(TaskTarget, ModelInferRequest)>,
    /// The variant that answered each task last, standing in for its active one.
    last_variant: Arc<Mutex<Vec<Option<String>>>>,
}

impl Grpc {
    /// Connects to `url` (`http://host:port`) and prepares a request per task of `spec`
    /// from the model's metadata: one row of zeros per input. Each task needs `slo_ms`
    /// in the spec; `accuracies` (task → variant → accuracy) are what the endpoint's
    /// variants are worth, for the effective accuracy of the run.
    pub async fn connect(
        url: &str,
        spec: &LoadSpec,
        accuracies: &BTreeMap<String, BTreeMap<String, f64>>,
    ) -> Result<Self, LoadError> {
        let target = |e: &dyn std::fmt::Display| LoadError::Target(format!("{url}: {e}"));
        let channel = Channel::from_shared(url.to_string()).map_err(|e| target(&e))?;
        let channel = channel.tcp_nodelay(true).connect().await.map_err(|e| target(&e))?;
        let mut client = GrpcInferenceServiceClient::new(channel).max_decoding_message_size(usize::MAX);
        let mut tasks = Vec::new();
        for load in &spec.tasks {
            let request = ModelMetadataRequest { name: load.task.clone(), version: String::new() };
            let metadata = client.model_metadata(request).await.map_err(|e| target(&e.message()))?.into_inner();
            let mut inputs = Vec::new();
            let mut raw = Vec::new();
            for input in metadata.inputs {
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
        }
        let last_variant = Arc::new(Mutex::new(vec![None; tasks.len()]));
        Ok(Grpc { client, tasks, last_variant })
    }
}

fn double(value: f64) -> InferParameter {
    InferParameter { parameter_choice: Some(ParameterChoice::DoubleParam(value)) }
}

/// How a gRPC status counts in a run.
fn status_of(code: Code) -> Status {
    match code {
        Code::ResourceExhausted | Code::FailedPrecondition | Code::OutOfRange => Status::Rejected,
        Code::DeadlineExceeded => Status::Expired,
        _ => Status::Failed,
    }
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
        let (mut client, request) = (self.client.clone(), self.tasks[task].1.clone());
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
                    Answer { status: Status::Ok, variant, batch_size, reason: None }
                }
                Err(status) => Answer {
                    status: status_of(status.code()),
                    variant: None,
                    batch_size: None,
                    reason: Some(super::record::reason(&code_name(status.code()), status.message())),
                },
            }
        })
    }

    fn observe(&self, task: usize) -> (Option<String>, Option<u64>) {
        (self.last_variant.lock().ok().and_then(|l| l[task].clone()), None)
    }
}
