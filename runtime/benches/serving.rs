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

mod common;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use modelless_runtime::backend::onnx::{OrtBackend, OrtEnvironmentConfig, OrtSessionConfig, environment};
use modelless_runtime::{BatchingConfig, InferOptions, Inputs, Model, Tensor};
use ort::session::Session;
use ort::value::TensorRef;

const SHAPE: [usize; 4] = [1, 3, 224, 224];
const BATCH_SIZES: [usize; 6] = [1, 2, 4, 8, 16, 32];
const CONCURRENCY: [usize; 3] = [1, 8, 32];
const OPEN_LOOP_LOAD: f64 = 0.8;
/// The sweep runs its batch sizes in turn this many times, so drift spreads over all.
const SWEEP_PASSES: usize = 3;
/// Windows per contender in each round's open loop.
const OPEN_WINDOWS: usize = 5;

/// Latency summary of one contender in one setting.
#[derive(Clone, Copy, Debug, serde::Serialize)]
struct Stats {
    /// Items (images) completed per second.
    throughput: f64,
    p50_ms: f64,
    p99_ms: f64,
    completed: usize,
}

/// Latencies and work of one or more runs; runs of the same setting in different
/// rounds are merged, so slow drifts of the machine's speed hit every contender alike.
#[derive(Clone, Debug, Default)]
struct Sample {
    latencies: Vec<Duration>,
    items: usize,
    elapsed: Duration,
    /// Throughput of the run merged last.
    last_throughput: f64,
}

impl Sample {
    fn merge(&mut self, other: Sample) {
        self.last_throughput = other.items as f64 / other.elapsed.as_secs_f64();
        self.latencies.extend(other.latencies);
        self.items += other.items;
        self.elapsed += other.elapsed;
    }

    fn stats(&self) -> Stats {
        let mut sorted = self.latencies.clone();
        sorted.sort();
        let pct = |p: f64| {
            let i = ((sorted.len() as f64 * p) as usize).min(sorted.len().saturating_sub(1));
            sorted.get(i).map_or(f64::NAN, |d| d.as_secs_f64() * 1e3)
        };
        Stats {
            throughput: self.items as f64 / self.elapsed.as_secs_f64(),
            p50_ms: pct(0.5),
            p99_ms: pct(0.99),
            completed: self.items,
        }
    }
}

struct Plan {
    rounds: usize,
    sweep: Duration,
    raw: Duration,
    closed: Duration,
    open: Duration,
}

/// Everything measured, merged over rounds.
#[derive(Default)]
struct Results {
    sweep: Vec<(usize, Sample)>,
    /// Batch 1, interleaved with concurrency 1 of (b) and (c).
    raw_single: Sample,
    /// (c)'s median latency minus the raw run's, per pair of neighbouring blocks (s).
    single_overhead: Vec<f64>,
    raw_best: Sample,
    /// Per concurrency: (a) at the best batch, (b), (c), measured in turns.
    closed: Vec<(usize, Sample, Sample, Sample)>,
    open_rate: Vec<f64>,
    /// (c)'s p99 over (b)'s, per round.
    open_p99_ratio: Vec<f64>,
    open_naive: Sample,
    open_modelless: Sample,
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let plan = if quick {
        Plan {
            rounds: 2,
            sweep: Duration::from_secs(1),
            raw: Duration::from_secs(1),
            closed: Duration::from_secs(1),
            open: Duration::from_secs(4),
        }
    } else {
        Plan {
            rounds: 5,
            sweep: Duration::from_secs(2),
            raw: Duration::from_secs(2),
            closed: Duration::from_secs(2),
            open: Duration::from_secs(8),
        }
    };
    let model_path = common::models_dir()?.join("mobilenetv2_1.0.onnx");
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let env_config = OrtEnvironmentConfig::default().with_intra_op_threads(cores);
    let env = environment(&env_config)?;
    let image: Vec<f32> = (0..SHAPE.iter().product::<usize>()).map(|i| (i % 255) as f32 / 255.0).collect();
    eprintln!("model {} | {cores} cores, intra-op threads {cores} (shared pool)", model_path.display());

