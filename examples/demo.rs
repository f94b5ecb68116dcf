//! Serve the MobileNetV2 variant family and watch dynamic batching at work.
//!
//! Each variant listed in `.modelless/models/manifest.json` (written by
//! `scripts/setup.sh`) is loaded as its own model, batching up to 8 rows and holding
//! a batch open for at most 2 ms. The demo then sends each variant a burst of
//! concurrent single-image requests and prints, per variant: the published top-1
//! accuracy the manifest records, throughput, latency percentiles, compute per batch
//! and how many batches of each size ran.
//!
//! ```text
//! make demo
//! # or, after `bash scripts/setup.sh`:
//! cargo run --release -p modelless-examples --example demo
//! ```
//!
//! The models are found through `MODELLESS_MODELS` (a folder holding
//! `manifest.json`), else `.modelless/models/` in the working directory or the
//! nearest of its ancestors. Their weights are random, so the logits mean nothing;
//! the point is the serving.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use modelless::{BatchingConfig, ModelConfig, Output, Runtime, Tensor};
use serde::Deserialize;

/// Concurrent clients per burst.
const CLIENTS: usize = 32;
/// Requests each client sends, one after the other.
const REQUESTS_PER_CLIENT: usize = 4;
/// Distinct images the clients draw from.
const IMAGES: usize = 16;
const MAX_BATCH_SIZE: usize = 8;
const MAX_QUEUE_DELAY_US: u64 = 2000;

/// The parts of the generator's manifest this demo reads.
#[derive(Deserialize)]
struct Manifest {
    family: String,
    variants: Vec<Variant>,
}

#[derive(Deserialize)]
struct Variant {
    name: String,
    file: String,
    top1: f64,
}

/// What one burst against one variant measured.
struct Burst {
    requests: usize,
    failed: usize,
    first_error: Option<String>,
    wall: Duration,
    /// Total latency of each answered request, sorted.
    latencies: Vec<Duration>,
    /// Batches run, by size.
    batches: BTreeMap<usize, usize>,
    /// Compute time summed over batches.
    compute: Duration,
}

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("demo: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let models = models_dir()?;
    let manifest: Manifest = serde_json::from_str(
        &std::fs::read_to_string(models.join("manifest.json"))
            .with_context(|| format!("reading {}", models.join("manifest.json").display()))?,
    )
    .context("parsing manifest.json")?;

    let batching =
        BatchingConfig::default().with_max_batch_size(MAX_BATCH_SIZE).with_max_queue_delay_us(MAX_QUEUE_DELAY_US);
    let mut builder = Runtime::builder();
    for variant in &manifest.variants {
        builder = builder.with_model(
            ModelConfig::new(&variant.name, models.join(&variant.file))
                .with_batching(batching.clone())
                .with_instances(1),
        );
    }
    let started = Instant::now();
    let runtime = Arc::new(builder.build().context("loading the models")?);
    eprintln!(
        "loaded {} {} variants in {:.1} s; {CLIENTS} clients x {REQUESTS_PER_CLIENT} requests \
         each, max_batch_size {MAX_BATCH_SIZE}, max_queue_delay {} ms",
        manifest.variants.len(),
        manifest.family,
        started.elapsed().as_secs_f64(),
        MAX_QUEUE_DELAY_US as f64 / 1000.0,
    );

    let images: Vec<Tensor> = (0..IMAGES as u64).map(image).collect::<Result<_, _>>()?;
    let images = Arc::new(images);
    let mut results = Vec::new();
    for variant in &manifest.variants {
        // One request first, so session warm-up is not part of the burst.
        runtime
            .infer(&variant.name, images[0].clone())
            .await
            .with_context(|| format!("warming up {}", variant.name))?;
        let burst = burst(&runtime, &variant.name, &images).await;
        results.push((variant, burst));
    }

    println!(
        "{:<18} {:>6} {:>5} {:>7} {:>7} {:>8} {:>8} {:>12}  batches (size:count)",
        "variant", "top-1", "reqs", "wall", "req/s", "p50", "p99", "compute/batch"
    );
    for (variant, b) in &results {
        let batches: usize = b.batches.values().sum();
        let histogram = b.batches.iter().map(|(size, count)| format!("{size}:{count}")).collect::<Vec<_>>().join(" ");
        println!(
            "{:<18} {:>5.1}% {:>5} {:>5.2} s {:>7.0} {:>5.1} ms {:>5.1} ms {:>9.1} ms  {}{}",
            variant.name,
            variant.top1,
            b.requests,
            b.wall.as_secs_f64(),
            (b.requests - b.failed) as f64 / b.wall.as_secs_f64(),
            ms(percentile(&b.latencies, 0.50)),
            ms(percentile(&b.latencies, 0.99)),
            ms(b.compute) / batches.max(1) as f64,
            histogram,
            if b.failed > 0 { format!("  ({} failed)", b.failed) } else { String::new() },
        );
    }
    println!("(top-1: published ImageNet accuracy, manifest metadata; weights here are random)");

    let failed: usize = results.iter().map(|(_, b)| b.failed).sum();
    if failed > 0 {
        let (variant, first) = results
            .iter()
            .find(|(_, b)| b.failed > 0)
            .map(|(v, b)| (v.name.as_str(), b.first_error.clone().unwrap_or_default()))
            .unwrap_or_default();
        bail!("{failed} request(s) failed; first, on {variant}: {first}");
    }
    Ok(())
}

