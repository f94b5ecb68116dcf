//! The gRPC endpoint: `inference.GRPCInferenceService` on tonic, a thin translation
//! between protobuf messages and [`InferenceService`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prost::bytes::Bytes;
use tonic::{Request, Response, Status};

use super::answer::{InferAnswer, InferCall, ModelStats, RequestedOutput};
use super::limits::{InputBounds, RequestLimits};
use super::params::{InferParams, ParamValue};
use super::proto::grpc_inference_service_server::GrpcInferenceService;
use super::proto::infer_parameter::ParameterChoice;
use super::proto::model_metadata_response::TensorMetadata;
use super::proto::model_repository_parameter::ParameterChoice as RepositoryChoice;
use super::proto::*;
use super::repository::load_config;
use super::service::InferenceService;
use super::status::ServeError;
use super::tensors;
use super::trace_context::RemoteParent;
use crate::backend::TensorSpec;

/// Extensions of the protocol served, as `ServerMetadata` lists them.
pub const EXTENSIONS: [&str; 4] = ["model_repository", "statistics", "binary_tensor_data", "parameters"];

/// The tonic service.
#[derive(Clone)]
pub struct GrpcEndpoint {
    service: Arc<InferenceService>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for GrpcEndpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GrpcEndpoint").finish_non_exhaustive()
    }
}

impl GrpcEndpoint {
    /// Serves `service` over gRPC.
    pub fn new(service: Arc<InferenceService>) -> Self {
        GrpcEndpoint { service }
    }

    /// The limits requests are held to.
    pub(super) fn limits(&self) -> RequestLimits {
        self.service.limits()
    }

    /// Runs one `ModelInfer`; `deadline` is the call's `grpc-timeout`, `parent` the
    /// caller's span.
    pub(super) async fn infer(
        &self,
        request: ModelInferRequest,
        deadline: Option<Duration>,
        parent: RemoteParent,
    ) -> Result<ModelInferResponse, Status> {
        let (name, version) = (request.model_name.clone(), request.model_version.clone());
        let bounds = self.service.input_bounds(&name, &version);
        let decoded = bounds.and_then(|bounds| decode_infer(request, &bounds));
        let mut call = decoded.map_err(|e| self.service.refused("grpc", &name, &version, e))?;
        call.deadline = deadline.map(|d| Instant::now() + d);
        call.parent = parent;
        let answer = self.service.infer(call).await?;
        Ok(encode_infer(answer))
    }
}

impl From<ServeError> for Status {
    fn from(error: ServeError) -> Status {
        let mut status = Status::new(error.code.grpc(), error.message);
        if let Some(after) = error.retry_after
            && let Ok(value) = after.as_millis().to_string().parse()
        {
            // What gRPC's retry support reads as the server's pushback.
            status.metadata_mut().insert("grpc-retry-pushback-ms", value);
        }
        status
    }
}

type Answer<T> = Result<Response<T>, Status>;

#[tonic::async_trait]
impl GrpcInferenceService for GrpcEndpoint {
    async fn server_live(&self, _: Request<ServerLiveRequest>) -> Answer<ServerLiveResponse> {
        Ok(Response::new(ServerLiveResponse { live: true }))
    }

    async fn server_ready(&self, _: Request<ServerReadyRequest>) -> Answer<ServerReadyResponse> {
        Ok(Response::new(ServerReadyResponse { ready: self.service.is_ready() }))
    }

    async fn model_ready(&self, request: Request<ModelReadyRequest>) -> Answer<ModelReadyResponse> {
        let request = request.into_inner();
        Ok(Response::new(ModelReadyResponse { ready: self.service.model_ready(&request.name, &request.version) }))
    }

    async fn server_metadata(&self, _: Request<ServerMetadataRequest>) -> Answer<ServerMetadataResponse> {
        Ok(Response::new(ServerMetadataResponse {
            name: "modelless".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            extensions: EXTENSIONS.iter().map(|e| e.to_string()).collect(),
        }))
    }

    async fn model_metadata(&self, request: Request<ModelMetadataRequest>) -> Answer<ModelMetadataResponse> {
        let request = request.into_inner();
        let described = self.service.metadata(&request.name, &request.version)?;
        let metadata = |spec: &TensorSpec| {
            let (datatype, shape) = described.presented(spec);
            TensorMetadata { name: spec.name.clone(), datatype: datatype.into(), shape }
        };
        Ok(Response::new(ModelMetadataResponse {
            name: described.name.clone(),
            versions: described.versions.clone(),
            platform: described.platform.into(),
            inputs: described.inputs.iter().map(metadata).collect(),
            outputs: described.outputs.iter().map(metadata).collect(),
        }))
    }