    let mut results = Results::default();
    let mut session = Session::builder(&env)?.commit_from_file(&model_path)?;
    results.sweep = BATCH_SIZES.iter().map(|&b| (b, Sample::default())).collect();
    for pass in 0..SWEEP_PASSES {
        for (batch, sample) in &mut results.sweep {
            sample.merge(raw_loop(&mut session, &image, *batch, plan.sweep / SWEEP_PASSES as u32)?);
            if pass + 1 == SWEEP_PASSES {
                let st = sample.stats();
                eprintln!("(a) raw batch {batch:>2}: {:>7.1} img/s, batch p50 {:.2} ms", st.throughput, st.p50_ms);
            }
        }
    }
    let best_batch = results
        .sweep
        .iter()
        .max_by(|x, y| x.1.stats().throughput.total_cmp(&y.1.stats().throughput))
        .map(|x| x.0)
        .context("empty sweep")?;
    // Modelless gets the same largest batch as the limit it is compared with.
    let batching = BatchingConfig::default().with_max_batch_size(best_batch);
    BatchingConfig::default().with_max_batch_size(best_batch.min(CONCURRENCY[2] / 2));
    let factory = OrtBackend::factory(env_config, model_path.clone(), OrtSessionConfig::default());
    let model = Arc::new(Model::start("mobilenetv2-1.0", factory, 1, batching.clone())?);
    let naive = Arc::new(Mutex::new(session));
    results.closed =
        CONCURRENCY.iter().map(|&n| (n, Sample::default(), Sample::default(), Sample::default())).collect();

    for round in 0..plan.rounds {
        let ([raw, b1, c1], paired) = single_client(&naive, &model, &image, plan.closed)?;
        results.raw_single.merge(raw);
        results.single_overhead.extend(paired);
        for (clients, a, b, c) in &mut results.closed {
            if *clients == 1 {
                b.merge(b1.clone());
                c.merge(c1.clone());
            }
            // The three take turns, each round starting with another, so that each row's
            // ratios compare runs made on the same machine at nearly the same time.
            for turn in 0..3 {
                match (turn + round) % 3 {
                    0 => a.merge({
                        let mut session = naive.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                        raw_loop(&mut session, &image, best_batch, plan.closed)?
                    }),
                    1 if *clients > 1 => b.merge(closed_loop(*clients, plan.closed, &image, naive_call(&naive))),
                    2 if *clients > 1 => c.merge(closed_loop(*clients, plan.closed, &image, modelless_call(&model))),
                    _ => {}
                }
            }
        }
        let round_best = {
            let mut session = naive.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
            raw_loop(&mut session, &image, best_batch, plan.raw)?
        };
        // The offered load follows the machine's speed over this whole round: the mean
        // of its four measurements of (a), not one that may have caught a burst.
        let mut measured = vec![round_best.stats().throughput];
        measured.extend(results.closed.iter().map(|(_, a, ..)| a.last_throughput));
        let rate = measured.iter().sum::<f64>() / measured.len() as f64 * OPEN_LOOP_LOAD;
        results.raw_best.merge(round_best);
        results.open_rate.push(rate);
        // Short alternating windows, each drained before the next, so that (b) and (c)
        // meet the same machine speed and an overloaded moment stays short.
        let window = plan.open / OPEN_WINDOWS as u32;
        let (mut sb, mut sc) = (Sample::default(), Sample::default());
        for w in 0..OPEN_WINDOWS {
            // Both contenders see the same arrivals in a window.
            let seed = (round * OPEN_WINDOWS + w) as u64;
            let order = if (w + round) % 2 == 0 { [false, true] } else { [true, false] };
            for modelless in order {
                if modelless {
                    sc.merge(open_loop(rate, window, seed, &image, modelless_call(&model)));
                } else {
                    sb.merge(open_loop(rate, window, seed, &image, naive_call(&naive)));
                }
            }
        }
        results.open_p99_ratio.push(sc.stats().p99_ms / sb.stats().p99_ms);
        results.open_naive.merge(sb);
        results.open_modelless.merge(sc);
        let (b32, c32) = results.closed.last().map(|(_, _, b, c)| (b.stats(), c.stats())).context("no runs")?;
        eprintln!(
            "round {}/{}: (a) {:.1} img/s | c=32 (b) {:.1} (c) {:.1} img/s | open at {rate:.1}/s p99 (b) {:.1} ms (c) {:.1} ms",
            round + 1,
            plan.rounds,
            results.raw_best.stats().throughput,
            b32.throughput,
            c32.throughput,
            results.open_naive.stats().p99_ms,
            results.open_modelless.stats().p99_ms
        );
    }

