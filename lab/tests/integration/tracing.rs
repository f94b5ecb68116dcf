//! Request spans over OTLP: `modelless serve --otlp-endpoint` exports one request's
//! span, with a child per stage, to an OTLP receiver this test runs on loopback, and
//! the span continues the trace its client named in `traceparent`.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::{InferTensorContents, ModelInferRequest};
use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{TraceService, TraceServiceServer};
use opentelemetry_proto::tonic::collector::trace::v1::{ExportTraceServiceRequest, ExportTraceServiceResponse};
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;

use crate::common::models_dir;
use crate::hostile_clients::ServeProcess;

/// The client's trace and span, as its `traceparent` names them.
const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const CLIENT_SPAN_ID: &str = "00f067aa0ba902b7";
/// Longest the test waits for the answer, and then for the spans.
const WAIT: Duration = Duration::from_secs(60);

/// An OTLP trace receiver: keeps every span it is sent.
#[derive(Clone, Default)]
struct Receiver {
    spans: Arc<Mutex<Vec<Span>>>,
}

#[tonic::async_trait]
impl TraceService for Receiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let scopes = request.into_inner().resource_spans.into_iter().flat_map(|r| r.scope_spans);
        self.spans.lock().unwrap().extend(scopes.flat_map(|s| s.spans));
        Ok(tonic::Response::new(ExportTraceServiceResponse { partial_success: None }))
    }
}

