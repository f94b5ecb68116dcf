//! Reading pages fused against split, as seed 004 (§4.7) measures a two-stage pipeline:
//! `fused` sends each page to one `modelless serve` that runs the whole `read-text`
//! pipeline; `split` sends it to a server that runs only `find-lines` (detection, the
//! lines cut out), puts each line on a Redis stream, and workers take the lines off
//! the stream, send each to a second server's `read-line` (direction, recognition)
//! and put the text on the page's result stream, which the caller reads until every
//! line is back. Closed loops of `--callers` for `--seconds`; prints one JSON line:
//! throughput, latency percentiles, and where a page's time went on average:
//! detection, recognition and, split, the broker (everything outside the two servers'
//! calls: the streams, the waits for a worker, the copies).
//!
//! ```text
//! cargo run --release -p modelless-lab --example read_split -- --fused 127.0.0.1:8001 PAGE...
//! cargo run --release -p modelless-lab --example read_split -- \
//!     --split 127.0.0.1:8101,127.0.0.1:8201 --redis redis://127.0.0.1:6390 PAGE...
//!     [--callers 1] [--seconds 10] [--workers 32]
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bytes::Bytes;
use modelless_lab::pages::{flag, page_files};
use modelless_runtime::kserve::proto::grpc_inference_service_client::GrpcInferenceServiceClient;
use modelless_runtime::kserve::proto::model_infer_request::InferInputTensor;
use modelless_runtime::kserve::proto::model_infer_response::InferOutputTensor;
use modelless_runtime::kserve::proto::{ModelInferRequest, ModelInferResponse};
use modelless_runtime::kserve::tonic::transport::Channel;
use redis::streams::{StreamReadOptions, StreamReadReply};
use redis::{Commands, Value};

/// The stream of lines waiting for a worker, and the group the workers read it in.
const LINES: &str = "read-split:lines";
const GROUP: &str = "read-split:workers";

/// Where one page's time went, µs.
#[derive(Clone, Copy, Debug, Default)]
struct PageTimes {
    total: u64,
    detect: u64,
    recognise: u64,
}

/// A KServe V2 gRPC client whose calls block the calling thread.
#[derive(Clone)]
struct Server {
    client: GrpcInferenceServiceClient<Channel>,
    tokio: tokio::runtime::Handle,
}

impl Server {
    fn connect(address: &str, tokio: &tokio::runtime::Runtime) -> anyhow::Result<Self> {
        let client = tokio
            .block_on(GrpcInferenceServiceClient::connect(format!("http://{address}")))
            .with_context(|| format!("connecting to {address}"))?
            .max_decoding_message_size(64 << 20);
        Ok(Server { client, tokio: tokio.handle().clone() })
    }

    /// `model`'s answer to one encoded image.
    fn infer(&self, model: &str, image: &[u8]) -> anyhow::Result<ModelInferResponse> {
        let mut raw = Vec::with_capacity(4 + image.len());
        raw.extend_from_slice(&(image.len() as u32).to_le_bytes());
        raw.extend_from_slice(image);
        let request = ModelInferRequest {
            model_name: model.into(),
            inputs: vec![InferInputTensor {
                name: "image".into(),
                datatype: "BYTES".into(),
                shape: vec![1],
                ..Default::default()
            }],
            raw_input_contents: vec![raw.into()],
            ..Default::default()
        };
        let mut client = self.client.clone();
        let answer = self.tokio.block_on(client.model_infer(request)).with_context(|| format!("{model} failed"))?;
        Ok(answer.into_inner())
    }
}

/// The runs of BYTES output `name`.
fn bytes_output(answer: &ModelInferResponse, name: &str) -> anyhow::Result<Vec<Bytes>> {
    let index = answer.outputs.iter().position(|o: &InferOutputTensor| o.name == name).context("no such output")?;
    let mut raw = answer.raw_output_contents.get(index).context("no raw output")?.clone();
    let mut runs = Vec::new();
    while raw.len() >= 4 {
        let length = u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]) as usize;
        let _ = raw.split_to(4);
        if raw.len() < length {
            bail!("a BYTES run past the end");
        }
        runs.push(raw.split_to(length));
    }
    Ok(runs)
}

/// An integer parameter of the answer.
fn parameter(answer: &ModelInferResponse, name: &str) -> u64 {
    use modelless_runtime::kserve::proto::infer_parameter::ParameterChoice;
    match answer.parameters.get(name).and_then(|p| p.parameter_choice.as_ref()) {
        Some(ParameterChoice::Int64Param(v)) => (*v).max(0) as u64,
        _ => 0,
    }
}

