//! Switch the variant serving a task every second while clients keep sending requests,
//! and see that no request fails.
//!
//! `examples/classify.toml` declares the task `classify-image` and its five MobileNetV2
//! variants (cheapest first, each with its published top-1 accuracy). Eight clients ask
//! the task, not a model, for answers within 500 ms, for eight seconds; meanwhile the
//! active variant changes once a second. Each switch prints whether the variant had to
//! be loaded and warmed up first (the first time) or was still warm (keep-warm memory);
//! a switch that loads returns once the variant is warm, so the next one may start late.
//! A sample of answers prints which variant and version served them, in what batch. Two
//! requests ask for at least 74% accuracy, which only `mobilenetv2-1.4` has: refused
//! while it is not loaded, served by it once it is, whichever variant is active. At the
//! end: requests and latency percentiles per variant, the failed requests (the example
//! exits non-zero if there are any), and the task's status.
//!
//! ```text
//! # after `bash scripts/setup/base.sh` (or `make setup`):
//! cargo run --release -p modelless-examples --example switch
//! ```

use std::collections::BTreeMap;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use modelless::status::VariantState;
use modelless::{Error, Runtime, RuntimeConfig, Slo, Tensor};

const TASK: &str = "classify-image";
const CLIENTS: usize = 8;
const RUN_FOR: Duration = Duration::from_secs(8);
const LATENCY: Duration = Duration::from_millis(500);
/// At most one answer is printed per this many milliseconds.
const SAMPLE_EVERY_MS: u64 = 200;
/// Made active one after the other, a second apart; `mobilenetv2-1.0` serves first.
const SWITCHES: [&str; 7] = [
    "mobilenetv2-0.5",
    "mobilenetv2-1.4",
    "mobilenetv2-0.35",
    "mobilenetv2-1.0",
    "mobilenetv2-0.75",
    "mobilenetv2-0.35",
    "mobilenetv2-1.4",
];
/// After this switch (to `mobilenetv2-0.35`, `mobilenetv2-1.4` having been loaded by the
/// one before), a request asks for more accuracy than the active variant has.
const ASK_AFTER_SWITCH: usize = 2;

/// What one client saw: (variant, total latency) per answer, and the errors.
type ClientLog = (Vec<(Arc<str>, Duration)>, Vec<String>);

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("switch: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut config = RuntimeConfig::from_file(examples.join("classify.toml"))?;
    if let Some(missing) = config.tasks.iter().flat_map(|t| &t.variants).find(|v| !v.path.is_file()) {
        bail!("{} is missing; run `bash scripts/setup/base.sh` from the repository first", missing.path.display());
    }
    // ONNX Runtime: the library setup installed, whatever the working directory,
    // unless ORT_DYLIB_PATH names another.
    let library = examples.join("../.modelless/onnxruntime/lib/libonnxruntime.so");
    if std::env::var_os("ORT_DYLIB_PATH").is_none() && library.is_file() {
        config.onnxruntime.library_path.get_or_insert(library);
    }

    let started = Instant::now();
    let runtime = Arc::new(Runtime::builder().with_config(config).build().context("starting the runtime")?);
    let status = runtime.task_status(TASK)?;
    println!("task {TASK}: {} serving, ready in {:.2} s", status.active, started.elapsed().as_secs_f64());
    let image = Tensor::full([1, 3, 224, 224], 0.5f32);
    ask_for_accuracy(&runtime, &image).await?;

    println!("\n{CLIENTS} clients, latency target {} ms, for {} s:", LATENCY.as_millis(), RUN_FOR.as_secs());
    let t0 = Instant::now();
    let next_sample = Arc::new(AtomicU64::new(0));
    let clients: Vec<_> =
        (0..CLIENTS).map(|_| tokio::spawn(client(runtime.clone(), image.clone(), t0, next_sample.clone()))).collect();

    for (i, &variant) in SWITCHES.iter().enumerate() {
        tokio::time::sleep_until((t0 + Duration::from_secs(i as u64 + 1)).into()).await;
        let switcher = runtime.clone();
        // A switch blocks while the variant loads and warms up: keep it off the executor.
        let report = tokio::task::spawn_blocking(move || switcher.switch_variant(TASK, variant)).await??;
        let how = match report.warmup {
            _ if !report.loaded => "was still warm".to_string(),
            Some(warmup) => format!("loaded, warm-up {:.0} ms", ms(warmup)),
            None => "loaded".to_string(),
        };
        println!(
            "  t={:.2}s  ==> switched to {variant}: {how}, took {:.3} ms",
            t0.elapsed().as_secs_f64(),
            ms(report.took)
        );
        if i == ASK_AFTER_SWITCH {
            ask_for_accuracy(&runtime, &image).await?;
        }
    }

    let mut served: BTreeMap<Arc<str>, Vec<Duration>> = BTreeMap::new();
    let mut errors = Vec::new();
    for client in clients {
        let (answers, failed) = client.await?;
        answers.into_iter().for_each(|(variant, total)| served.entry(variant).or_default().push(total));
        errors.extend(failed);
    }

    let status = runtime.task_status(TASK)?;
    println!("\n{:<18} {:>6} {:>8} {:>9} {:>9}", "variant", "top-1", "served", "p50", "p99");
    for variant in &status.variants {
        let mut latencies = served.remove(variant.name.as_str()).unwrap_or_default();
        latencies.sort();
        println!(
            "{:<18} {:>5.1}% {:>8} {:>6.1} ms {:>6.1} ms",
            variant.name,
            variant.accuracy,
            latencies.len(),
            ms(percentile(&latencies, 0.50)),
            ms(percentile(&latencies, 0.99)),
        );
    }
    println!("failed requests: {}", errors.len());

    println!("\ntask {}: active {} v{}", status.name, status.active, status.active_version);
    println!("  {:<18} {:<9} versions (state, warm-up, estimated memory)", "variant", "state");
    for variant in &status.variants {
        let versions = variant.versions.iter().map(|v| {
            let warmup = v.warmup.map_or(String::new(), |w| format!(", warm-up {:.0} ms", ms(w)));
            let error = v.error.as_deref().map_or(String::new(), |e| format!(", error: {e}"));
            let memory = v.memory_bytes as f64 / (1 << 20) as f64;
            format!("v{} ({}{warmup}, {memory:.0} MiB{error})", v.version, lowercase(v.state))
        });
        let versions = versions.collect::<Vec<_>>().join("; ");
        println!("  {:<18} {:<9} {versions}", variant.name, lowercase(variant.state()));
    }

    if let Some(first) = errors.first() {
        bail!("{} request(s) failed; the first: {first}", errors.len());
    }
    Ok(())
}

