//! A hostile barrage over real sockets against the `modelless serve` binary: every
//! malformed, oversized, slow or abandoned request the server is known to meet, over
//! HTTP/1.1 and gRPC, while well-formed requests keep flowing from other clients.
//! Every good request is answered, every bad one refused with its code, the process
//! lives on, and its peak memory stays flat.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::{InferTensorContents, ModelInferRequest};
use modelless_runtime::kserve::tonic::Code as GrpcCode;
use modelless_runtime::kserve::tonic::transport::Channel;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::task::JoinSet;

use crate::common::models_dir;

/// The server's read timeout: short, so that slow clients are cut off within the test.
const READ_TIMEOUT: Duration = Duration::from_secs(1);
/// The server's message limit.
const MAX_MESSAGE_MIB: usize = 8;
/// Rounds of the barrage: every bad case runs once a round.
const ROUNDS: usize = 3;
/// Longest any one exchange may take before the test calls the server stuck.
const EXCHANGE_LIMIT: Duration = Duration::from_secs(20);
/// How much the server's peak memory may grow under the barrage.
const PEAK_GROWTH_LIMIT_MIB: u64 = 256;

/// `modelless serve` on loopback, stopped when dropped.
pub(crate) struct ServeProcess {
    child: Child,
    pub grpc: SocketAddr,
    pub http: SocketAddr,
    pub log: Arc<Mutex<Vec<String>>>,
}

impl ServeProcess {
    /// Starts it on `config`, with model control on and `root` as the repository.
    fn start(config: &Path, root: &Path) -> ServeProcess {
        let args: [&OsStr; 5] = [
            "--model-control-mode".as_ref(),
            "explicit".as_ref(),
            "--insecure-model-control".as_ref(),
            "--model-repository".as_ref(),
            root.as_ref(),
        ];
        ServeProcess::start_with(config, &args)
    }