/// Sends `CLIENTS` concurrent clients of `REQUESTS_PER_CLIENT` requests each to
/// `model`, showing progress on stderr.
async fn burst(runtime: &Arc<Runtime>, model: &str, images: &Arc<Vec<Tensor>>) -> Burst {
    let total = CLIENTS * REQUESTS_PER_CLIENT;
    let done = Arc::new(AtomicUsize::new(0));
    let progress = tokio::spawn(show_progress(model.to_string(), done.clone(), total));

    let started = Instant::now();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|client| {
            let (runtime, images, done, model) = (runtime.clone(), images.clone(), done.clone(), model.to_string());
            tokio::spawn(async move {
                let mut answers = Vec::with_capacity(REQUESTS_PER_CLIENT);
                for i in 0..REQUESTS_PER_CLIENT {
                    let image = images[(client * REQUESTS_PER_CLIENT + i) % images.len()].clone();
                    answers.push(runtime.infer(&model, image).await);
                    done.fetch_add(1, Ordering::Relaxed);
                }
                answers
            })
        })
        .collect();

    let mut answers: Vec<Result<Output, String>> = Vec::with_capacity(total);
    for client in clients {
        match client.await {
            Ok(results) => answers.extend(results.into_iter().map(|r| r.map_err(|e| e.to_string()))),
            Err(panic) => answers.extend((0..REQUESTS_PER_CLIENT).map(|_| Err(format!("client task failed: {panic}")))),
        }
    }
    let wall = started.elapsed();
    progress.abort();
    let _ = progress.await;
    if std::io::stderr().is_terminal() {
        eprint!("\r\x1b[2K");
    } else {
        eprintln!("{model}: {total}/{total}");
    }

    let mut burst = Burst {
        requests: total,
        failed: 0,
        first_error: None,
        wall,
        latencies: Vec::with_capacity(total),
        batches: BTreeMap::new(),
        compute: Duration::ZERO,
    };
    // Every request is one row, so a batch of n rows answered n requests: each
    // answer accounts for 1/n of its batch.
    let mut batch_shares = BTreeMap::<usize, usize>::new();
    for answer in answers {
        match answer {
            Ok(output) => {
                burst.latencies.push(output.timings.total);
                *batch_shares.entry(output.batch_size).or_default() += 1;
                burst.compute += output.timings.compute / output.batch_size.max(1) as u32;
            }
            Err(e) => {
                burst.failed += 1;
                burst.first_error.get_or_insert(e);
            }
        }
    }
    burst.batches = batch_shares.into_iter().map(|(size, answers)| (size, answers.div_ceil(size.max(1)))).collect();
    burst.latencies.sort();
    burst
}

/// Redraws "model: done/total" on stderr while a burst runs (only on a terminal).
async fn show_progress(model: String, done: Arc<AtomicUsize>, total: usize) {
    if !std::io::stderr().is_terminal() {
        return;
    }
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        tick.tick().await;
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "\r{model}: {}/{total}", done.load(Ordering::Relaxed));
        let _ = err.flush();
    }
}

/// A 1×3×224×224 image of pseudo-random pixels in [0, 1), different for each `seed`.
fn image(seed: u64) -> anyhow::Result<Tensor> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let pixels = (0..3 * 224 * 224)
        .map(|_| {
            // xorshift64*: plenty for filler pixels, and no extra dependency.
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect::<Vec<f32>>();
    Ok(Tensor::new([1, 3, 224, 224], pixels)?)
}

/// The folder holding the generated models and their manifest.
fn models_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("MODELLESS_MODELS") {
        let dir = PathBuf::from(dir);
        if !dir.join("manifest.json").is_file() {
            bail!(
                "MODELLESS_MODELS={} holds no manifest.json; run `bash scripts/setup.sh` to \
                 generate the models",
                dir.display()
            );
        }
        return Ok(dir);
    }
    let cwd = std::env::current_dir().context("reading the working directory")?;
    cwd.ancestors()
        .map(|dir| dir.join(".modelless/models"))
        .find(|dir| dir.join("manifest.json").is_file())
        .with_context(|| {
            format!(
                "no .modelless/models/manifest.json in {} or its ancestors; run `bash \
                 scripts/setup.sh` (or `make setup`) from the repository first, or set \
                 MODELLESS_MODELS",
                cwd.display()
            )
        })
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
