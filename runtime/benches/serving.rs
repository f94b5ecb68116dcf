//! Serving benchmark on MobileNetV2-1.0: modelless against ONNX Runtime used by hand.
//!
//! Run: `make bench` (or `cargo bench -p modelless-runtime --bench serving`;
//! append `-- --quick` for a shorter run). All three contenders share one ONNX Runtime
//! environment and so the same thread settings:
//! - (a) raw: one thread runs the session in a loop at each batch size; the best
//!   batch's throughput is the limit;
//! - (b) naive: each client calls the session itself, one request per run, behind a mutex;
//! - (c) modelless: clients submit single requests; dynamic batching forms the batches.
//!
//! Closed loop at concurrency 1, 8 and 32, then an open loop (Poisson arrivals) at 80 %
//! of (a)'s limit offered to (b) and (c). The table goes to stdout, and with the raw
//! figures to `<target>/modelless-bench/serving.{md,json}`.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use modelless_runtime::backend::onnx::{
    OrtBackend, OrtEnvironmentConfig, OrtSessionConfig, environment,
};
use modelless_runtime::{BatchingConfig, Inputs, Model, Tensor};
use ort::session::Session;
use ort::value::TensorRef;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};

const SHAPE: [usize; 4] = [1, 3, 224, 224];
const BATCH_SIZES: [usize; 6] = [1, 2, 4, 8, 16, 32];
const CONCURRENCY: [usize; 3] = [1, 8, 32];
const OPEN_LOOP_LOAD: f64 = 0.8;

/// Latency summary of one run.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Stats {
    /// Items (images) completed per second.
    throughput: f64,
    p50_ms: f64,
    p99_ms: f64,
    completed: usize,
}

impl Stats {
    fn new(mut latencies: Vec<Duration>, items: usize, elapsed: Duration) -> Stats {
        latencies.sort();
        let pct = |p: f64| {
            latencies
                .get(((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1)))
                .map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
        };
        Stats {
            throughput: items as f64 / elapsed.as_secs_f64(),
            p50_ms: pct(0.5),
            p99_ms: pct(0.99),
            completed: items,
        }
    }
}

struct Durations {
    sweep: Duration,
    closed: Duration,
    open: Duration,
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let durations = if quick {
        Durations {
            sweep: Duration::from_secs(1),
            closed: Duration::from_secs(2),
            open: Duration::from_secs(5),
        }
    } else {
        Durations {
            sweep: Duration::from_secs(3),
            closed: Duration::from_secs(5),
            open: Duration::from_secs(20),
        }
    };
    let model_path = find_model("mobilenetv2_1.0.onnx")?;
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let env_config = OrtEnvironmentConfig::default().with_intra_op_threads(cores);
    let env = environment(&env_config)?;
    let image: Vec<f32> = (0..SHAPE.iter().product::<usize>())
        .map(|i| (i % 255) as f32 / 255.0)
        .collect();
    eprintln!(
        "model {} | {cores} cores, intra-op threads {cores} (shared pool)",
        model_path.display()
    );

    // (a) raw loop per batch size.
    let mut session = Session::builder(&env)?.commit_from_file(&model_path)?;
    let mut sweep = Vec::new();
    for batch in BATCH_SIZES {
        let stats = raw_loop(&mut session, &image, batch, durations.sweep)?;
        eprintln!(
            "(a) raw batch {batch:>2}: {:>7.1} img/s, p50 {:.2} ms",
            stats.throughput, stats.p50_ms
        );
        sweep.push((batch, stats));
    }
    let (best_batch, limit) = sweep
        .iter()
        .copied()
        .max_by(|x, y| x.1.throughput.total_cmp(&y.1.throughput))
        .context("empty sweep")?;
    let raw_single = sweep[0].1;

    let naive = Arc::new(Mutex::new(session));
    let batching = BatchingConfig::default().with_max_batch_size(best_batch.min(8));
    let factory = OrtBackend::factory(env_config, model_path.clone(), OrtSessionConfig::default());
    let model = Arc::new(Model::start(
        "mobilenetv2-1.0",
        factory,
        1,
        batching.clone(),
    )?);

    let mut closed = Vec::new();
    for clients in CONCURRENCY {
        let b = closed_loop(clients, durations.closed, &image, naive_call(&naive));
        eprintln!(
            "(b) naive     c={clients:>2}: {:>7.1} img/s, p50 {:.2} ms, p99 {:.2} ms",
            b.throughput, b.p50_ms, b.p99_ms
        );
        let c = closed_loop(clients, durations.closed, &image, modelless_call(&model));
        eprintln!(
            "(c) modelless c={clients:>2}: {:>7.1} img/s, p50 {:.2} ms, p99 {:.2} ms",
            c.throughput, c.p50_ms, c.p99_ms
        );
        closed.push((clients, b, c));
    }

