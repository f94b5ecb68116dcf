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

use super::answer::{InferAnswer, InferCall, ModelStats, RequestedOutput};
use super::body::{InferBody, Parameters};
use super::grpc::EXTENSIONS;
use super::limits::InputBounds;
use super::params::{InferParams, ParamValue};
use super::repository::load_config;
use super::service::InferenceService;
use super::status::{Code, ServeError};
use super::tensors;
use super::trace_context::RemoteParent;
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
        .route("/v2/policy", get(provenance))
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
    let too_large = || {
        let message = format!("request body over the server's limit of {max_bytes} bytes (max_message_mib)");
        closing(ServeError::too_large(message).counted_by("http").into_response())
    };
    // A body announced over the limit is refused at once, not after waiting for it.
    if declared_length(&parts.headers).is_some_and(|length| length > max_bytes as u64) {
        return too_large();
    }
    let received = match tokio::time::timeout(timeout, axum::body::to_bytes(body, max_bytes)).await {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(e)) if is_length_limit(&e) => return too_large(),
        Ok(Err(e)) => return ServeError::invalid(format!("request body: {e}")).counted_by("http").into_response(),
        Err(_) => {
            // Counted as gRPC counts the same event; answered 408, as HTTP clients expect.
            let message = format!("request body not received within {} ms", timeout.as_millis());
            let refused = ServeError::new(Code::DeadlineExceeded, message).counted_by("http");
            return closing(
                (StatusCode::REQUEST_TIMEOUT, axum::Json(json!({ "error": refused.message }))).into_response(),
            );
        }
    };
    next.run(Request::from_parts(parts, Body::from(received))).await
}

/// Marks an answer given before the body was read to its end. The server then closes
/// the connection (the rest of the body is still on it); the header tells a client's
/// connection pool not to send its next request on a socket that is going away.
fn closing(mut response: Response) -> Response {
    response.headers_mut().insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The body's length as its `Content-Length` header gives it.
fn declared_length(headers: &HeaderMap) -> Option<u64> {
    headers.get(header::CONTENT_LENGTH)?.to_str().ok()?.trim().parse().ok()
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
        let mut response = (status, axum::Json(json!({ "error": self.message }))).into_response();
        if let Some(after) = self.retry_after {
            // Whole seconds are all the header takes: rounded up, so a retry is never early.
            let seconds = after.as_secs() + u64::from(after.subsec_nanos() > 0);
            response.headers_mut().insert(axum::http::header::RETRY_AFTER, seconds.into());
        }
        response
    }
}

async fn server_metadata() -> axum::Json<Value> {
    axum::Json(json!({ "name": "modelless", "version": env!("CARGO_PKG_VERSION"), "extensions": EXTENSIONS }))
}

fn ok_or_unavailable(ready: bool) -> StatusCode {
    if ready { StatusCode::OK } else { StatusCode::SERVICE_UNAVAILABLE }
}

