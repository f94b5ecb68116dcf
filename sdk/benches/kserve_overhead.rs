//! What the gRPC endpoint adds to a request, against the same request made in process,
//! on MobileNetV2-1.0 with a 1×3×224×224 FP32 input (602 112 bytes).
//!
//! Run: `make bench-serve` (or `cargo bench -p modelless --features server --bench
//! kserve_overhead`).
//!
//! - Concurrency 1: requests alternate between in process and gRPC over loopback (the
//!   tonic client in this process, HTTP/2 windows as the server sets them), so a machine
//!   whose speed drifts slows both alike. Reported: p50 of each, and the p50 of the
//!   per-pair differences, the latency gRPC adds. The in-process call is timed from
//!   a tensor the caller already holds; the server's copy of the request's bytes into
//!   one counts against gRPC.
//!   The same again with a minimal HTTP/2 client that the calling thread drives
//!   (`minimal_grpc`), which tells the endpoint's share from tonic's client's; with
//!   each of its calls, one carrying the same input over raw TCP (`raw_tcp`), which
//!   tells the machine's share from the protocol stack's.
//! - Where the added time goes, at concurrency 1 too: a round trip that carries the
//!   600 KB input but stops at the model's name (unknown), against one carrying 16
//!   bytes; and a 16-byte request to a fake model that sleeps 4 ms, in process against
//!   gRPC, which shows what waking the endpoint's idle threads after a gap costs.
//! - Concurrency 32: 32 callers loop for a few seconds in process, then over gRPC
//!   (over 4 connections), in short alternating rounds, each way first in half the
//!   pairs. Reported: throughput of each and the ratio per pair of rounds, and their
//!   median.
//!
//! The client shares the machine with the server: its encoding and decoding are
//! counted against gRPC, as on an edge box that runs both. Results go to stdout and
//! `<target>/modelless-bench/kserve.md`.

mod common;
mod minimal_grpc;
mod raw_tcp;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use common::{output_dir, setup_file};
use minimal_grpc::MinimalClient;
use modelless::kserve::ServerConfig;
use modelless::{BatchingConfig, Runtime, Tensor, VariantConfig};
use modelless_runtime::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::{ModelInferRequest, ModelInferResponse};
use modelless_runtime::kserve::tensors;
use modelless_runtime::kserve::tonic;
use modelless_runtime::stats::percentile;
use raw_tcp::RawClient;
use tonic::transport::{Channel, Endpoint};

const MODEL: &str = "mobilenetv2-1.0";
const CONCURRENCY: usize = 32;
const CONNECTIONS: usize = 4;

/// `--quick`: a shorter run.
fn quick() -> bool {
    std::env::args().any(|a| a == "--quick")
}

/// Calls of each kind at concurrency 1.
fn pairs() -> usize {
    if quick() { 100 } else { 300 }
}

/// Rounds each way at concurrency 32, and how long each lasts. Many short rounds, not
/// a few long ones: this machine's speed drifts over seconds, and a pair of rounds
/// close in time sees the same speed. An odd count, so that the median is the middle
/// round rather than the lower of two.
fn rounds() -> (usize, Duration) {
    if quick() { (3, Duration::from_secs(2)) } else { (9, Duration::from_secs(3)) }
}

/// The start of a closed-loop round that is not counted: the first batches run before
/// the queue holds a full batch behind them.
const SETTLE: Duration = Duration::from_millis(250);

fn main() -> Result<()> {
    let model = setup_file("models/mobilenetv2_1.0.onnx")?;
    let batching = BatchingConfig::default().with_max_batch_size(8).with_max_queue_size(256);
    let runtime =
        Arc::new(Runtime::builder().with_model(VariantConfig::plain(MODEL, model).with_batching(batching)).build()?);
    let tokio = tokio::runtime::Runtime::new()?;
    tokio.block_on(async {
        let config = ServerConfig::loopback();
        let server = runtime.clone().serve(&config).await?;
        let channels = connect(server.grpc_address(), &config).await?;
        let image = Tensor::full([1, 3, 224, 224], 0.5f32);
        let request = request(&image);

        eprintln!("warming up ...");
        for _ in 0..20 {
            runtime.infer(MODEL, image.clone()).await?;
            grpc_infer(&channels[0], &request).await?;
        }
        let single = concurrency_one(&runtime, &channels[0], &image, &request).await?;
        let minimal = {
            let (runtime, image, request) = (runtime.clone(), image.clone(), request.clone());
            let (tokio, address) = (tokio::runtime::Handle::current(), server.grpc_address());
            // Its own thread: the client blocks it, as a synchronous client blocks its caller.
            let thread = std::thread::spawn(move || concurrency_one_minimal(&tokio, runtime, address, &image, &request));
            tokio::task::spawn_blocking(move || thread.join()).await?.map_err(|_| anyhow::anyhow!("client panicked"))??
        };
        let parts = decomposition(&runtime, &channels[0], &request).await?;
        let many = concurrency_many(&runtime, &channels, &image, &request).await?;
        server.shutdown().await;

        let report = format!(
            "## gRPC over loopback against in process, {MODEL}, input 1×3×224×224 FP32 (602 112 bytes)\n\n{single}\n{minimal}\n{parts}\n{many}"
        );
        println!("{report}");
        let out = output_dir();
        std::fs::create_dir_all(&out)?;
        std::fs::write(out.join("kserve.md"), &report)?;
        eprintln!("written to {}", out.join("kserve.md").display());
        Ok(())
    })
}