    let rate = limit.throughput * OPEN_LOOP_LOAD;
    eprintln!(
        "open loop: Poisson arrivals at {rate:.1} req/s for {:?} each",
        durations.open
    );
    let open_b = open_loop(rate, durations.open, &image, naive_call(&naive));
    eprintln!(
        "(b) naive     open: p50 {:.2} ms, p99 {:.2} ms",
        open_b.p50_ms, open_b.p99_ms
    );
    let open_c = open_loop(rate, durations.open, &image, modelless_call(&model));
    eprintln!(
        "(c) modelless open: p50 {:.2} ms, p99 {:.2} ms",
        open_c.p50_ms, open_c.p99_ms
    );

    let report = render(
        &sweep, best_batch, &batching, &closed, rate, open_b, open_c, raw_single, cores,
    );
    println!("{report}");
    let out_dir = output_dir();
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(out_dir.join("serving.md"), &report)?;
    let json = serde_json::json!({
        "cores": cores, "best_batch": best_batch, "modelless_batching": batching_json(&batching),
        "sweep": sweep.iter().map(|(b, s)| serde_json::json!({"batch": b, "stats": s})).collect::<Vec<_>>(),
        "closed": closed.iter().map(|(n, b, c)| serde_json::json!({"concurrency": n, "naive": b, "modelless": c})).collect::<Vec<_>>(),
        "open": {"rate": rate, "naive": open_b, "modelless": open_c},
    });
    std::fs::write(
        out_dir.join("serving.json"),
        serde_json::to_string_pretty(&json)?,
    )?;
    eprintln!("written to {}", out_dir.display());
    Ok(())
}

/// One request's worth of work, as each contender does it: takes an owned image (as
/// an application receiving a request has one) and returns when the answer is back.
type Call = Arc<dyn Fn(Vec<f32>) -> Result<()> + Send + Sync>;

fn naive_call(session: &Arc<Mutex<Session>>) -> Call {
    let session = session.clone();
    Arc::new(move |image| {
        let input = ort::value::Tensor::from_array((SHAPE, image))?;
        let mut session = session.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let outputs = session.run(ort::inputs![input])?;
        let (_, logits) = outputs[0].try_extract_tensor::<f32>()?;
        std::hint::black_box(logits.to_vec());
        Ok(())
    })
}

fn modelless_call(model: &Arc<Model>) -> Call {
    let model = model.clone();
    Arc::new(move |image| {
        let input = Tensor::new(SHAPE, image)?;
        let output = model.submit(Inputs::from(input), None)?.wait()?;
        std::hint::black_box(output);
        Ok(())
    })
}

fn raw_loop(
    session: &mut Session,
    image: &[f32],
    batch: usize,
    duration: Duration,
) -> Result<Stats> {
    let data: Vec<f32> = image
        .iter()
        .copied()
        .cycle()
        .take(image.len() * batch)
        .collect();
    let shape = [batch, SHAPE[1], SHAPE[2], SHAPE[3]];
    let mut run = || -> Result<()> {
        let outputs = session.run(ort::inputs![TensorRef::from_array_view((
            shape,
            &data[..]
        ))?])?;
        std::hint::black_box(outputs[0].try_extract_tensor::<f32>()?.1.to_vec());
        Ok(())
    };
    run()?; // the first run of a batch size is a warm-up outlier
    let mut latencies = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration {
        let t = Instant::now();
        run()?;
        latencies.push(t.elapsed());
    }
    let items = latencies.len() * batch;
    Ok(Stats::new(latencies, items, start.elapsed()))
}

