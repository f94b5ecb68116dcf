//! The KServe V2 endpoints on loopback: the real Python clients (`tritonclient`, gRPC
//! and HTTP, installed by `scripts/setup/base.sh`) run `tests/kserve_client.py` against a
//! server this test starts, comparing answers with the same requests run in process;
//! a graceful shutdown, driven with the Rust gRPC client, answers what is under way;
//! and both endpoints serve over TLS.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use modelless::kserve::{ModelControlMode, ServerConfig, TlsConfig};
use modelless::{BatchingConfig, Runtime, RuntimeConfig, Slo, TaskConfig, Tensor, VariantConfig};
use modelless_runtime::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::{InferTensorContents, ModelInferRequest, ServerReadyRequest};
use modelless_runtime::kserve::tensors;
use modelless_runtime::kserve::tonic::transport::{Certificate, ClientTlsConfig, Endpoint};
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::{TlsConnector, rustls};

use crate::common::{crate_dir, models_dir};

const MAX_MESSAGE_MIB: usize = 4;

/// Deterministic values in [-0.5, 0.5).
fn values(n: usize, seed: usize) -> Vec<f32> {
    (0..n).map(|i| ((i * 7919 + seed * 104_729) % 1000) as f32 / 1000.0 - 0.5).collect()
}

fn tensor_json(name: &str, tensor: &Tensor) -> Value {
    json!({
        "name": name,
        "datatype": tensors::datatype(tensor.dtype()),
        "shape": tensor.shape(),
        "data": tensors::to_json(tensor),
    })
}

/// A request to `model`, with its answer run in process.
fn case(runtime: &Runtime, model: &str, served_by: &str, inputs: Vec<(&str, Tensor)>) -> Value {
    let named: modelless::Inputs = inputs.iter().map(|(n, t)| (*n, t.clone())).collect();
    let output = if runtime.tasks().iter().any(|t| t == model) {
        runtime.infer_task_blocking(model, named, Slo::default()).unwrap()
    } else {
        runtime.infer_blocking(model, named).unwrap()
    };
    assert_eq!(&*output.model, served_by);
    json!({
        "model": model,
        "served_by": served_by,
        "inputs": inputs.iter().map(|(n, t)| tensor_json(n, t)).collect::<Vec<_>>(),
        "outputs": output.iter().map(|(n, t)| tensor_json(n, t)).collect::<Vec<_>>(),
    })
}

/// A fresh folder holding a repository root with one model, and a model beside the root
/// that repository calls must not reach.
fn repository(models: &Path) -> (TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repository");
    std::fs::create_dir_all(root.join("tiny_repo/3")).unwrap();
    std::fs::copy(models.join("tiny.onnx"), root.join("tiny_repo/3/model.onnx")).unwrap();
    let outside = dir.path().join("outside.onnx");
    std::fs::copy(models.join("tiny.onnx"), &outside).unwrap();
    (dir, root, outside)
}

fn slow_model(runtime: &Runtime) {
    let config = FakeConfig { per_batch: Duration::from_millis(400), ..FakeConfig::default() };
    let batching = BatchingConfig::default().with_max_batch_size(1).with_max_queue_size(1);
    runtime.load_backend("slow", FakeBackend::factory(config, BatchLog::default()), 1, batching).unwrap();
}

fn served_runtime(models: &Path) -> Runtime {
    let variant = |name: &str, file: &str, accuracy| VariantConfig::new(name, models.join(file), accuracy);
    let task = TaskConfig::new("classify")
        .with_variant(variant("mnv2-0.35", "mobilenetv2_0.35.onnx", 60.3))
        .with_variant(variant("mnv2-0.5", "mobilenetv2_0.5.onnx", 65.4))
        .with_variant(variant("mnv2-0.75", "mobilenetv2_0.75.onnx", 69.8).with_preload(true));
    let mut config = RuntimeConfig::default();
    config.tasks.push(task);
    for name in ["tiny", "tiny_multi", "tiny_f16", "tiny_types"] {
        config.models.push(VariantConfig::plain(name, models.join(format!("{name}.onnx"))));
    }
    let runtime = Runtime::builder().with_config(config).build().unwrap();
    slow_model(&runtime);
    runtime
}