async fn connect(
    address: std::net::SocketAddr,
    config: &ServerConfig,
) -> Result<Vec<GrpcInferenceServiceClient<Channel>>> {
    let mut channels = Vec::new();
    for _ in 0..CONNECTIONS {
        let channel = Endpoint::from_shared(format!("http://{address}"))?
            .initial_stream_window_size(config.http2_stream_window_kib * 1024)
            .initial_connection_window_size(config.http2_connection_window_kib * 1024)
            .tcp_nodelay(true)
            .connect()
            .await
            .context("connecting")?;
        let max = config.max_message_bytes();
        channels.push(
            GrpcInferenceServiceClient::new(channel).max_decoding_message_size(max).max_encoding_message_size(max),
        );
    }
    Ok(channels)
}

fn request(image: &Tensor) -> ModelInferRequest {
    ModelInferRequest {
        model_name: MODEL.into(),
        inputs: vec![InferInputTensor {
            name: "input".into(),
            datatype: "FP32".into(),
            shape: tensors::shape_of(image),
            ..Default::default()
        }],
        raw_input_contents: vec![tensors::to_raw(image).into()],
        ..Default::default()
    }
}

async fn grpc_infer(
    client: &GrpcInferenceServiceClient<Channel>,
    request: &ModelInferRequest,
) -> Result<ModelInferResponse> {
    Ok(client.clone().model_infer(request.clone()).await?.into_inner())
}

/// p50 in µs of `call` run `pairs()` times.
async fn p50_us<Fut: Future<Output = Result<()>>>(mut call: impl FnMut() -> Fut) -> Result<f64> {
    let mut times = Vec::with_capacity(pairs());
    for _ in 0..pairs() {
        let t = Instant::now();
        call().await?;
        times.push(t.elapsed().as_secs_f64() * 1e6);
    }
    Ok(percentile(&mut times, 0.5))
}

async fn decomposition(
    runtime: &Runtime,
    client: &GrpcInferenceServiceClient<Channel>,
    request: &ModelInferRequest,
) -> Result<String> {
    eprintln!("decomposition ...");
    let calls = pairs();
    let unknown = ModelInferRequest { model_name: "unknown".into(), ..request.clone() };
    let small = |model: &str| {
        let mut small = self::request(&Tensor::full([1, 4], 0.5f32));
        small.model_name = model.into();
        small
    };
    let refused = |request: ModelInferRequest| async move {
        let answer = client.clone().model_infer(request).await;
        anyhow::ensure!(answer.is_err_and(|s| s.code() == tonic::Code::NotFound), "expected NOT_FOUND");
        Ok(())
    };
    let big_refused = p50_us(|| refused(unknown.clone())).await?;
    let small_refused = p50_us(|| refused(small("unknown"))).await?;
    let sleep = FakeConfig { per_batch: Duration::from_millis(4), ..FakeConfig::default() };
    runtime.load_backend(
        "sleep-4ms",
        FakeBackend::factory(sleep, BatchLog::default()),
        1,
        BatchingConfig::default(),
    )?;
    let (tiny, sleeper) = (Tensor::full([1, 4], 0.5f32), small("sleep-4ms"));
    let local =
        p50_us(|| async { runtime.infer("sleep-4ms", tiny.clone()).await.map(drop).map_err(Into::into) }).await?;
    let remote = p50_us(|| async { grpc_infer(client, &sleeper).await.map(drop) }).await?;
    Ok(format!(
        "### Where the added time goes (p50 of {calls} calls each)\n\n\
         | call | p50 µs |\n|---|---:|\n\
         | gRPC, 600 KB input, refused at the model name | {big_refused:.0} |\n\
         | gRPC, 16 B input, refused at the model name | {small_refused:.0} |\n\
         | fake model sleeping 4 ms, 16 B, in process | {local:.0} |\n\
         | fake model sleeping 4 ms, 16 B, gRPC | {remote:.0} |\n\n\
         Carrying the 600 KB input costs {:.0} µs; a 4 ms gap in the middle of a call costs gRPC {:.0} µs \
         more than a call without one ({:.0} µs against {small_refused:.0} µs).\n",
        big_refused - small_refused,
        (remote - local) - small_refused,
        remote - local,
    ))
}