/// µs since `epoch`.
fn micros(epoch: Instant) -> u64 {
    epoch.elapsed().as_micros() as u64
}

/// One page through the fused server.
fn fused(server: &Server, page: &[u8]) -> anyhow::Result<PageTimes> {
    let sent = Instant::now();
    let answer = server.infer("read-text", page)?;
    let total = sent.elapsed().as_micros() as u64;
    let detect = parameter(&answer, "stage_detect-text_us");
    let recognise = parameter(&answer, "stage_text-direction_us") + parameter(&answer, "stage_recognize-text_us");
    Ok(PageTimes { total, detect, recognise })
}

/// One page through the split: its lines found, passed through Redis, read.
fn split(detect: &Server, redis: &mut redis::Connection, page: &[u8], id: u64) -> anyhow::Result<PageTimes> {
    let sent = Instant::now();
    let found = detect.infer("find-lines", page)?;
    let detect_us = sent.elapsed().as_micros() as u64;
    let lines = bytes_output(&found, "lines")?;
    let results = format!("read-split:page:{id}");
    let page_id = id.to_string();
    for (index, line) in lines.iter().enumerate() {
        let index = index.to_string();
        let fields: [(&str, &[u8]); 3] =
            [("page", page_id.as_bytes()), ("index", index.as_bytes()), ("line", line.as_ref())];
        let _: String = redis.xadd(LINES, "*", &fields)?;
    }
    // The workers' calls to the second server, from the first start to the last end.
    let (mut first_start, mut last_end, mut read) = (u64::MAX, 0u64, 0usize);
    let mut last_id = "0".to_string();
    while read < lines.len() {
        let options = StreamReadOptions::default().block(10_000).count(64);
        let reply: StreamReadReply = redis.xread_options(&[&results], &[&last_id], &options)?;
        let entries: Vec<_> = reply.keys.into_iter().flat_map(|k| k.ids).collect();
        if entries.is_empty() {
            bail!("page {id}: {} of {} lines not read within 10 s", lines.len() - read, lines.len());
        }
        for entry in entries {
            let number = |field: &str| match entry.map.get(field) {
                Some(Value::BulkString(b)) => std::str::from_utf8(b).ok().and_then(|s| s.parse::<u64>().ok()),
                _ => None,
            };
            first_start = first_start.min(number("start_us").unwrap_or(u64::MAX));
            last_end = last_end.max(number("end_us").unwrap_or(0));
            last_id = entry.id;
            read += 1;
        }
    }
    let _: () = redis.del(&results)?;
    let total = sent.elapsed().as_micros() as u64;
    let recognise = if lines.is_empty() { 0 } else { last_end.saturating_sub(first_start) };
    Ok(PageTimes { total, detect: detect_us, recognise })
}

