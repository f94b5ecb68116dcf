//! The HTTP/REST endpoint: the same protocol with JSON bodies (`/v2/...`), Triton's
//! binary tensor extension (JSON header, then raw tensors, its length in
//! `Inference-Header-Content-Length`), and `/metrics` for Prometheus.

use std::sync::Arc;

use std::panic::AssertUnwindSafe;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use futures_util::FutureExt;
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::body::{InferBody, Parameters};
use super::grpc::EXTENSIONS;
use super::limits::InputBounds;
use super::params::{InferParams, ParamValue};
use super::repository::load_config;
use super::service::{InferAnswer, InferCall, InferenceService, ModelStats};
use super::status::ServeError;
use super::tensors;
use crate::backend::TensorSpec;
use crate::metrics::serving_metrics;

/// Header giving the length of the JSON part of a body that carries binary tensors.
const HEADER_LENGTH: &str = "inference-header-content-length";

/// The routes of the HTTP endpoint. A body larger than the service's message limit is
/// refused with 413, one not received within `read_timeout` with 408; a panic while
/// handling a request answers it 500 and is counted.
pub fn router(service: Arc<InferenceService>, read_timeout: Duration) -> Router {
    let max_body_bytes = service.limits().max_message_bytes;
    Router::new()
        .route("/v2", get(server_metadata))
        .route("/v2/health/live", get(|| async { StatusCode::OK }))
        .route("/v2/health/ready", get(server_ready))
        .route("/v2/models/stats", get(all_statistics))
        .route("/v2/models/{name}", get(model_metadata))
        .route("/v2/models/{name}/versions/{version}", get(versioned_metadata))
        .route("/v2/models/{name}/ready", get(model_ready))
        .route("/v2/models/{name}/versions/{version}/ready", get(versioned_ready))
        .route("/v2/models/{name}/infer", post(infer))
        .route("/v2/models/{name}/versions/{version}/infer", post(versioned_infer))
        .route("/v2/models/{name}/stats", get(statistics))
        .route("/v2/repository/index", post(repository_index))
        // One route for load and unload, so that a name holding `/` or `..` reaches the
        // repository's check (and is refused 403) instead of missing every route.
        .route("/v2/repository/models/{*call}", post(repository_call))
        .route("/metrics", get(metrics))
        .layer(middleware::from_fn_with_state((read_timeout, max_body_bytes), read_body_within))
        .layer(DefaultBodyLimit::max(max_body_bytes))
        .layer(middleware::from_fn(contain_panics))
        .with_state(service)
}

/// Receives the whole body, within the read timeout and the size limit, before the
/// handler runs: a client that sends slowly holds no handler, and is cut off.
async fn read_body_within(
    State((timeout, max_bytes)): State<(Duration, usize)>,
    request: Request,
    next: Next,
) -> Response {
    let (parts, body) = request.into_parts();
    let received = match tokio::time::timeout(timeout, axum::body::to_bytes(body, max_bytes)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if is_length_limit(&e) => {
            let message = format!("request body over the server's limit of {max_bytes} bytes (max_message_mib)");
            return ServeError::too_large(message).into_response();
        }
        Ok(Err(e)) => return ServeError::invalid(format!("request body: {e}")).into_response(),
        Err(_) => {
            let message = format!("request body not received within {} ms", timeout.as_millis());
            return (StatusCode::REQUEST_TIMEOUT, axum::Json(json!({ "error": message }))).into_response();
        }
    };
    next.run(Request::from_parts(parts, Body::from(received))).await
}

/// Whether a body failed for being over its limit.
fn is_length_limit(error: &axum::Error) -> bool {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(error);
    while let Some(e) = source {
        if e.is::<http_body_util::LengthLimitError>() {
            return true;
        }
        source = e.source();
    }
    false
}

/// Answers a request whose handling panicked with 500, and counts it; the connection
/// and the server go on.
async fn contain_panics(request: Request, next: Next) -> Response {
    match AssertUnwindSafe(next.run(request)).catch_unwind().await {
        Ok(response) => response,
        Err(panic) => ServeError::from_panic("http", panic.as_ref()).into_response(),
    }
}

type Shared = State<Arc<InferenceService>>;

impl IntoResponse for ServeError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.http_status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        (status, axum::Json(json!({ "error": self.message }))).into_response()
    }
}

async fn server_metadata() -> axum::Json<Value> {
    axum::Json(json!({ "name": "modelless", "version": env!("CARGO_PKG_VERSION"), "extensions": EXTENSIONS }))
}

fn ok_or_unavailable(ready: bool) -> StatusCode {
    if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }
}

async fn server_ready(State(service): Shared) -> StatusCode {
    ok_or_unavailable(service.is_ready())
}

async fn model_ready(State(service): Shared, Path(name): Path<String>) -> StatusCode {
    ok_or_unavailable(service.model_ready(&name, ""))
}

async fn versioned_ready(State(service): Shared, Path((name, version)): Path<(String, String)>) -> StatusCode {
    ok_or_unavailable(service.model_ready(&name, &version))
}