/// What this replica runs; read-only, so open as `/metrics` is.
async fn provenance(State(service): Shared) -> impl IntoResponse {
    axum::Json(service.provenance())
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
    let spec = |s: &TensorSpec| {
        let (datatype, shape) = described.presented(s);
        json!({ "name": s.name, "datatype": datatype, "shape": shape })
    };
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
    let mut images = Vec::new();
    for input in &request.inputs.0 {
        let binary_size = |binary: &Bytes| {
            let size = input.parameters.get("binary_data_size")?;
            Some(size.as_u64().and_then(|s| usize::try_from(s).ok()).filter(|&s| s <= binary.len()).ok_or_else(|| {
                ServeError::invalid(format!(
                    "input `{}`: binary_data_size is not a length within the {} bytes of binary data left",
                    input.name,
                    binary.len()
                ))
            }))
        };
        if input.datatype == "BYTES" {
            let count = bounds.check_images(&input.name, &input.shape.0)?;
            let Some(size) = binary_size(&binary).transpose()? else {
                return Err(ServeError::invalid(format!(
                    "input `{}`: images go as binary data (parameter `binary_data_size`), not JSON",
                    input.name
                )));
            };
            images.push((input.name.clone(), tensors::bytes_elements(&input.name, count, &binary.split_to(size))?));
            continue;
        }
        let dtype = tensors::parse_datatype(&input.datatype)?;
        let claim = bounds.check(&input.name, dtype, &input.shape.0)?;
        let tensor = match (binary_size(&binary).transpose()?, &input.data) {
            (Some(size), None) => {
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
        images,
        outputs: request
            .outputs
            .0
            .into_iter()
            .map(|o| {
                let classification = o.parameters.get("classification").cloned();
                RequestedOutput::parse(o.name, classification.as_ref())
            })
            .collect::<Result<_, _>>()?,
        deadline: None,
        parent: RemoteParent::from_headers(headers),
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
                "datatype": tensor.datatype(),
                "shape": tensor.shape(),
            });
            if binary.wants(name) {
                let raw = tensor.to_raw();
                output["parameters"] = json!({ "binary_data_size": raw.len() });
                blobs.push(raw);
            } else {
                output["data"] = tensor.to_json();
            }
            output
        })
        .collect();
    let parameters: Map<String, Value> =
        answer.parameters().into_iter().map(|(key, value)| (key, value.to_json())).collect();
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
    headers: HeaderMap,
    body: Bytes,
) -> Result<StatusCode, ServeError> {
    let authorization = headers.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    if let Some(name) = call.strip_suffix("/unload") {
        service.repository_unload(name.to_string(), authorization).await?;
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
    service.repository_load(name.to_string(), config, authorization).await?;
    Ok(StatusCode::OK)
}

async fn metrics(State(service): Shared) -> impl IntoResponse {
    let text = serving_metrics().render(&service.registry().gauge_reading());
    ([(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4"))], text)
}

#[cfg(test)]
mod tests {
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;
    use crate::fuzzing::{PeakAllocator, fuzz, hostile};
    use crate::kserve::Code;
    use crate::kserve::limits::RequestLimits;
    use crate::tensor::DType;

    /// A model taking `input` [N,3,2,2] FP32 and `ids` [N,2] INT64, up to 8 rows.
    fn bounds() -> InputBounds {
        InputBounds {
            image_input: None,
            inputs: vec![
                TensorSpec::new("input", DType::F32, [None, Some(3), Some(2), Some(2)]),
                TensorSpec::new("ids", DType::I64, [None, Some(2)]),
            ],
            batched: true,
            max_rows: 8,
            limits: RequestLimits::default(),
        }
    }

    /// One input as a client (or an attacker) writes it: a name, a datatype, a shape
    /// that fits the model or not, and data as JSON, as binary, or missing.
    fn input() -> impl Strategy<Value = (Value, Vec<u8>)> {
        let fitting = (1i64..11).prop_flat_map(|rows| {
            prop_oneof![Just(("input", "FP32", vec![rows, 3, 2, 2])), Just(("ids", "INT64", vec![rows, 2]))]
        });
        let name = prop_oneof![Just("input"), Just("ids"), Just("other")];
        let datatype = prop_oneof![Just("FP32"), Just("INT64"), Just("BYTES"), Just("UINT8"), Just("fp32"), Just("")];
        let hostile = (name, datatype, hostile::shape());
        prop_oneof![5 => fitting, 1 => hostile].prop_flat_map(|(name, datatype, shape)| {
            let elements = shape.iter().try_fold(1i64, |n, &d| n.checked_mul(d)).unwrap_or(-1);
            let n = usize::try_from(elements).unwrap_or(3).min(200);
            let numbers =
                prop_oneof![6 => vec((-9i64..9).prop_map(Value::from), n..=n), 1 => vec(hostile::scalar(), 0..n + 2)];
            let json_data = prop_oneof![4 => numbers.prop_map(Value::Array), 1 => hostile::json()];
            let binary_len = prop_oneof![Just(n * 4), Just(n * 8), 0usize..64];
            let data = prop_oneof![
                4 => json_data.prop_map(|data| (Some(data), None)),
                2 => binary_len.prop_map(|len| (None, Some(len))),
                1 => Just((None, None)),
            ];
            let claimed_size = prop_oneof![4 => Just(None), 1 => any::<u64>().prop_map(Some)];
            (data, claimed_size, vec(any::<u8>(), 0..8)).prop_map(move |((data, binary), claimed, noise)| {
                let mut input = json!({ "name": name, "datatype": datatype, "shape": shape });
                if let Some(data) = data {
                    input["data"] = data;
                }
                let mut bytes = Vec::new();
                if let Some(len) = binary {
                    bytes = (0..len).map(|i| i as u8).collect();
                    input["parameters"] = json!({ "binary_data_size": claimed.unwrap_or(len as u64) });
                } else if claimed.is_some() {
                    bytes = noise;
                }
                (input, bytes)
            })
        })
    }

    /// A whole request: its JSON (mangled or not), its binary tail, and the header
    /// that tells where the JSON ends (right, wrong or absent).
    fn request() -> impl Strategy<Value = (HeaderMap, Bytes)> {
        let value = prop_oneof![6 => hostile::scalar(), 1 => hostile::json()];
        let parameters = vec((prop_oneof![Just("latency_ms"), Just("binary_data_output"), Just("x")], value), 0..3);
        (vec(input(), 1..3), parameters).prop_flat_map(|(inputs, parameters)| {
            let (inputs, tails): (Vec<Value>, Vec<Vec<u8>>) = inputs.into_iter().unzip();
            let parameters: Map<String, Value> = parameters.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let header = json!({ "id": "fuzz", "parameters": parameters, "inputs": inputs }).to_string();
            let tail = tails.concat();
            // Where the JSON ends: said right, absent (right only without a binary tail),
            // or wrong.
            let header_length = prop_oneof![
                3 => Just(Some(None)),
                2 => Just(None),
                1 => any::<u64>().prop_map(|n| Some(Some(n.to_string()))),
                1 => Just(Some(Some("-1".to_string()))),
            ];
            (hostile::mangled(header), header_length).prop_map(move |(json, header_length)| {
                let mut headers = HeaderMap::new();
                let said = header_length.map(|wrong| wrong.unwrap_or_else(|| json.len().to_string()));
                if let Some(length) = said.and_then(|l| HeaderValue::from_str(&l).ok()) {
                    headers.insert(HEADER_LENGTH, length);
                }
                (headers, Bytes::from([json, tail.clone()].concat()))
            })
        })
    }

    /// Raw bytes, with or without a header length.
    fn raw_body() -> impl Strategy<Value = (HeaderMap, Bytes)> {
        (vec(any::<u8>(), 0..512), proptest::option::of(any::<u16>())).prop_map(|(bytes, length)| {
            let mut headers = HeaderMap::new();
            if let Some(length) = length {
                headers.insert(HEADER_LENGTH, HeaderValue::from(length));
            }
            (headers, Bytes::from(bytes))
        })
    }

    #[test]
    fn fuzz_http_json_and_binary_bodies() {
        let bounds = bounds();
        let body = prop_oneof![4 => request(), 1 => raw_body()];
        let (accepted, refused) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        fuzz("http-infer-body", body, |(headers, body)| {
            PeakAllocator::reset();
            let decoded = decode_infer("m".into(), String::new(), &headers, &body, &bounds);
            let largest = PeakAllocator::largest();
            prop_assert!(
                largest <= 4 * body.len() + (64 << 10),
                "decoding {} bytes allocated {largest} bytes at once",
                body.len()
            );
            match decoded {
                Ok((call, _)) => {
                    accepted.set(accepted.get() + call.inputs.len());
                    for (name, tensor) in &call.inputs {
                        let shape = tensors::shape_of(tensor);
                        prop_assert!(bounds.check(name, tensor.dtype(), &shape).is_ok(), "{name}: {shape:?}");
                    }
                }
                Err(e) => {
                    refused.set(refused.get() + 1);
                    prop_assert!(
                        matches!(e.code, Code::InvalidArgument | Code::OutOfRange),
                        "refused as {:?}: {}",
                        e.code,
                        e.message
                    )
                }
            }
            Ok(())
        });
        // The generator reaches the data decoders, not only the parser's refusals.
        assert!(
            accepted.get() > 0 && refused.get() > 0,
            "{} inputs accepted, {} bodies refused",
            accepted.get(),
            refused.get()
        );
    }

    #[test]
    fn the_claim_that_aborted_the_server_is_refused_naming_the_limit() {
        let body = r#"{"inputs":[{"name":"input","shape":[1000000000,3,224,224],"datatype":"FP32","data":[1]}]}"#;
        let bounds = InputBounds {
            image_input: None,
            inputs: vec![TensorSpec::new("input", DType::F32, [None, Some(3), Some(224), Some(224)])],
            ..bounds()
        };
        PeakAllocator::reset();
        let refused = decode_infer("m".into(), String::new(), &HeaderMap::new(), &Bytes::from(body), &bounds);
        let refused = refused.err().map(|e| (e.http_status(), e.message));
        assert!(PeakAllocator::largest() < 64 << 10);
        let (status, message) = refused.unwrap_or_default();
        assert_eq!(status, 413, "{message}");
        assert!(message.contains("max_tensor_elements"), "{message}");
    }
}