#[test]
fn tritonclient_over_grpc_and_http_gets_in_process_answers_and_typed_errors() {
    let models = models_dir();
    let (dir, root, outside) = repository(&models);
    let runtime = Arc::new(served_runtime(&models));

    let image = Tensor::new([1, 3, 224, 224], values(3 * 224 * 224, 1)).unwrap();
    let rows = |n: usize, seed| Tensor::new([n, 4], values(n * 4, seed)).unwrap();
    let half = |t: Tensor| {
        Tensor::new(
            t.shape().to_vec(),
            t.as_slice::<f32>().unwrap().iter().map(|&x| half::f16::from_f32(x)).collect::<Vec<_>>(),
        )
        .unwrap()
    };
    let cases = vec![
        case(&runtime, "classify", "mnv2-0.35", vec![("input", image)]),
        case(&runtime, "tiny", "tiny", vec![("input", rows(3, 2))]),
        case(
            &runtime,
            "tiny_multi",
            "tiny_multi",
            vec![("x", rows(2, 3)), ("k", Tensor::new([2, 2], vec![-7i64, 0, i64::MAX - 1, 42]).unwrap())],
        ),
        case(&runtime, "tiny_f16", "tiny_f16", vec![("input", half(rows(2, 4)))]),
        case(
            &runtime,
            "tiny_types",
            "tiny_types",
            vec![
                ("i32", Tensor::new([2, 2], vec![-5i32, 0, 7, i32::MAX - 1]).unwrap()),
                ("u8", Tensor::new([2, 2], vec![0u8, 1, 128, 255]).unwrap()),
                ("flag", Tensor::new([2, 2], vec![true, false, false, true]).unwrap()),
            ],
        ),
    ];

    let tokio = tokio::runtime::Runtime::new().unwrap();
    let explicit = ServerConfig::loopback()
        .with_max_message_mib(MAX_MESSAGE_MIB)
        .with_model_repository(&root)
        .with_model_control_mode(ModelControlMode::Explicit);
    // Explicit model control without a token, or the operator's insecure say, does not start.
    let Err(refused) = tokio.block_on(runtime.clone().serve(&explicit)) else {
        panic!("served without an admin token")
    };
    assert!(refused.to_string().contains("needs admin_token_file"), "{refused}");
    let token = dir.path().join("admin-token");
    std::fs::write(&token, "test-admin-token\n").unwrap();
    let server = tokio.block_on(runtime.clone().serve(&explicit.with_admin_token_file(&token))).unwrap();

    let plan = json!({
        "grpc": server.grpc_address().to_string(),
        "http": server.http_address().to_string(),
        "cases": cases,
        "task": "classify",
        "variant_ready": "mnv2-0.75",
        "variant_unloaded": "mnv2-0.5",
        "min_accuracy_for_other": 65.0,
        "variant_for_accuracy": "mnv2-0.75",
        "tiny": "tiny",
        "slow": "slow",
        "max_message_mib": MAX_MESSAGE_MIB,
        "repository_model": "tiny_repo",
        "outside_name": "outside",
        "outside_path": outside,
        "admin_token": "test-admin-token",
    });
    let (plan_path, report_path) = (dir.path().join("plan.json"), dir.path().join("report.json"));
    std::fs::write(&plan_path, plan.to_string()).unwrap();
    let python = crate_dir().join("../.modelless/venv/bin/python");
    let script = crate_dir().join("tests/kserve_client.py");
    let run = Command::new(&python).arg(&script).arg(&plan_path).arg(&report_path).output().unwrap_or_else(|e| {
        panic!("{}: {e} (run scripts/setup/base.sh, which installs tritonclient)", python.display())
    });
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "client checks failed:\n{stdout}\n{stderr}");
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    let passed = report["passed"].as_array().unwrap().len();
    // Over each protocol: health, readiness, metadata of each case, the SLO, errors,
    // queue full, deadline, repository; inference three ways per case; metrics once.
    let cases = plan["cases"].as_array().unwrap().len();
    assert_eq!(passed, 2 * (2 + cases + 5) + 3 * cases + 1, "checks missing:\n{stdout}");

    tokio.block_on(server.shutdown());
}