    let report = render(&results, best_batch, &batching, cores);
    println!("{report}");
    let out_dir = common::output_dir();
    std::fs::create_dir_all(&out_dir)?;
    std::fs::write(out_dir.join("serving.md"), &report)?;
    std::fs::write(
        out_dir.join("serving.json"),
        serde_json::to_string_pretty(&to_json(&results, best_batch, &batching, cores))?,
    )?;
    eprintln!("written to {}", out_dir.display());
    Ok(())
}

fn to_json(r: &Results, best_batch: usize, batching: &BatchingConfig, cores: usize) -> serde_json::Value {
    serde_json::json!({
        "cores": cores,
        "best_batch": best_batch,
        "modelless_batching": {"max_batch_size": batching.max_batch_size, "max_queue_delay_us": batching.max_queue_delay_us},
        "sweep": r.sweep.iter().map(|(b, s)| serde_json::json!({"batch": b, "stats": s.stats()})).collect::<Vec<_>>(),
        "raw_single": r.raw_single.stats(),
        "single_overhead_s": r.single_overhead,
        "raw_best": r.raw_best.stats(),
        "closed": r.closed.iter().map(|(n, a, b, c)| serde_json::json!({"concurrency": n, "raw_best_batch": a.stats(), "naive": b.stats(), "modelless": c.stats()})).collect::<Vec<_>>(),
        "open": {"rates": r.open_rate, "p99_ratio_per_round": r.open_p99_ratio, "naive": r.open_naive.stats(), "modelless": r.open_modelless.stats()},
    })
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
        let output = model.submit(Inputs::from(input), InferOptions::default())?.wait()?;
        std::hint::black_box(output);
        Ok(())
    })
}

/// Requests per block of the single-client comparison.
const BLOCK: usize = 20;

/// Concurrency 1: a raw single run, (b) and (c) take turns in blocks of [`BLOCK`]
/// requests, so that all three see the same machine. Also returns, per turn, (c)'s
/// block median minus the raw run's: differences of neighbours cancel the drift.
fn single_client(
    naive: &Arc<Mutex<Session>>,
    model: &Arc<Model>,
    image: &[f32],
    duration: Duration,
) -> Result<([Sample; 3], Vec<f64>)> {
    let view = image.to_vec();
    let session = naive.clone();
    let raw: Call = Arc::new(move |_owned| {
        let mut session = session.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
        let outputs = session.run(ort::inputs![TensorRef::from_array_view((SHAPE, &view[..]))?])?;
        std::hint::black_box(outputs[0].try_extract_tensor::<f32>()?.1.to_vec());
        Ok(())
    });
    let calls = [raw, naive_call(naive), modelless_call(model)];
    let mut samples: [Sample; 3] = Default::default();
    let mut paired = Vec::new();
    let start = Instant::now();
    while start.elapsed() < duration * 3 {
        let mut block_medians = [0.0; 3];
        for ((call, sample), median) in calls.iter().zip(&mut samples).zip(&mut block_medians) {
            let block = Instant::now();
            let mut latencies = Vec::with_capacity(BLOCK);
            for _ in 0..BLOCK {
                let owned = image.to_vec();
                let t = Instant::now();
                call(owned)?;
                latencies.push(t.elapsed());
            }
            sample.items += BLOCK;
            sample.elapsed += block.elapsed();
            latencies.sort();
            *median = latencies[BLOCK / 2].as_secs_f64();
            sample.latencies.extend(latencies);
        }
        paired.push(block_medians[2] - block_medians[0]);
    }
    Ok((samples, paired))
}

fn raw_loop(session: &mut Session, image: &[f32], batch: usize, duration: Duration) -> Result<Sample> {
    let data: Vec<f32> = image.iter().copied().cycle().take(image.len() * batch).collect();
    let shape = [batch, SHAPE[1], SHAPE[2], SHAPE[3]];
    let mut run = || -> Result<()> {
        let outputs = session.run(ort::inputs![TensorRef::from_array_view((shape, &data[..]))?])?;
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
    Ok(Sample { latencies, items, elapsed: start.elapsed(), ..Sample::default() })
}

/// `clients` threads each send one request at a time until `duration` is over.
fn closed_loop(clients: usize, duration: Duration, image: &[f32], call: Call) -> Sample {
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
        handles.into_iter().flat_map(|h| h.join().unwrap_or_default()).collect()
    });
    Sample { items: latencies.len(), latencies, elapsed: start.elapsed(), ..Sample::default() }
}