/// Sends requests one after the other until `RUN_FOR` has passed since `t0`, printing
/// an answer now and then (whichever client gets one first after `next_sample`).
async fn client(runtime: Arc<Runtime>, image: Tensor, t0: Instant, next_sample: Arc<AtomicU64>) -> ClientLog {
    let (mut answers, mut errors) = (Vec::new(), Vec::new());
    while t0.elapsed() < RUN_FOR {
        match runtime.infer_task(TASK, image.clone(), Slo::default().with_latency(LATENCY)).await {
            Ok(output) => {
                let now_ms = t0.elapsed().as_millis() as u64;
                let due = next_sample.load(Ordering::Relaxed);
                if now_ms >= due
                    && next_sample
                        .compare_exchange(due, now_ms + SAMPLE_EVERY_MS, Ordering::Relaxed, Ordering::Relaxed)
                        .is_ok()
                {
                    println!(
                        "  t={:.2}s  {} v{}  batch {}  total {:.1} ms",
                        now_ms as f64 / 1000.0,
                        output.model,
                        output.version,
                        output.batch_size,
                        ms(output.timings.total)
                    );
                }
                answers.push((output.model, output.timings.total));
            }
            Err(e) => errors.push(e.to_string()),
        }
    }
    (answers, errors)
}

/// Asks for 74% accuracy, more than the active variant has: the runtime picks the
/// cheapest ready variant that has it, or refuses if none is loaded.
async fn ask_for_accuracy(runtime: &Runtime, image: &Tensor) -> anyhow::Result<()> {
    let slo = Slo::default().with_latency(LATENCY).with_min_accuracy(74.0);
    let active = runtime.task_status(TASK)?.active;
    match runtime.infer_task(TASK, image.clone(), slo).await {
        Ok(output) => println!("  min_accuracy 74.0 while {active} is active: served by {}", output.model),
        Err(e @ Error::NoVariantMeetsSlo { .. }) => println!(
            "  min_accuracy 74.0 while {active} is active: refused, as expected before \
             mobilenetv2-1.4 (75.0%) is loaded:\n    {e}"
        ),
        Err(e) => return Err(e.into()),
    }
    Ok(())
}

fn percentile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() as f64 * q).ceil() as usize).clamp(1, sorted.len()) - 1]
}

fn lowercase(state: VariantState) -> String {
    format!("{state:?}").to_lowercase()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