#[test]
fn shutdown_stops_accepting_and_answers_what_is_under_way() {
    let runtime = Arc::new(Runtime::builder().build().unwrap());
    slow_model(&runtime);
    let tokio = tokio::runtime::Runtime::new().unwrap();
    tokio.block_on(async {
        let server = runtime.clone().serve(&ServerConfig::loopback()).await.unwrap();
        let url = format!("http://{}", server.grpc_address());
        let mut client = GrpcInferenceServiceClient::connect(url.clone()).await.unwrap();
        assert!(client.server_ready(ServerReadyRequest {}).await.unwrap().into_inner().ready);
        let request = ModelInferRequest {
            model_name: "slow".into(),
            inputs: vec![InferInputTensor {
                name: "input".into(),
                datatype: "FP32".into(),
                shape: vec![1, 4],
                ..Default::default()
            }],
            raw_input_contents: vec![tensors::to_raw(&Tensor::full([1, 4], 0.25f32)).into()],
            ..Default::default()
        };
        let under_way = tokio::spawn(async move { client.model_infer(request).await });
        tokio::time::sleep(Duration::from_millis(100)).await;
        server.shutdown().await;
        // The worker counts a request served before it sends the answer: counted by the
        // time shutdown returns, it was answered before the server stopped.
        let served = runtime.metrics_text();
        assert!(
            served.lines().any(|l| l.starts_with("modelless_inference_request_success{")
                && l.contains("variant=\"slow\"")
                && l.ends_with(" 1")),
            "shutdown returned before the request under way was answered:\n{served}"
        );
        let answer = under_way.await.unwrap();
        let answer = answer.unwrap_or_else(|status| panic!("the request under way failed: {status}"));
        let output = answer.into_inner();
        assert_eq!(output.model_name, "slow");
        assert_eq!(output.raw_output_contents[0].len(), 16);
        assert!(GrpcInferenceServiceClient::connect(url).await.is_err(), "still accepting after shutdown");
    });
}

#[test]
fn both_endpoints_serve_over_tls_with_the_configured_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let certified = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).unwrap();
    let cert_pem = certified.cert.pem();
    let tls = TlsConfig { cert: dir.path().join("server.crt"), key: dir.path().join("server.key") };
    std::fs::write(&tls.cert, &cert_pem).unwrap();
    std::fs::write(&tls.key, certified.signing_key.serialize_pem()).unwrap();

    let runtime = Arc::new(Runtime::builder().build().unwrap());
    let tokio = tokio::runtime::Runtime::new().unwrap();
    tokio.block_on(async {
        let server = runtime.clone().serve(&ServerConfig::loopback().with_tls(tls)).await.unwrap();

        let client_tls =
            ClientTlsConfig::new().ca_certificate(Certificate::from_pem(&cert_pem)).domain_name("localhost");
        let channel = Endpoint::from_shared(format!("https://{}", server.grpc_address()))
            .unwrap()
            .tls_config(client_tls)
            .unwrap()
            .connect()
            .await
            .unwrap();
        let mut client = GrpcInferenceServiceClient::new(channel);
        assert!(client.server_ready(ServerReadyRequest {}).await.unwrap().into_inner().ready);

        let mut roots = rustls::RootCertStore::empty();
        roots.add(certified.cert.der().clone()).unwrap();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tcp = tokio::net::TcpStream::connect(server.http_address()).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut stream = TlsConnector::from(Arc::new(config)).connect(name, tcp).await.unwrap();
        stream
            .write_all(b"GET /v2/health/ready HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

        // Plain text is not served on a TLS endpoint.
        let plain = format!("http://{}", server.grpc_address());
        let refused = match GrpcInferenceServiceClient::connect(plain).await {
            Ok(mut client) => client.server_ready(ServerReadyRequest {}).await.is_err(),
            Err(_) => true,
        };
        assert!(refused, "a plain-text client was answered");
        server.shutdown().await;
    });
}

/// POSTs `body` to `path` over HTTP/1.1; the status and the body of the answer.
async fn post(address: std::net::SocketAddr, path: &str, body: &str) -> (u16, String) {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, answer.split("\r\n\r\n").nth(1).unwrap_or_default().to_string())
}

/// This process's resident memory, MiB.
fn rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib =
        status.lines().find_map(|l| l.strip_prefix("VmRSS:")).and_then(|v| v.split_whitespace().next()?.parse().ok());
    kib.unwrap_or(0u64) / 1024
}