/// `clients` threads each send one request at a time until `duration` is over.
fn closed_loop(clients: usize, duration: Duration, image: &[f32], call: Call) -> Stats {
    // Warm the path (and, for modelless, the batch sizes it will form).
    std::thread::scope(|s| {
        for _ in 0..clients {
            s.spawn(|| (0..3).for_each(|_| drop(call(image.to_vec()))));
        }
    });
    let start = Instant::now();
    let latencies: Vec<Duration> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..clients)
            .map(|_| {
                s.spawn(|| {
                    let mut mine = Vec::new();
                    while start.elapsed() < duration {
                        let owned = image.to_vec();
                        let t = Instant::now();
                        if call(owned).is_ok() {
                            mine.push(t.elapsed());
                        }
                    }
                    mine
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    });
    let n = latencies.len();
    Stats::new(latencies, n, start.elapsed())
}

/// Poisson arrivals at `rate` for `duration`; every request runs on its own thread,
/// and its latency counts from its scheduled arrival.
fn open_loop(rate: f64, duration: Duration, image: &[f32], call: Call) -> Stats {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let gaps = Exp::new(rate).unwrap_or_else(|_| unreachable!("rate is positive"));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let mut at = Duration::ZERO;
    let mut threads = Vec::new();
    loop {
        at += Duration::from_secs_f64(gaps.sample(&mut rng));
        if at >= duration {
            break;
        }
        let scheduled = start + at;
        if let Some(wait) = scheduled.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let (call, latencies, owned) = (call.clone(), latencies.clone(), image.to_vec());
        threads.push(std::thread::spawn(move || {
            if call(owned).is_ok()
                && let Ok(mut l) = latencies.lock()
            {
                l.push(scheduled.elapsed());
            }
        }));
    }
    threads.into_iter().for_each(|t| drop(t.join()));
    let elapsed = start.elapsed();
    let latencies = std::mem::take(&mut *latencies.lock().unwrap_or_else(|p| p.into_inner()));
    let n = latencies.len();
    Stats::new(latencies, n, elapsed)
}

#[allow(clippy::too_many_arguments)]
fn render(
    sweep: &[(usize, Stats)],
    best_batch: usize,
    batching: &BatchingConfig,
    closed: &[(usize, Stats, Stats)],
    rate: f64,
    open_b: Stats,
    open_c: Stats,
    raw_single: Stats,
    cores: usize,
) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let limit = sweep
        .iter()
        .find(|(b, _)| *b == best_batch)
        .map(|x| x.1)
        .unwrap_or(raw_single);
    let _ = writeln!(
        s,
        "## MobileNetV2-1.0, {cores} cores, intra-op threads {cores}\n"
    );
    let _ = writeln!(s, "(a) raw ONNX Runtime loop per batch size:\n");
    let _ = writeln!(
        s,
        "| batch | img/s | batch p50 ms | batch p99 ms |\n|---:|---:|---:|---:|"
    );
    for (b, st) in sweep {
        let _ = writeln!(
            s,
            "| {b} | {:.1} | {:.2} | {:.2} |",
            st.throughput, st.p50_ms, st.p99_ms
        );
    }
    let _ = writeln!(
        s,
        "\nbest batch {best_batch}; modelless runs max_batch_size {}, max_queue_delay_us {}\n",
        batching.max_batch_size, batching.max_queue_delay_us
    );
    let _ = writeln!(
        s,
        "| concurrency | (a) img/s | (b) img/s | (c) img/s | c/a | c/b | (b) p50 / p99 ms | (c) p50 / p99 ms |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (n, b, c) in closed {
        let _ = writeln!(
            s,
            "| {n} | {:.1} | {:.1} | {:.1} | {:.3} | {:.3} | {:.2} / {:.2} | {:.2} / {:.2} |",
            limit.throughput,
            b.throughput,
            c.throughput,
            c.throughput / limit.throughput,
            c.throughput / b.throughput,
            b.p50_ms,
            b.p99_ms,
            c.p50_ms,
            c.p99_ms
        );
    }
    if let Some((_, _, c1)) = closed.iter().find(|(n, ..)| *n == 1) {
        let _ = writeln!(
            s,
            "\nconcurrency 1: (c) p50 {:.3} ms vs raw single run p50 {:.3} ms: +{:.0} µs",
            c1.p50_ms,
            raw_single.p50_ms,
            (c1.p50_ms - raw_single.p50_ms) * 1e3
        );
    }
    let _ = writeln!(
        s,
        "\nopen loop, Poisson at {rate:.1} req/s ({:.0} % of (a)): (b) p50 {:.2} ms p99 {:.2} ms | (c) p50 {:.2} ms p99 {:.2} ms | c/b p99 {:.3}",
        OPEN_LOOP_LOAD * 100.0,
        open_b.p50_ms,
        open_b.p99_ms,
        open_c.p50_ms,
        open_c.p99_ms,
        open_c.p99_ms / open_b.p99_ms
    );
    s
}

fn batching_json(b: &BatchingConfig) -> serde_json::Value {
    serde_json::json!({"max_batch_size": b.max_batch_size, "max_queue_delay_us": b.max_queue_delay_us})
}

fn find_model(file: &str) -> Result<PathBuf> {
    let cwd = std::env::current_dir()?;
    cwd.ancestors()
        .map(|d| d.join(".modelless/models").join(file))
        .find(|p| p.is_file())
        .with_context(|| format!("{file} not found under .modelless/models: run scripts/setup.sh"))
}

fn output_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            std::env::current_exe()
                .ok()
                .and_then(|exe| exe.ancestors().nth(3).map(Path::to_path_buf))
        });
    target
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("modelless-bench")
}