    async fn model_infer(&self, request: Request<ModelInferRequest>) -> Answer<ModelInferResponse> {
        let (metadata, _, message) = request.into_parts();
        let headers = metadata.into_headers();
        Ok(Response::new(self.infer(message, call_timeout(&headers), RemoteParent::from_headers(&headers)).await?))
    }

    async fn model_statistics(&self, request: Request<ModelStatisticsRequest>) -> Answer<ModelStatisticsResponse> {
        let request = request.into_inner();
        let stats = self.service.statistics(&request.name)?;
        Ok(Response::new(ModelStatisticsResponse { model_stats: stats.into_iter().map(encode_stats).collect() }))
    }

    async fn repository_index(&self, request: Request<RepositoryIndexRequest>) -> Answer<RepositoryIndexResponse> {
        let entries = self.service.repository_index(request.into_inner().ready).await?;
        let models = entries
            .into_iter()
            .map(|e| repository_index_response::ModelIndex {
                name: e.name,
                version: e.version,
                state: e.state,
                reason: e.reason,
            })
            .collect();
        Ok(Response::new(RepositoryIndexResponse { models }))
    }

    async fn repository_model_load(
        &self,
        request: Request<RepositoryModelLoadRequest>,
    ) -> Answer<RepositoryModelLoadResponse> {
        let authorization = authorization(&request);
        let request = request.into_inner();
        let parameters = request.parameters.iter().map(|(key, value)| {
            let text = match &value.parameter_choice {
                Some(RepositoryChoice::StringParam(s)) => Some(s.as_str()),
                _ => None,
            };
            (key.as_str(), text)
        });
        let config = load_config(parameters)?;
        self.service.repository_load(request.model_name, config, authorization.as_deref()).await?;
        Ok(Response::new(RepositoryModelLoadResponse {}))
    }

    async fn repository_model_unload(
        &self,
        request: Request<RepositoryModelUnloadRequest>,
    ) -> Answer<RepositoryModelUnloadResponse> {
        let authorization = authorization(&request);
        self.service.repository_unload(request.into_inner().model_name, authorization.as_deref()).await?;
        Ok(Response::new(RepositoryModelUnloadResponse {}))
    }
}

/// The `authorization` metadata of `request`, as text.
fn authorization<T>(request: &Request<T>) -> Option<String> {
    request.metadata().get("authorization").and_then(|v| v.to_str().ok()).map(str::to_string)
}

fn param_value(parameter: &InferParameter) -> Option<ParamValue> {
    Some(match parameter.parameter_choice.as_ref()? {
        ParameterChoice::BoolParam(b) => ParamValue::Bool(*b),
        ParameterChoice::Int64Param(i) => ParamValue::Int(*i),
        ParameterChoice::StringParam(s) => ParamValue::Str(s.clone()),
        ParameterChoice::DoubleParam(d) => ParamValue::Double(*d),
        ParameterChoice::Uint64Param(u) => ParamValue::UInt(*u),
    })
}

/// Decodes a request, checking each input's claim against `bounds` before taking its
/// contents.
pub(super) fn decode_infer(request: ModelInferRequest, bounds: &InputBounds) -> Result<InferCall, ServeError> {
    let ModelInferRequest { model_name, model_version, id, parameters, inputs, outputs, raw_input_contents } = request;
    bounds.limits.check_count("inputs", inputs.len())?;
    bounds.limits.check_count("outputs", outputs.len())?;
    let params = parameters.iter().filter_map(|(k, v)| Some((k.as_str(), param_value(v)?)));
    let params = InferParams::parse(params)?;
    let raw = &raw_input_contents;
    if !raw.is_empty() && raw.len() != inputs.len() {
        return Err(ServeError::invalid(format!(
            "{} raw_input_contents for {} inputs: give one per input, or none",
            raw.len(),
            inputs.len()
        )));
    }
    let mut tensors = Vec::with_capacity(inputs.len());
    let mut images = Vec::new();
    for (i, input) in inputs.into_iter().enumerate() {
        if input.datatype == "BYTES" {
            let count = bounds.check_images(&input.name, &input.shape)?;
            let elements = match (raw.get(i), input.contents) {
                (Some(bytes), None) => tensors::bytes_elements(&input.name, count, bytes)?,
                (None, Some(contents)) if contents.bytes_contents.len() == count => {
                    contents.bytes_contents.into_iter().map(bytes::Bytes::from).collect()
                }
                _ => {
                    return Err(ServeError::invalid(format!(
                        "input `{}`: give its {count} images in raw_input_contents or as bytes_contents",
                        input.name
                    )));
                }
            };
            images.push((input.name, elements));
            continue;
        }
        let dtype = tensors::parse_datatype(&input.datatype)?;
        let claim = bounds.check(&input.name, dtype, &input.shape)?;
        let tensor = match (raw.get(i), input.contents) {
            (Some(_), Some(_)) => {
                return Err(ServeError::invalid(format!(
                    "input `{}` has both contents and raw_input_contents",
                    input.name
                )));
            }
            (Some(bytes), None) => tensors::from_raw(&input.name, dtype, &input.shape, bytes)?,
            (None, Some(contents)) => tensors::from_contents(&input.name, dtype, claim, contents)?,
            (None, None) => return Err(ServeError::invalid(format!("input `{}` has no contents", input.name))),
        };
        tensors.push((input.name, tensor));
    }
    Ok(InferCall {
        model: model_name,
        version: model_version,
        id,
        params,
        inputs: tensors,
        images,
        outputs: outputs
            .into_iter()
            .map(|o| {
                let classification = o.parameters.get("classification").and_then(param_value);
                RequestedOutput::parse(o.name, classification.as_ref())
            })
            .collect::<Result<_, _>>()?,
        deadline: None,
        parent: RemoteParent::default(),
    })
}