#[test]
fn the_requests_that_killed_the_server_are_refused_and_it_keeps_serving() {
    let models = models_dir();
    let (_dir, root, _) = repository(&models);
    let mut config = RuntimeConfig::default();
    config.models.push(VariantConfig::plain("m", models.join("mobilenetv2_1.0.onnx")));
    config.models.push(VariantConfig::plain("tiny", models.join("tiny.onnx")));
    let runtime = Arc::new(Runtime::builder().with_config(config).build().unwrap());
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server_config = ServerConfig::loopback()
        .with_model_repository(&root)
        .with_model_control_mode(ModelControlMode::Explicit)
        .with_insecure_model_control();
    let server = tokio.block_on(runtime.clone().serve(&server_config)).unwrap();
    let http = server.http_address();
    let good =
        json!({"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]}).to_string();
    tokio.block_on(async {
        let before = rss_mib();
        let claim = r#"{"inputs":[{"name":"input","shape":[1000000000,3,224,224],"datatype":"FP32","data":[1]}]}"#;
        let (status, body) = post(http, "/v2/models/m/infer", claim).await;
        assert_eq!(status, 413, "{body}");
        assert!(body.contains("max_tensor_elements of 16777216"), "{body}");
        // Within the element limit, beyond the model's batch.
        let rows = r#"{"inputs":[{"name":"input","shape":[9,3,224,224],"datatype":"FP32","data":[1]}]}"#;
        let (status, body) = post(http, "/v2/models/m/infer", rows).await;
        assert_eq!(status, 413, "{body}");
        assert!(body.contains("max_batch_size of 8"), "{body}");

        // The same claim over gRPC, typed and raw.
        let url = format!("http://{}", server.grpc_address());
        let mut client = GrpcInferenceServiceClient::connect(url).await.unwrap();
        for raw in [false, true] {
            let input = InferInputTensor {
                name: "input".into(),
                datatype: "FP32".into(),
                shape: vec![1_000_000_000, 3, 224, 224],
                contents: (!raw).then(|| InferTensorContents { fp32_contents: vec![1.0], ..Default::default() }),
                ..Default::default()
            };
            let raw_input_contents = if raw { vec![vec![0u8; 4].into()] } else { Vec::new() };
            let request = ModelInferRequest {
                model_name: "m".into(),
                inputs: vec![input],
                raw_input_contents,
                ..Default::default()
            };
            let refused = client.model_infer(request).await.unwrap_err();
            assert_eq!(refused.code(), modelless_runtime::kserve::tonic::Code::OutOfRange, "raw {raw}: {refused:?}");
            assert!(refused.message().contains("max_tensor_elements"), "{}", refused.message());
        }

        // A repository override asking for a billion-row batch, or 100 000 instances.
        for (config, bound) in [
            (
                r#"{\"batching\":{\"max_batch_size\":1000000000}}"#,
                "max_batch_size = 1000000000 is over this server's bound of 64",
            ),
            (r#"{\"instances\":100000}"#, "instances = 100000"),
        ] {
            let load = format!(r#"{{"parameters":{{"config":"{config}"}}}}"#);
            let (status, body) = post(http, "/v2/repository/models/tiny/load", &load).await;
            assert_eq!(status, 413, "{body}");
            assert!(body.contains(bound), "{body}");
        }
        let (status, body) = post(http, "/v2/models/tiny/infer", &good).await;
        assert_eq!(status, 200, "the server stopped serving: {body}");
        let grown = rss_mib().saturating_sub(before);
        assert!(grown < 200, "memory grew by {grown} MiB");
    });
    tokio.block_on(server.shutdown());
}

#[test]
fn a_body_refused_unread_tells_the_client_the_connection_closes() {
    let models = models_dir();
    let mut config = RuntimeConfig::default();
    config.models.push(VariantConfig::plain("tiny", models.join("tiny.onnx")));
    let runtime = Arc::new(Runtime::builder().with_config(config).build().unwrap());
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let server = tokio.block_on(runtime.clone().serve(&ServerConfig::loopback().with_max_message_mib(1))).unwrap();
    let http = server.http_address();
    tokio.block_on(async {
        // A keep-alive request announcing a body over the limit, none of which is sent:
        // a pooling client (tritonclient's) would send its next request on this socket.
        let mut stream = tokio::net::TcpStream::connect(http).await.unwrap();
        let head = format!("POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", 2 << 20);
        stream.write_all(head.as_bytes()).await.unwrap();
        let mut answer = String::new();
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut answer)).await;
        assert!(read.is_ok(), "the server kept the connection open: {answer}");
        let (head, body) = answer.split_once("\r\n\r\n").unwrap_or_default();
        assert!(head.starts_with("HTTP/1.1 413"), "{answer}");
        assert!(head.to_ascii_lowercase().contains("\r\nconnection: close"), "{head}");
        assert!(body.contains("max_message_mib"), "{body}");
        let good = json!({"inputs": [{"name": "input", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]});
        let (status, body) = post(http, "/v2/models/tiny/infer", &good.to_string()).await;
        assert_eq!(status, 200, "{body}");
    });
    tokio.block_on(server.shutdown());
}