/// A worker: takes lines off the stream, reads each on the second server, puts the
/// text on its page's stream.
fn work(
    read: &Server,
    redis: &mut redis::Connection,
    name: &str,
    epoch: Instant,
    stop: &AtomicBool,
) -> anyhow::Result<()> {
    while !stop.load(Ordering::Relaxed) {
        let options = StreamReadOptions::default().group(GROUP, name).block(200).count(1);
        let reply: StreamReadReply = redis.xread_options(&[LINES], &[">"], &options)?;
        for entry in reply.keys.into_iter().flat_map(|k| k.ids) {
            let field = |name: &str| match entry.map.get(name) {
                Some(Value::BulkString(b)) => Some(b.clone()),
                _ => None,
            };
            let (Some(page), Some(index), Some(line)) = (field("page"), field("index"), field("line")) else {
                bail!("a line entry without page, index or line");
            };
            let start = micros(epoch);
            let answer = read.infer("read-line", &line)?;
            let end = micros(epoch);
            let text = bytes_output(&answer, "text")?.into_iter().next().unwrap_or_default();
            let results = format!("read-split:page:{}", String::from_utf8_lossy(&page));
            let fields: [(&str, Vec<u8>); 4] = [
                ("index", index),
                ("text", text.to_vec()),
                ("start_us", start.to_string().into_bytes()),
                ("end_us", end.to_string().into_bytes()),
            ];
            let _: String = redis.xadd(&results, "*", &fields)?;
            let _: u64 = redis.xack(LINES, GROUP, &[&entry.id])?;
            let _: u64 = redis.xdel(LINES, &[&entry.id])?;
        }
    }
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |name: &str, default: f64| flag(&args, name).map_or(Ok(default), |v| v.parse::<f64>());
    let callers = number("--callers", 1.0)? as usize;
    let seconds = number("--seconds", 10.0)?;
    let workers = number("--workers", 32.0)? as usize;
    let pages = Arc::new(page_files(&args)?);
    let tokio = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let epoch = Instant::now();
    let stop = Arc::new(AtomicBool::new(false));
    let mut helpers = Vec::new();

    // What one caller does with one page.
    type Read = Arc<dyn Fn(&[u8], u64) -> anyhow::Result<PageTimes> + Send + Sync>;
    let (mode, read): (&str, Read) = match (flag(&args, "--fused"), flag(&args, "--split")) {
        (Some(address), None) => {
            let server = Server::connect(&address, &tokio)?;
            ("fused", Arc::new(move |page: &[u8], _| fused(&server, page)))
        }
        (None, Some(addresses)) => {
            let (find, read) = addresses.split_once(',').context("--split FIND,READ")?;
            let (find, read) = (Server::connect(find, &tokio)?, Server::connect(read, &tokio)?);
            let redis = redis::Client::open(flag(&args, "--redis").context("--split needs --redis URL")?)?;
            let mut setup = redis.get_connection()?;
            let _: () = setup.del(LINES)?;
            let _: () = setup.xgroup_create_mkstream(LINES, GROUP, "$")?;
            for w in 0..workers {
                let (read, mut connection, stop) = (read.clone(), redis.get_connection()?, stop.clone());
                helpers.push(std::thread::spawn(move || work(&read, &mut connection, &format!("w{w}"), epoch, &stop)));
            }
            let connections = Arc::new(Mutex::new(Vec::new()));
            let client = redis.clone();
            (
                "split",
                Arc::new(move |page: &[u8], id| {
                    let pooled = connections.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.pop();
                    let mut connection = match pooled {
                        Some(c) => c,
                        None => client.get_connection()?,
                    };
                    let times = split(&find, &mut connection, page, id);
                    connections.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.push(connection);
                    times
                }),
            )
        }
        _ => bail!("either --fused ADDRESS or --split FIND,READ"),
    };

    // One page first: the sessions' first runs are slow.
    read(&pages[0], 0)?;
    let next = Arc::new(AtomicU64::new(1));
    let times: Arc<Mutex<Vec<PageTimes>>> = Arc::default();
    let start = Arc::new(Barrier::new(callers));
    let began: Arc<Mutex<Option<Instant>>> = Arc::default();
    let threads: Vec<_> = (0..callers)
        .map(|_| {
            let (read, pages, next, times) = (read.clone(), pages.clone(), next.clone(), times.clone());
            let (start, began) = (start.clone(), began.clone());
            std::thread::spawn(move || -> anyhow::Result<Instant> {
                if start.wait().is_leader() {
                    began.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.replace(Instant::now());
                }
                let end = Instant::now() + Duration::from_secs_f64(seconds);
                let mut last = Instant::now();
                while Instant::now() < end {
                    let id = next.fetch_add(1, Ordering::Relaxed);
                    let page = &pages[id as usize % pages.len()];
                    let took = read(page, id)?;
                    last = Instant::now();
                    times.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.push(took);
                }
                Ok(last)
            })
        })
        .collect();
    let mut finished = Vec::new();
    for thread in threads {
        finished.push(thread.join().map_err(|_| anyhow::anyhow!("a caller panicked"))??);
    }
    stop.store(true, Ordering::Relaxed);
    for helper in helpers {
        helper.join().map_err(|_| anyhow::anyhow!("a worker panicked"))??;
    }
    let began = began.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.context("no caller started")?;
    let elapsed = finished.iter().max().map_or(0.0, |f| (*f - began).as_secs_f64());
    let times = times.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let mut totals: Vec<f64> = times.iter().map(|t| t.total as f64 / 1e3).collect();
    totals.sort_by(f64::total_cmp);
    let quantile = |q: f64| totals.get(((totals.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
    let mean =
        |f: fn(&PageTimes) -> u64| times.iter().map(|t| f(t) as f64 / 1e3).sum::<f64>() / times.len().max(1) as f64;
    let (total, detect, recognise) = (mean(|t| t.total), mean(|t| t.detect), mean(|t| t.recognise));
    println!(
        "{}",
        serde_json::json!({
            "mode": mode,
            "callers": callers,
            "pages": times.len(),
            "pages_per_s": times.len() as f64 / elapsed.max(1e-9),
            "p50_ms": quantile(0.5),
            "p99_ms": quantile(0.99),
            "mean_ms": total,
            "detect_ms": detect,
            "recognise_ms": recognise,
            "other_ms": (total - detect - recognise).max(0.0),
        })
    );
    Ok(())
}