fn encode_infer(answer: InferAnswer) -> ModelInferResponse {
    let parameters = answer
        .parameters()
        .into_iter()
        .map(|(key, value)| {
            let choice = match value {
                ParamValue::Bool(b) => ParameterChoice::BoolParam(b),
                ParamValue::Int(i) => ParameterChoice::Int64Param(i),
                ParamValue::UInt(u) => ParameterChoice::Uint64Param(u),
                ParamValue::Double(d) => ParameterChoice::DoubleParam(d),
                ParamValue::Str(s) => ParameterChoice::StringParam(s),
            };
            (key, InferParameter { parameter_choice: Some(choice) })
        })
        .collect();
    let (outputs, raw) = answer
        .outputs
        .iter()
        .map(|(name, tensor)| {
            let output = model_infer_response::InferOutputTensor {
                name: name.clone(),
                datatype: tensor.datatype().into(),
                shape: tensor.shape(),
                parameters: HashMap::new(),
                contents: None,
            };
            (output, Bytes::from(tensor.to_raw()))
        })
        .unzip();
    ModelInferResponse {
        model_name: answer.model,
        model_version: answer.version.to_string(),
        id: answer.id,
        parameters,
        outputs,
        raw_output_contents: raw,
    }
}

fn encode_stats(stats: ModelStats) -> ModelStatistics {
    let [success, fail, queue, compute_input, compute_infer, compute_output] =
        stats.durations().map(|(_, count, d)| Some(StatisticDuration { count, ns: d.as_nanos() as u64 }));
    ModelStatistics {
        name: stats.name,
        version: stats.version.map(|v| v.to_string()).unwrap_or_default(),
        last_inference: 0,
        inference_count: stats.totals.inferences,
        execution_count: stats.totals.executions,
        inference_stats: Some(InferStatistics { success, fail, queue, compute_input, compute_infer, compute_output }),
        batch_stats: Vec::new(),
    }
}

/// The call's `grpc-timeout`, if it has a valid one.
pub(super) fn call_timeout(headers: &tonic::codegen::http::HeaderMap) -> Option<Duration> {
    headers.get("grpc-timeout").and_then(|v| v.to_str().ok()).and_then(grpc_timeout)
}

/// The value of a `grpc-timeout` header: digits and a unit (H, M, S, m, u, n).
fn grpc_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n.saturating_mul(3600)),
        "M" => Duration::from_secs(n.saturating_mul(60)),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kserve::status::Code;

    #[test]
    fn grpc_timeouts_are_read_in_every_unit() {
        assert_eq!(grpc_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(grpc_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(grpc_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(grpc_timeout("10x"), None);
        assert_eq!(grpc_timeout(""), None);
    }

    #[test]
    fn raw_and_typed_contents_cannot_be_mixed() {
        let input = model_infer_request::InferInputTensor {
            name: "x".into(),
            datatype: "FP32".into(),
            shape: vec![1],
            parameters: HashMap::new(),
            contents: Some(InferTensorContents { fp32_contents: vec![1.0], ..Default::default() }),
        };
        let request = ModelInferRequest {
            inputs: vec![input.clone()],
            raw_input_contents: vec![Bytes::from(vec![0u8; 4])],
            ..Default::default()
        };
        let bounds = InputBounds {
            image_input: None,
            inputs: vec![crate::backend::TensorSpec::new("x", crate::tensor::DType::F32, [None])],
            batched: true,
            max_rows: 8,
            limits: Default::default(),
        };
        assert_eq!(decode_infer(request, &bounds).unwrap_err().code, Code::InvalidArgument);
        let typed = ModelInferRequest { inputs: vec![input], ..Default::default() };
        let call = decode_infer(typed, &bounds).unwrap();
        assert_eq!(call.inputs[0].1.as_slice::<f32>(), Some(&[1.0f32][..]));
    }
}