async fn concurrency_one(
    runtime: &Runtime,
    client: &GrpcInferenceServiceClient<Channel>,
    image: &Tensor,
    request: &ModelInferRequest,
) -> Result<String> {
    let mut pairs = Pairs::new("tonic's client", "gRPC");
    while pairs.wanted() {
        // The tensor is the caller's before the call, as a request's body is the server's.
        let input = image.clone();
        let t = Instant::now();
        runtime.infer(MODEL, input).await?;
        let local = ms_since(t);
        let t = Instant::now();
        let answer = grpc_infer(client, request).await?;
        pairs.push(local, ms_since(t), answer.raw_output_contents[0].len())?;
    }
    Ok(pairs.report())
}

/// Concurrency 1 again, with the minimal client on this thread, and the in-process
/// call blocking it too; each in-process call is followed by one over gRPC and one
/// over raw TCP, in alternating order.
fn concurrency_one_minimal(
    tokio: &tokio::runtime::Handle,
    runtime: Arc<Runtime>,
    address: std::net::SocketAddr,
    image: &Tensor,
    request: &ModelInferRequest,
) -> Result<String> {
    let raw_address = raw_tcp::serve(tokio.clone(), runtime.clone(), MODEL, &tensors::shape_of(image))?;
    let mut raw = RawClient::connect(raw_address)?;
    let raw_input = &request.raw_input_contents[0];
    let mut client = MinimalClient::connect(address)?;
    for _ in 0..20 {
        client.infer(request)?;
        raw.infer(raw_input)?;
    }
    let mut grpc = Pairs::new("a minimal HTTP/2 client", "gRPC");
    let mut floor = Pairs::new("a blocking client of raw TCP, no protocol", "raw TCP");
    while grpc.wanted() {
        let input = image.clone();
        let t = Instant::now();
        tokio.block_on(runtime.infer(MODEL, input))?;
        let local = ms_since(t);
        let grpc_first = grpc.local_ms.len().is_multiple_of(2);
        for grpc_now in [grpc_first, !grpc_first] {
            if grpc_now {
                let t = Instant::now();
                let answer = client.infer(request)?;
                grpc.push(local, ms_since(t), answer.raw_output_contents[0].len())?;
            } else {
                let t = Instant::now();
                let answer = raw.infer(raw_input)?;
                floor.push(local, ms_since(t), answer.len())?;
            }
        }
    }
    let (grpc_added, floor_added) = (grpc.added_p50(), floor.added_p50());
    Ok(format!(
        "{}\n{}\nThe same input over raw TCP (a blocking thread per side, no protocol) adds \
         {floor_added:.0} µs on this machine at this time, its share; gRPC adds {:.0} µs more.\n",
        grpc.report(),
        floor.report(),
        grpc_added - floor_added
    ))
}