async fn model_metadata(state: Shared, Path(name): Path<String>) -> Result<axum::Json<Value>, ServeError> {
    describe(state, name, String::new())
}

async fn versioned_metadata(
    state: Shared,
    Path((name, version)): Path<(String, String)>,
) -> Result<axum::Json<Value>, ServeError> {
    describe(state, name, version)
}

fn describe(State(service): Shared, name: String, version: String) -> Result<axum::Json<Value>, ServeError> {
    let described = service.metadata(&name, &version)?;
    let spec = |s: &TensorSpec| json!({ "name": s.name, "datatype": tensors::datatype(s.dtype), "shape": tensors::spec_shape(s) });
    Ok(axum::Json(json!({
        "name": described.name,
        "versions": described.versions,
        "platform": described.platform,
        "inputs": described.inputs.iter().map(spec).collect::<Vec<_>>(),
        "outputs": described.outputs.iter().map(spec).collect::<Vec<_>>(),
    })))
}

async fn infer(state: Shared, Path(name): Path<String>, headers: HeaderMap, body: Bytes) -> Response {
    run_infer(state, name, String::new(), headers, body).await
}

async fn versioned_infer(
    state: Shared,
    Path((name, version)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    run_infer(state, name, version, headers, body).await
}

async fn run_infer(State(service): Shared, name: String, version: String, headers: HeaderMap, body: Bytes) -> Response {
    let bounds = service.input_bounds(&name, &version);
    let decoded = bounds.and_then(|b| decode_infer(name.clone(), version.clone(), &headers, &body, &b));
    let (call, binary) = match decoded {
        Ok(decoded) => decoded,
        Err(e) => return service.refused("http", &name, &version, e).into_response(),
    };
    match service.infer(call).await {
        Ok(answer) => encode_infer(answer, &binary),
        Err(e) => e.into_response(),
    }
}

/// Which outputs go back as binary.
struct BinaryOutputs {
    all: bool,
    named: Vec<(String, bool)>,
}

impl BinaryOutputs {
    fn wants(&self, output: &str) -> bool {
        self.named.iter().find(|(n, _)| n == output).map_or(self.all, |(_, b)| *b)
    }
}

/// Decodes an inference request, checking each input's claim against `bounds` before
/// reading its data.
fn decode_infer(
    model: String,
    version: String,
    headers: &HeaderMap,
    body: &Bytes,
    bounds: &InputBounds,
) -> Result<(InferCall, BinaryOutputs), ServeError> {
    let header_length = match headers.get(HEADER_LENGTH) {
        None => body.len(),
        Some(value) => value
            .to_str()
            .ok()
            .and_then(|v| v.trim().parse::<usize>().ok())
            .filter(|&n| n <= body.len())
            .ok_or_else(|| ServeError::invalid(format!("{HEADER_LENGTH} is not a length within the body")))?,
    };
    let request: InferBody = serde_json::from_slice(&body[..header_length])
        .map_err(|e| ServeError::invalid(format!("request body is not an inference request: {e}")))?;
    bounds.limits.check_count("inputs", request.inputs.0.len())?;
    bounds.limits.check_count("outputs", request.outputs.0.len())?;
    let mut binary = body.slice(header_length..);
    let params = InferParams::parse(request.parameters.0.iter().map(|(k, v)| (k.as_str(), v.clone())))?;
    let mut inputs = Vec::with_capacity(request.inputs.0.len());
    for input in &request.inputs.0 {
        let dtype = tensors::parse_datatype(&input.datatype)?;
        let claim = bounds.check(&input.name, dtype, &input.shape.0)?;
        let tensor = match (input.parameters.get("binary_data_size"), &input.data) {
            (Some(size), None) => {
                let size =
                    size.as_u64().and_then(|s| usize::try_from(s).ok()).filter(|&s| s <= binary.len()).ok_or_else(
                        || {
                            ServeError::invalid(format!(
                                "input `{}`: binary_data_size is not a length within the {} bytes of binary data left",
                                input.name,
                                binary.len()
                            ))
                        },
                    )?;
                let bytes = binary.split_to(size);
                tensors::from_raw(&input.name, dtype, &input.shape.0, &bytes)?
            }
            (None, Some(data)) => tensors::from_json(&input.name, dtype, claim, data.get())?,
            _ => {
                return Err(ServeError::invalid(format!(
                    "input `{}` needs either `data` or parameter `binary_data_size`",
                    input.name
                )));
            }
        };
        inputs.push((input.name.clone(), tensor));
    }
    if !binary.is_empty() {
        return Err(ServeError::invalid(format!("{} bytes of binary data belong to no input", binary.len())));
    }
    let binary = BinaryOutputs {
        all: request.parameters.flag("binary_data_output").unwrap_or(false),
        named: request
            .outputs
            .0
            .iter()
            .filter_map(|o| Some((o.name.clone(), o.parameters.flag("binary_data")?)))
            .collect(),
    };
    let call = InferCall {
        model,
        version,
        id: request.id.unwrap_or_default(),
        params,
        inputs,
        outputs: request.outputs.0.into_iter().map(|o| o.name).collect(),
        deadline: None,
    };
    Ok((call, binary))
}

fn encode_infer(answer: InferAnswer, binary: &BinaryOutputs) -> Response {
    let mut blobs: Vec<Vec<u8>> = Vec::new();
    let outputs: Vec<Value> = answer
        .outputs
        .iter()
        .map(|(name, tensor)| {
            let mut output = json!({
                "name": name,
                "datatype": tensors::datatype(tensor.dtype()),
                "shape": tensors::shape_of(tensor),
            });
            if binary.wants(name) {
                let raw = tensors::to_raw(tensor);
                output["parameters"] = json!({ "binary_data_size": raw.len() });
                blobs.push(raw);
            } else {
                output["data"] = tensors::to_json(tensor);
            }
            output
        })
        .collect();
    let parameters: Map<String, Value> =
        answer.parameters().into_iter().map(|(key, value)| (key.to_string(), value.to_json())).collect();
    let mut response = json!({
        "model_name": answer.model,
        "model_version": answer.version.to_string(),
        "parameters": parameters,
        "outputs": outputs,
    });
    if !answer.id.is_empty() {
        response["id"] = json!(answer.id);
    }
    let mut body = response.to_string().into_bytes();
    if blobs.is_empty() {
        return ([(header::CONTENT_TYPE, HeaderValue::from_static("application/json"))], body).into_response();
    }
    let header_length = body.len();
    blobs.iter().for_each(|b| body.extend_from_slice(b));
    let headers = [
        (header::CONTENT_TYPE, HeaderValue::from_static("application/octet-stream")),
        (header::HeaderName::from_static(HEADER_LENGTH), HeaderValue::from(header_length)),
    ];
    (headers, body).into_response()
}

fn stats_json(stats: Vec<ModelStats>) -> axum::Json<Value> {
    let entries: Vec<Value> = stats
        .into_iter()
        .map(|s| {
            let durations: Map<String, Value> = s
                .durations()
                .into_iter()
                .map(|(name, count, d)| (name.to_string(), json!({ "count": count, "ns": d.as_nanos() as u64 })))
                .collect();
            json!({
                "name": s.name,
                "version": s.version.map(|v| v.to_string()).unwrap_or_default(),
                "inference_count": s.totals.inferences,
                "execution_count": s.totals.executions,
                "inference_stats": durations,
            })
        })
        .collect();
    axum::Json(json!({ "model_stats": entries }))
}

async fn all_statistics(State(service): Shared) -> Result<axum::Json<Value>, ServeError> {
    Ok(stats_json(service.statistics("")?))
}

async fn statistics(State(service): Shared, Path(name): Path<String>) -> Result<axum::Json<Value>, ServeError> {
    Ok(stats_json(service.statistics(&name)?))
}

#[derive(Deserialize, Default)]
struct IndexBody {
    #[serde(default)]
    ready: bool,
}

async fn repository_index(State(service): Shared, body: Bytes) -> Result<axum::Json<Value>, ServeError> {
    let request: IndexBody = if body.is_empty() {
        IndexBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ServeError::invalid(format!("index request: {e}")))?
    };
    let entries = service.repository_index(request.ready).await?;
    let entries: Vec<Value> = entries
        .into_iter()
        .map(|e| {
            let mut entry = json!({ "name": e.name, "state": e.state });
            if !e.version.is_empty() {
                entry["version"] = json!(e.version);
            }
            if !e.reason.is_empty() {
                entry["reason"] = json!(e.reason);
            }
            entry
        })
        .collect();
    Ok(axum::Json(Value::Array(entries)))
}

#[derive(Deserialize, Default)]
struct LoadBody {
    #[serde(default)]
    parameters: Parameters,
}

async fn repository_call(
    State(service): Shared,
    Path(call): Path<String>,
    body: Bytes,
) -> Result<StatusCode, ServeError> {
    if let Some(name) = call.strip_suffix("/unload") {
        service.repository_unload(name.to_string()).await?;
        return Ok(StatusCode::OK);
    }
    let Some(name) = call.strip_suffix("/load") else {
        return Err(ServeError::new(super::status::Code::NotFound, format!("no repository call `{call}`")));
    };
    let request: LoadBody = if body.is_empty() {
        LoadBody::default()
    } else {
        serde_json::from_slice(&body).map_err(|e| ServeError::invalid(format!("load request: {e}")))?
    };
    let parameters = request.parameters.0.iter().map(|(key, value)| {
        let text = match value {
            ParamValue::Str(s) => Some(s.as_str()),
            _ => None,
        };
        (key.as_str(), text)
    });
    let config = load_config(parameters)?;
    service.repository_load(name.to_string(), config).await?;
    Ok(StatusCode::OK)
}

async fn metrics(State(service): Shared) -> impl IntoResponse {
    let text = serving_metrics().render(service.registry());
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], text)
}