    /// Starts it on `config` with `args` besides, on loopback ports of its choosing.
    pub(crate) fn start_with(config: &Path, args: &[&OsStr]) -> ServeProcess {
        let mut child = Command::new(env!("CARGO_BIN_EXE_modelless"))
            .args(["serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0"])
            .arg("--config")
            .arg(config)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("modelless serve does not start: {e}"));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (addresses_tx, addresses) = std::sync::mpsc::channel();
        let stderr = BufReader::new(child.stderr.take().unwrap());
        let kept = log.clone();
        // Reads the log to its end, so that a full pipe never blocks the server.
        std::thread::spawn(move || {
            for line in stderr.lines().map_while(Result::ok) {
                if let Some(addresses) = serving_addresses(&line) {
                    let _ = addresses_tx.send(addresses);
                }
                kept.lock().unwrap().push(line);
            }
        });
        let Ok((grpc, http)) = addresses.recv_timeout(Duration::from_secs(180)) else {
            let _ = child.kill();
            panic!("the server did not start: {:?}", log.lock().unwrap());
        };
        ServeProcess { child, grpc, http, log }
    }

    /// A field of the process's `/proc` status, in MiB (`VmHWM`: peak resident memory).
    fn memory_mib(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap_or_default();
        let kib = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':')?.split_whitespace().next()?.parse().ok());
        kib.unwrap_or(0u64) / 1024
    }

    /// Its threads whose priority was lowered (niceness above 0), by name.
    fn lowered_threads(&self) -> Vec<String> {
        let tasks = std::fs::read_dir(format!("/proc/{}/task", self.child.id())).unwrap();
        tasks
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("stat")).ok())
            .filter_map(|stat| {
                // `pid (name) state …`: the name may hold spaces; niceness is field 19.
                let (name, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
                let nice: i64 = rest.split_whitespace().nth(16)?.parse().ok()?;
                (nice > 0).then(|| format!("{name} (nice {nice})"))
            })
            .collect()
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// Stops it with SIGTERM, as an operator would; kills it if it does not stop.
    pub(crate) fn stop(&mut self) -> bool {
        let _ = Command::new("kill").arg(self.child.id().to_string()).status();
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            if let Ok(Some(status)) = self.child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for ServeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The two addresses of the server's "serving … gRPC on A, HTTP and /metrics on B" line.
fn serving_addresses(line: &str) -> Option<(SocketAddr, SocketAddr)> {
    let grpc = line.split("gRPC on ").nth(1)?.split(',').next()?.trim().parse().ok()?;
    let http = line.split("/metrics on ").nth(1)?.trim().parse().ok()?;
    Some((grpc, http))
}

/// What came back on a raw connection.
#[derive(Debug)]
enum Answer {
    /// An HTTP answer: its status and body.
    Http(u16, String),
    /// The server closed the connection without an answer.
    Closed,
}

/// Sends `request` on a fresh connection and reads whatever comes back until the
/// server closes it (every request says `Connection: close`, and one cut short must
/// be closed by the server's read timeout).
async fn exchange(address: SocketAddr, request: &[u8]) -> Answer {
    let mut stream = TcpStream::connect(address).await.unwrap();
    // A server that refuses early may close before all of it is written.
    let _ = stream.write_all(request).await;
    let mut answer = Vec::new();
    let _ = tokio::time::timeout(EXCHANGE_LIMIT, stream.read_to_end(&mut answer))
        .await
        .unwrap_or_else(|_| panic!("the server neither answered nor closed within {EXCHANGE_LIMIT:?}"));
    let text = String::from_utf8_lossy(&answer);
    match text.get(9..12).and_then(|s| s.parse().ok()) {
        Some(status) if text.starts_with("HTTP/1.1") => {
            Answer::Http(status, text.split("\r\n\r\n").nth(1).unwrap_or_default().to_string())
        }
        _ => Answer::Closed,
    }
}

/// An HTTP/1.1 POST of `body`, with extra header lines.
fn post(path: &str, headers: &str, body: &[u8]) -> Vec<u8> {
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    [head.as_bytes(), body].concat()
}

fn tiny_input(json_data: &str) -> String {
    format!(r#"{{"inputs":[{{"name":"input","shape":[1,4],"datatype":"FP32","data":{json_data}}}]}}"#)
}

/// A bad request over HTTP, and the status that must refuse it (`None`: the server
/// must close the connection, answering or not).
struct HttpCase {
    kind: &'static str,
    request: Vec<u8>,
    /// A slow client, run beside the rest.
    slow: bool,
    expected: Option<u16>,
    /// What the refusal must name.
    names: &'static str,
}

fn http_cases() -> Vec<HttpCase> {
    let infer = |model: &str| format!("/v2/models/{model}/infer");
    let case =
        |kind, request, expected, names| HttpCase { kind, request, slow: false, expected: Some(expected), names };
    let nested =
        format!(r#"{{"inputs":[{{"name":"input","shape":[1,4],"datatype":"FP32","data":{}}}]}}"#, "[".repeat(100_000));
    let binary = |header_length: &str, size: u64| {
        let json = format!(
            r#"{{"inputs":[{{"name":"input","shape":[1,4],"datatype":"FP32","parameters":{{"binary_data_size":{size}}}}}]}}"#
        );
        let length = if header_length.is_empty() { json.len().to_string() } else { header_length.to_string() };
        let body = [json.as_bytes(), &[0u8; 16]].concat();
        post(&infer("tiny"), &format!("Inference-Header-Content-Length: {length}\r\n"), &body)
    };
    let load = |config: &str| {
        let body = serde_json::json!({ "parameters": { "config": config } }).to_string();
        post("/v2/repository/models/tiny/load", "", body.as_bytes())
    };
    let claim = r#"{"inputs":[{"name":"input","shape":[1000000000,3,224,224],"datatype":"FP32","data":[1]}]}"#;
    let rows = r#"{"inputs":[{"name":"input","shape":[9,3,224,224],"datatype":"FP32","data":[1]}]}"#;
    let mut cases = vec![
        case("a billion-row claim (JSON)", post(&infer("m"), "", claim.as_bytes()), 413, "max_tensor_elements"),
        case("rows over max_batch_size", post(&infer("m"), "", rows.as_bytes()), 413, "max_batch_size"),
        case("not JSON", post(&infer("tiny"), "", b"hello"), 400, ""),
        case("empty body", post(&infer("tiny"), "", b""), 400, ""),
        case("no inputs", post(&infer("tiny"), "", b"{}"), 400, "inputs"),
        case(
            "negative dimension",
            post(&infer("tiny"), "", br#"{"inputs":[{"name":"input","shape":[-1,4],"datatype":"FP32","data":[1]}]}"#),
            400,
            "",
        ),
        case("data shorter than the shape", post(&infer("tiny"), "", tiny_input("[1,2]").as_bytes()), 400, ""),
        case(
            "wrong datatype",
            post(&infer("tiny"), "", tiny_input("[1,2,3,4]").replace("FP32", "INT64").as_bytes()),
            400,
            "",
        ),
        case("strings as FP32", post(&infer("tiny"), "", tiny_input(r#"["a","b","c","d"]"#).as_bytes()), 400, ""),
        case("100 000 levels of nesting", post(&infer("tiny"), "", nested.as_bytes()), 400, ""),
        case("binary: header length past the body", binary("99999", 16), 400, ""),
        case("binary: header length not a number", binary("abc", 16), 400, ""),
        case("binary: data size past the body", binary("", 1 << 40), 400, ""),
        case("binary: data size short of the shape", binary("", 4), 400, ""),
        case("unknown model", post(&infer("nope"), "", tiny_input("[1,2,3,4]").as_bytes()), 404, "nope"),
        case(
            "body over max_message_mib",
            format!(
                "POST {} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
                infer("tiny"),
                (MAX_MESSAGE_MIB + 1) << 20
            )
            .into_bytes(),
            413,
            "max_message_mib",
        ),
        case(
            "override: a billion-row batch",
            load(r#"{"batching":{"max_batch_size":1000000000}}"#),
            413,
            "bound of 64",
        ),
        case("override: 100 000 instances", load(r#"{"instances":100000}"#), 413, "instances = 100000"),
        case("override: a path outside the repository", load(r#"{"path":"../outside.onnx"}"#), 403, "outside"),
        case("override: a million-row warm-up batch", load(r#"{"warmup":{"batch_sizes":[1000000]}}"#), 413, "warmup"),
    ];
    // Slow and vanishing clients.
    let partial_headers = format!("POST {} HTTP/1.1\r\nHost: x\r\n", infer("tiny")).into_bytes();
    cases.push(HttpCase {
        kind: "slowloris: headers never end",
        request: partial_headers,
        slow: true,
        expected: None,
        names: "",
    });
    let slow_body = format!("POST {} HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{{\"inputs\"", infer("tiny"));
    cases.push(HttpCase {
        kind: "slow body: stalls mid-body",
        request: slow_body.into_bytes(),
        slow: true,
        expected: Some(408),
        names: "",
    });
    cases
}

/// Runs one HTTP case; what went wrong, if anything.
async fn run_http_case(address: SocketAddr, case: &HttpCase) -> Result<(), String> {
    let answer = exchange(address, &case.request).await;
    match (&answer, case.expected) {
        (Answer::Http(status, body), Some(expected)) if *status == expected && body.contains(case.names) => Ok(()),
        (Answer::Closed | Answer::Http(408, _), None) => Ok(()),
        _ => Err(format!("{}: expected {:?} naming `{}`, got {answer:?}", case.kind, case.expected, case.names)),
    }
}

/// A client that sends half a body and hangs up.
async fn disconnect_mid_body(address: SocketAddr) {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let head = "POST /v2/models/tiny/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n";
    let _ = stream.write_all(head.as_bytes()).await;
    let _ = stream.write_all(&[b'['; 5000]).await;
    drop(stream);
}

/// Bytes that are not HTTP/2 sent to the gRPC port: the server must close the connection.
async fn garbage_on_the_grpc_port(address: SocketAddr, preface: bool) -> Result<(), String> {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let mut bytes = if preface { b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec() } else { Vec::new() };
    // A frame header claiming 16 MiB of an unknown type on stream 1, then noise.
    bytes.extend([0xff, 0xff, 0xff, 0x7f, 0x00, 0x00, 0x00, 0x00, 0x01]);
    bytes.extend((0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    let _ = stream.write_all(&bytes).await;
    let mut answer = Vec::new();
    match tokio::time::timeout(EXCHANGE_LIMIT, stream.read_to_end(&mut answer)).await {
        Ok(_) => Ok(()),
        Err(_) => Err(format!("garbage (preface {preface}): the connection stayed open")),
    }
}

fn grpc_input(shape: Vec<i64>, contents: Option<Vec<f32>>) -> InferInputTensor {
    InferInputTensor {
        name: "input".into(),
        datatype: "FP32".into(),
        shape,
        contents: contents.map(|fp32_contents| InferTensorContents { fp32_contents, ..Default::default() }),
        ..Default::default()
    }
}

/// Bad gRPC requests and the code that must refuse each.
fn grpc_cases() -> Vec<(&'static str, ModelInferRequest, GrpcCode)> {
    let request = |model: &str, input, raw: Vec<Vec<u8>>| ModelInferRequest {
        model_name: model.into(),
        inputs: vec![input],
        raw_input_contents: raw.into_iter().map(Into::into).collect(),
        ..Default::default()
    };
    let huge = vec![1_000_000_000, 3, 224, 224];
    vec![
        (
            "gRPC: a billion-row claim (typed)",
            request("m", grpc_input(huge.clone(), Some(vec![1.0])), vec![]),
            GrpcCode::OutOfRange,
        ),
        (
            "gRPC: a billion-row claim (raw)",
            request("m", grpc_input(huge, None), vec![vec![0; 4]]),
            GrpcCode::OutOfRange,
        ),
        (
            "gRPC: raw contents of the wrong size",
            request("tiny", grpc_input(vec![1, 4], None), vec![vec![0; 3]]),
            GrpcCode::InvalidArgument,
        ),
        (
            "gRPC: typed contents short of the shape",
            request("tiny", grpc_input(vec![2, 4], Some(vec![1.0; 3])), vec![]),
            GrpcCode::InvalidArgument,
        ),
        (
            "gRPC: a negative dimension",
            request("tiny", grpc_input(vec![-1, 4], Some(vec![1.0; 4])), vec![]),
            GrpcCode::InvalidArgument,
        ),
        (
            "gRPC: unknown model",
            request("nope", grpc_input(vec![1, 4], Some(vec![1.0; 4])), vec![]),
            GrpcCode::NotFound,
        ),
        (
            "gRPC: 10 000 empty inputs",
            ModelInferRequest {
                model_name: "tiny".into(),
                inputs: vec![InferInputTensor::default(); 10_000],
                ..Default::default()
            },
            GrpcCode::OutOfRange,
        ),
        (
            "gRPC: a message over max_message_mib",
            request("tiny", grpc_input(vec![1, 4], None), vec![vec![0; (MAX_MESSAGE_MIB + 1) << 20]]),
            GrpcCode::OutOfRange,
        ),
    ]
}

async fn grpc_client(address: SocketAddr) -> GrpcInferenceServiceClient<Channel> {
    GrpcInferenceServiceClient::connect(format!("http://{address}"))
        .await
        .unwrap()
        .max_encoding_message_size(64 << 20)
        .max_decoding_message_size(64 << 20)
}

/// Counts per kind of what the barrage sent, and what went wrong.
#[derive(Default)]
struct Tally {
    sent: std::collections::BTreeMap<&'static str, usize>,
    wrong: Vec<String>,
}

impl Tally {
    fn record(&mut self, kind: &'static str, outcome: Result<(), String>) {
        *self.sent.entry(kind).or_default() += 1;
        if let Err(e) = outcome {
            self.wrong.push(e);
        }
    }
}

/// One good client: a well-formed request to `tiny`, over and over until `done`;
/// answers counted, every failure kept.
async fn good_client(http: SocketAddr, grpc: Option<SocketAddr>, done: Arc<AtomicBool>) -> (usize, Vec<String>) {
    let (mut answered, mut failures) = (0, Vec::new());
    let body = tiny_input("[1,2,3,4]");
    let mut client = match grpc {
        Some(address) => Some(grpc_client(address).await),
        None => None,
    };
    while !done.load(Ordering::Relaxed) {
        let outcome = match client.as_mut() {
            Some(client) => {
                let request = ModelInferRequest {
                    model_name: "tiny".into(),
                    inputs: vec![grpc_input(vec![1, 4], Some(vec![1.0, 2.0, 3.0, 4.0]))],
                    ..Default::default()
                };
                client.model_infer(request).await.map(drop).map_err(|e| format!("gRPC good request: {e:?}"))
            }
            None => match exchange(http, &post("/v2/models/tiny/infer", "", body.as_bytes())).await {
                Answer::Http(200, _) => Ok(()),
                other => Err(format!("HTTP good request: {other:?}")),
            },
        };
        match outcome {
            Ok(()) => answered += 1,
            Err(e) => failures.push(e),
        }
    }
    (answered, failures)
}

/// `modelless_endpoint_refusals` from `/metrics`, by endpoint and code.
async fn refusals_counted(http: SocketAddr) -> std::collections::BTreeMap<(String, String), u64> {
    let Answer::Http(200, text) =
        exchange(http, b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").await
    else {
        panic!("no metrics");
    };
    let label = |line: &str, name: &str| Some(line.split(&format!("{name}=\"")).nth(1)?.split('"').next()?.to_string());
    text.lines()
        .filter(|line| line.starts_with("modelless_endpoint_refusals{"))
        .filter_map(|line| {
            let count = line.rsplit(' ').next()?.parse::<f64>().ok()? as u64;
            Some(((label(line, "endpoint")?, label(line, "code")?), count))
        })
        .collect()
}

#[test]
fn a_hostile_barrage_is_refused_case_by_case_while_good_clients_are_answered() {
    let models = models_dir();
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repository");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::copy(models.join("tiny.onnx"), root.join("tiny.onnx")).unwrap();
    std::fs::copy(models.join("tiny.onnx"), dir.path().join("outside.onnx")).unwrap();
    let config = dir.path().join("serve.toml");
    let text = format!(
        "[[models]]\nname = \"m\"\npath = \"{}\"\n\n[[models]]\nname = \"tiny\"\npath = \"{}\"\n\n\
         [server]\nmax_message_mib = {MAX_MESSAGE_MIB}\nrequest_read_timeout_ms = {}\n",
        models.join("mobilenetv2_1.0.onnx").display(),
        root.join("tiny.onnx").display(),
        READ_TIMEOUT.as_millis()
    );
    std::fs::write(&config, text).unwrap();
    let mut server = ServeProcess::start(&config, &root);
    let (http, grpc) = (server.http, server.grpc);

    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    // Warmed by good traffic first, so the peak measured after is the barrage's own.
    tokio.block_on(async {
        for _ in 0..20 {
            assert!(matches!(
                exchange(http, &post("/v2/models/tiny/infer", "", tiny_input("[1,2,3,4]").as_bytes())).await,
                Answer::Http(200, _)
            ));
        }
    });
    let (peak_before, resident_before) = (server.memory_mib("VmHWM"), server.memory_mib("VmRSS"));
    // Models load at the lowest priority; nothing that serves may keep it (ONNX
    // Runtime's pool threads take the priority of the thread that starts them). A
    // loader thread that handed its session over may still be exiting: it goes.
    let until = Instant::now() + Duration::from_secs(10);
    let mut lowered = server.lowered_threads();
    while !lowered.is_empty() && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(100));
        lowered = server.lowered_threads();
    }
    assert_eq!(lowered, Vec::<String>::new(), "serving threads at a lowered priority");

    let done = Arc::new(AtomicBool::new(false));
    let (tally, good) = tokio.block_on(async {
        let mut good_clients = JoinSet::new();
        for i in 0..4 {
            good_clients.spawn(good_client(http, (i == 3).then_some(grpc), done.clone()));
        }
        let mut tally = Tally::default();
        let mut client = grpc_client(grpc).await;
        for _ in 0..ROUNDS {
            // The slow clients run beside the rest of the barrage, as they would.
            let mut slow = JoinSet::new();
            for case in http_cases() {
                if case.slow {
                    slow.spawn(async move { (case.kind, run_http_case(http, &case).await) });
                } else {
                    let outcome = run_http_case(http, &case).await;
                    tally.record(case.kind, outcome);
                }
            }
            disconnect_mid_body(http).await;
            tally.record("disconnects mid-body", Ok(()));
            for (kind, request, code) in grpc_cases() {
                let outcome = match client.model_infer(request).await {
                    Err(status) if status.code() == code => Ok(()),
                    other => Err(format!("{kind}: expected {code:?}, got {other:?}")),
                };
                tally.record(kind, outcome);
            }
            for preface in [true, false] {
                let kind =
                    if preface { "HTTP/2 preface, then garbage frames" } else { "garbage bytes on the gRPC port" };
                tally.record(kind, garbage_on_the_grpc_port(grpc, preface).await);
            }
            while let Some(joined) = slow.join_next().await {
                let (kind, outcome) = joined.unwrap();
                tally.record(kind, outcome);
            }
        }
        done.store(true, Ordering::Relaxed);
        let mut good = (0, Vec::new());
        while let Some(joined) = good_clients.join_next().await {
            let (answered, failures) = joined.unwrap();
            good.0 += answered;
            good.1.extend(failures);
        }
        (tally, good)
    });
    let (peak_after, resident_after) = (server.memory_mib("VmHWM"), server.memory_mib("VmRSS"));
    let refusals = tokio.block_on(refusals_counted(http));
    let alive = server.alive();
    let still_serves = tokio.block_on(async {
        matches!(
            exchange(http, &post("/v2/models/tiny/infer", "", tiny_input("[1,2,3,4]").as_bytes())).await,
            Answer::Http(200, _)
        )
    });

    let bad: usize = tally.sent.values().sum();
    println!("hostile barrage: {bad} bad requests of {} kinds, {} good requests answered", tally.sent.len(), good.0);
    for (kind, count) in &tally.sent {
        println!("  {count:>3} × {kind}");
    }
    println!(
        "server memory: peak {peak_before} MiB before the barrage, {peak_after} MiB after; resident {resident_before} → {resident_after} MiB"
    );
    assert!(alive, "the server died: {:?}", server.log.lock().unwrap());
    assert!(tally.wrong.is_empty(), "bad requests not refused as they must be:\n{}", tally.wrong.join("\n"));
    assert!(good.1.is_empty(), "good requests failed:\n{}", good.1.join("\n"));
    assert!(good.0 >= 4, "only {} good requests answered", good.0);
    assert!(still_serves, "the server no longer answers");
    // Every refusal reaches the metrics too, by endpoint and code.
    for (endpoint, code) in [
        ("http", "invalid_argument"),
        ("http", "out_of_range"),
        ("http", "deadline_exceeded"),
        ("grpc", "invalid_argument"),
        ("grpc", "out_of_range"),
    ] {
        let counted = refusals.get(&(endpoint.to_string(), code.to_string())).copied().unwrap_or(0);
        assert!(counted >= ROUNDS as u64, "{endpoint} refusals as {code}: {counted} counted; {refusals:?}");
    }
    let grown = peak_after.saturating_sub(peak_before);
    assert!(grown < PEAK_GROWTH_LIMIT_MIB, "peak memory grew by {grown} MiB under the barrage");
    assert!(server.stop(), "the server did not stop cleanly on SIGTERM");
}

/// Explicit model control opens load and unload to whoever reaches the port: without
/// an admin token file, or the operator's `--insecure-model-control`, the server does
/// not start, and says why.
#[test]
fn explicit_model_control_without_a_token_does_not_start() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, "[server]\ndrain_timeout_s = 1\n").unwrap();
    let started = Command::new(env!("CARGO_BIN_EXE_modelless"))
        .args(["serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--model-control-mode", "explicit"])
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&started.stderr);
    assert!(!started.status.success(), "it started: {said}");
    assert!(said.contains("needs admin_token_file") && said.contains("--insecure-model-control"), "{said}");
}