fn ms_since(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

/// Latencies of calls in process and remote ones by `client`, made in alternation.
struct Pairs {
    client: &'static str,
    /// What the remote call went over.
    path: &'static str,
    local_ms: Vec<f64>,
    remote_ms: Vec<f64>,
    added_us: Vec<f64>,
}

impl Pairs {
    fn new(client: &'static str, path: &'static str) -> Self {
        Pairs { client, path, local_ms: Vec::new(), remote_ms: Vec::new(), added_us: Vec::new() }
    }

    fn wanted(&self) -> bool {
        self.local_ms.len() < pairs()
    }

    /// Records a pair; `answer_bytes` is the size of the remote call's output.
    fn push(&mut self, local_ms: f64, remote_ms: f64, answer_bytes: usize) -> Result<()> {
        anyhow::ensure!(answer_bytes == 4000, "an answer of {answer_bytes} bytes");
        self.local_ms.push(local_ms);
        self.remote_ms.push(remote_ms);
        self.added_us.push((remote_ms - local_ms) * 1e3);
        if self.local_ms.len().is_multiple_of(100) {
            eprintln!("concurrency 1, {}: {}/{} pairs", self.client, self.local_ms.len(), pairs());
        }
        Ok(())
    }

    /// p50 of what the remote call added per pair (µs).
    fn added_p50(&self) -> f64 {
        percentile(&mut self.added_us.clone(), 0.5)
    }

    /// p50 of each path (ms), and of what the remote call added per pair (µs).
    fn report(mut self) -> String {
        let (l50, r50) = (percentile(&mut self.local_ms, 0.5), percentile(&mut self.remote_ms, 0.5));
        let (a50, a90) = (percentile(&mut self.added_us, 0.5), percentile(&mut self.added_us, 0.9));
        format!(
            "### Concurrency 1, {} ({} pairs, alternating)\n\n\
             | path | p50 ms |\n|---|---:|\n| in process | {l50:.3} |\n| {} over loopback | {r50:.3} |\n\n\
             Added by {}, per pair: **p50 {a50:.0} µs**, p90 {a90:.0} µs.\n",
            self.client,
            self.local_ms.len(),
            self.path,
            self.path
        )
    }
}

async fn concurrency_many(
    runtime: &Arc<Runtime>,
    channels: &[GrpcInferenceServiceClient<Channel>],
    image: &Tensor,
    request: &ModelInferRequest,
) -> Result<String> {
    let mut rows = String::new();
    let mut ratios = Vec::new();
    let (rounds, round_time) = rounds();
    for round in 0..rounds {
        let in_process = || {
            let (runtime, image) = (runtime.clone(), image.clone());
            closed_loop(round_time, move || {
                let (runtime, image) = (runtime.clone(), image.clone());
                async move { runtime.infer(MODEL, image).await.is_ok() }
            })
        };
        let over_grpc = || {
            let (channels, request) = (channels.to_vec(), request.clone());
            closed_loop(round_time, move || {
                let client = channels[next_connection()].clone();
                let request = request.clone();
                async move { grpc_infer(&client, &request).await.is_ok() }
            })
        };
        // Each way goes first in half the pairs, so neither always follows the other.
        let (local, remote) = if round % 2 == 0 {
            let local = in_process().await;
            (local, over_grpc().await)
        } else {
            let remote = over_grpc().await;
            (in_process().await, remote)
        };
        let ratio = remote / local;
        eprintln!(
            "concurrency {CONCURRENCY}, round {}/{rounds}: in process {local:.1}/s, gRPC {remote:.1}/s",
            round + 1
        );
        rows.push_str(&format!("| {} | {local:.1} | {remote:.1} | {ratio:.3} |\n", round + 1));
        ratios.push(ratio);
    }
    let median = percentile(&mut ratios, 0.5);
    Ok(format!(
        "### Concurrency {CONCURRENCY} ({rounds} rounds of {} s each way, gRPC over {CONNECTIONS} connections)\n\n\
         | round | in process req/s | gRPC req/s | ratio |\n|---:|---:|---:|---:|\n{rows}\n\
         Throughput ratio gRPC / in process: **median {median:.3}**.\n",
        round_time.as_secs()
    ))
}

/// A connection for the next request, spreading callers over all of them.
fn next_connection() -> usize {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    (NEXT.fetch_add(1, Ordering::Relaxed) as usize) % CONNECTIONS
}

/// Requests per second answered by `CONCURRENCY` callers looping on `call` for `round`,
/// counted after [`SETTLE`].
async fn closed_loop<F, Fut>(round: Duration, call: F) -> f64
where
    F: Fn() -> Fut + Send + Sync + 'static,
    Fut: Future<Output = bool> + Send + 'static,
{
    let call = Arc::new(call);
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let callers: Vec<_> = (0..CONCURRENCY)
        .map(|_| {
            let (call, stop, done) = (call.clone(), stop.clone(), done.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    // Answers that come after the end of the round are not counted.
                    if call().await && !stop.load(Ordering::Relaxed) {
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    tokio::time::sleep(SETTLE).await;
    let (counted_from, done_before) = (Instant::now(), done.load(Ordering::Relaxed));
    tokio::time::sleep(round.saturating_sub(SETTLE)).await;
    stop.store(true, Ordering::Relaxed);
    let counted = done.load(Ordering::Relaxed) - done_before;
    let elapsed = counted_from.elapsed();
    for caller in callers {
        let _ = caller.await;
    }
    counted as f64 / elapsed.as_secs_f64()
}