/// Poisson arrivals at `rate` for `duration` (seeded); every request runs on its own thread,
/// and its latency counts from its scheduled arrival.
fn open_loop(rate: f64, duration: Duration, seed: u64, image: &[f32], call: Call) -> Sample {
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let (recorded, image) = (latencies.clone(), image.to_vec());
    common::poisson_arrivals(rate, duration, seed, move |scheduled| {
        if call(image.clone()).is_ok()
            && let Ok(mut l) = recorded.lock()
        {
            l.push(scheduled.elapsed());
        }
    });
    let elapsed = start.elapsed();
    let latencies = std::mem::take(&mut *latencies.lock().unwrap_or_else(|p| p.into_inner()));
    Sample { items: latencies.len(), latencies, elapsed, ..Sample::default() }
}

fn render(r: &Results, best_batch: usize, batching: &BatchingConfig, cores: usize) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let single = r.raw_single.stats();
    let _ = writeln!(s, "## MobileNetV2-1.0, {cores} cores, intra-op threads {cores}\n");
    let _ = writeln!(s, "(a) raw ONNX Runtime loop per batch size (one pass before the rounds):\n");
    let _ = writeln!(s, "| batch | img/s | batch p50 ms | batch p99 ms |\n|---:|---:|---:|---:|");
    for (b, sample) in &r.sweep {
        let st = sample.stats();
        let _ = writeln!(s, "| {b} | {:.1} | {:.2} | {:.2} |", st.throughput, st.p50_ms, st.p99_ms);
    }
    let _ = writeln!(
        s,
        "\nbest batch {best_batch}; modelless runs max_batch_size {}, max_queue_delay_us {}. \
         Figures below merge {} interleaved rounds.\n",
        batching.max_batch_size,
        batching.max_queue_delay_us,
        r.open_rate.len()
    );
    let _ = writeln!(
        s,
        "| concurrency | (a) img/s | (b) img/s | (c) img/s | c/a | c/b | (b) p50 / p99 ms | (c) p50 / p99 ms |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (n, a, b, c) in &r.closed {
        let (limit, b, c) = (a.stats(), b.stats(), c.stats());
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
    if let Some((_, _, _, c1)) = r.closed.iter().find(|(n, ..)| *n == 1) {
        let c1 = c1.stats();
        let mut paired = r.single_overhead.clone();
        paired.sort_by(f64::total_cmp);
        let q = |p: f64| paired.get((paired.len() as f64 * p) as usize).map_or(f64::NAN, |d| d * 1e6);
        let _ = writeln!(
            s,
            "\nconcurrency 1: (c) p50 {:.3} ms vs raw single run p50 {:.3} ms; (c) minus raw, median over {} \
             neighbouring pairs of {BLOCK}-request blocks: {:+.0} µs (quartiles {:+.0} / {:+.0} µs)",
            c1.p50_ms,
            single.p50_ms,
            paired.len(),
            q(0.5),
            q(0.25),
            q(0.75)
        );
    }
    let (ob, oc) = (r.open_naive.stats(), r.open_modelless.stats());
    let mean_rate = r.open_rate.iter().sum::<f64>() / r.open_rate.len().max(1) as f64;
    let mut ratios = r.open_p99_ratio.clone();
    ratios.sort_by(f64::total_cmp);
    let median_ratio = ratios.get(ratios.len() / 2).copied().unwrap_or(f64::NAN);
    let _ = writeln!(
        s,
        "\nopen loop, Poisson at {mean_rate:.1} req/s on average ({:.0} % of (a) in each round): \
         (b) p50 {:.2} ms p99 {:.2} ms | (c) p50 {:.2} ms p99 {:.2} ms | c/b p99 {:.3} \
         (per round: {}; median {median_ratio:.3})",
        OPEN_LOOP_LOAD * 100.0,
        ob.p50_ms,
        ob.p99_ms,
        oc.p50_ms,
        oc.p99_ms,
        oc.p99_ms / ob.p99_ms,
        ratios.iter().map(|x| format!("{x:.3}")).collect::<Vec<_>>().join(", ")
    );
    s
}