/// A task `photos` with one variant, MobileNetV2-0.35, that takes photos.
fn config(dir: &std::path::Path) -> std::path::PathBuf {
    let text = format!(
        "[preprocessing]\nthreads = 1\n\n[[tasks]]\nname = \"photos\"\n\n[[tasks.variants]]\nname = \"mobilenet\"\n\
         path = \"{}\"\naccuracy = 60.3\nwarmup = {{ enabled = false }}\n\
         preprocess = {{ size = 224, mean = [127.0, 127.0, 127.0], std = [128.0, 128.0, 128.0] }}\n",
        models_dir().join("mobilenetv2_0.35.onnx").display()
    );
    let path = dir.join("serve.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A small PNG photo.
fn photo() -> Vec<u8> {
    let image = image::RgbImage::from_fn(64, 48, |x, y| image::Rgb([x as u8 * 4, y as u8 * 5, 128]));
    let mut png = std::io::Cursor::new(Vec::new());
    image.write_to(&mut png, image::ImageFormat::Png).unwrap();
    png.into_inner()
}

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// An attribute of `span` as text.
fn attribute(span: &Span, key: &str) -> Option<String> {
    let value = span.attributes.iter().find(|kv| kv.key == key)?.value.as_ref()?.value.as_ref()?;
    Some(match value {
        Value::StringValue(s) => s.clone(),
        Value::IntValue(i) => i.to_string(),
        Value::DoubleValue(d) => d.to_string(),
        Value::BoolValue(b) => b.to_string(),
        other => format!("{other:?}"),
    })
}

fn millis(span: &Span) -> f64 {
    span.end_time_unix_nano.saturating_sub(span.start_time_unix_nano) as f64 / 1e6
}

/// `modelless serve` exports the request span of a gRPC inference to the OTLP endpoint
/// it is given, as a child of the client's span (its `traceparent`), with its stages
/// as children in the order they ran: decode, preprocess, queue, batch. The batch's
/// own span is exported too, linked with the request's `batch` span both ways. The
/// last spans leave as the server stops.
#[test]
fn one_requests_trace_reaches_the_otlp_receiver_with_its_stages_in_order_and_nested() {
    let dir = tempfile::tempdir().unwrap();
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let receiver = Receiver::default();
    let listener = tokio.block_on(tokio::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let otlp = format!("http://{}", listener.local_addr().unwrap());
    let (stop_receiver, stopped) = tokio::sync::oneshot::channel::<()>();
    let receiving = tokio.spawn(
        tonic::transport::Server::builder()
            .add_service(TraceServiceServer::new(receiver.clone()))
            .serve_with_incoming_shutdown(tonic::transport::server::TcpIncoming::from(listener), async {
                let _ = stopped.await;
            }),
    );

    let mut server = ServeProcess::start_with(&config(dir.path()), &[OsStr::new("--otlp-endpoint"), OsStr::new(&otlp)]);
    let answered = tokio.block_on(async {
        let mut client = GrpcInferenceServiceClient::connect(format!("http://{}", server.grpc)).await.unwrap();
        let input = InferInputTensor {
            name: "input".into(),
            datatype: "BYTES".into(),
            shape: vec![1],
            contents: Some(InferTensorContents { bytes_contents: vec![photo()], ..Default::default() }),
            ..Default::default()
        };
        let mut request = tonic::Request::new(ModelInferRequest {
            model_name: "photos".into(),
            inputs: vec![input],
            ..Default::default()
        });
        let traceparent = format!("00-{TRACE_ID}-{CLIENT_SPAN_ID}-01");
        request.metadata_mut().insert("traceparent", traceparent.parse().unwrap());
        tokio::time::timeout(WAIT, client.model_infer(request)).await
    });
    let answer = answered
        .unwrap_or_else(|_| panic!("no answer within {WAIT:?}"))
        .unwrap_or_else(|status| panic!("refused: {status:?}"));
    assert_eq!(answer.into_inner().model_name, "mobilenet");
    // The exporter sends in batches every few seconds; stopping sends what is left.
    assert!(server.stop(), "serve did not stop cleanly: {:?}", server.log.lock().unwrap());

    let ours = |spans: &[Span]| spans.iter().filter(|s| hex(&s.trace_id) == TRACE_ID).count();
    let until = Instant::now() + WAIT;
    while ours(&receiver.spans.lock().unwrap()) < 5 && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = stop_receiver.send(());
    tokio.block_on(receiving).unwrap().unwrap();
    let spans = receiver.spans.lock().unwrap().clone();
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };

    let [request] = named("request")[..] else { panic!("one request span, not {:#?}", named("request")) };
    assert_eq!(hex(&request.trace_id), TRACE_ID, "the client's trace continues");
    assert_eq!(hex(&request.parent_span_id), CLIENT_SPAN_ID, "under the client's span");
    assert_eq!(attribute(request, "task").as_deref(), Some("photos"));
    assert_eq!(attribute(request, "variant").as_deref(), Some("mobilenet"));
    assert_eq!(attribute(request, "priority").as_deref(), Some("Normal"));

    let stages = ["decode", "preprocess", "queue", "batch"];
    let mut children: Vec<&Span> = spans.iter().filter(|s| s.parent_span_id == request.span_id).collect();
    children.sort_by_key(|s| s.start_time_unix_nano);
    let order: Vec<&str> = children.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(order, stages, "the request's children, by start time");
    for child in &children {
        assert_eq!(child.trace_id, request.trace_id, "{} is in the request's trace", child.name);
        assert!(
            request.start_time_unix_nano <= child.start_time_unix_nano
                && child.end_time_unix_nano <= request.end_time_unix_nano,
            "{} lies within the request span",
            child.name
        );
    }
    for pair in children.windows(2) {
        assert!(
            pair[0].end_time_unix_nano <= pair[1].start_time_unix_nano,
            "{} ends before {}",
            pair[0].name,
            pair[1].name
        );
    }
    let batch = children[3];
    assert_eq!(
        (attribute(batch, "batch_size").as_deref(), attribute(batch, "instance").as_deref()),
        (Some("1"), Some("0"))
    );

    let [run] = named("batch_run")[..] else { panic!("one batch_run span, not {:#?}", named("batch_run")) };
    assert!(run.parent_span_id.is_empty(), "a batch's span is a root: it serves several traces");
    assert_eq!(attribute(run, "batch_size").as_deref(), Some("1"));
    assert_eq!(attribute(run, "requests").as_deref(), Some("1"));
    assert!(batch.links.iter().any(|l| l.span_id == run.span_id), "the request's batch links to the batch's span");
    assert!(run.links.iter().any(|l| l.span_id == request.span_id), "the batch's span links to the request");

    // The trace as docs/serving.md shows it (`--nocapture`).
    let offset = |s: &Span| (s.start_time_unix_nano - request.start_time_unix_nano) as f64 / 1e6;
    eprintln!("request {:.3} ms  {:?}", millis(request), attributes(request));
    for child in &children {
        eprintln!("  {:<10} +{:.3} ms  {:.3} ms  {:?}", child.name, offset(child), millis(child), attributes(child));
    }
    eprintln!("batch_run +{:.3} ms  {:.3} ms  {:?}", offset(run), millis(run), attributes(run));
}

/// The span's attributes, with the thread it began on.
fn attributes(span: &Span) -> BTreeMap<String, String> {
    let keys = span.attributes.iter().map(|kv| &kv.key).filter(|k| *k != "thread.id");
    keys.filter_map(|key| Some((key.clone(), attribute(span, key)?))).collect()
}
