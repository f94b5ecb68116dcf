//! Latency while variants switch: does loading and warming a variant beside one that
//! serves push the serving one's tail up?
//!
//! Run: `make bench-switch` (or `cargo bench -p modelless-runtime --bench switching`;
//! append `-- --quick` for a shorter run). A task serves MobileNetV2-1.0; its other
//! variant costs the same (a second copy of the model), so that the windows compare
//! the cost of switching and nothing else. With the default keep-warm memory a variant
//! switched away from stays loaded and switching back is free; set
//! `MODELLESS_KEEP_WARM_MIB=0` for the worst case, where every switch loads and warms
//! its variant from scratch. The maximal throughput is measured
//! closed loop; then Poisson arrivals at half of it run through windows that take
//! turns: steady ones, and ones with two switches (there and back) and a new version
//! of the first variant loaded. The figure is the p99 of the switching windows over
//! that of the steady ones. Results go to stdout and to
//! `<target>/modelless-bench/switching.{md,json,svg}`.

mod common;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use modelless_runtime::backend::onnx::{OrtBackend, OrtEnvironmentConfig, environment};
use modelless_runtime::{
    BatchingConfig, Inputs, MakeBackend, Slo, Task, TaskConfig, Tensor, VariantConfig, WarmupConfig,
};

const SHAPE: [usize; 4] = [1, 3, 224, 224];
const LOAD: f64 = 0.5;

/// One answered request.
#[derive(Clone, Debug, serde::Serialize)]
struct Record {
    /// Scheduled arrival, seconds from the start of the run.
    at: f64,
    latency_ms: f64,
    variant: String,
    version: u64,
    switching_window: bool,
    /// Steady and switching windows come in pairs; this is the pair.
    pair: usize,
}

/// A control action in a switching window, at an offset into it.
#[derive(Clone, Copy)]
enum Action {
    Switch(&'static str),
    NewVersion,
}

fn main() -> Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (window, pairs) = if quick { (Duration::from_secs(6), 2) } else { (Duration::from_secs(8), 10) };
    let models = common::models_dir()?;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    let env_config = OrtEnvironmentConfig::default().with_intra_op_threads(cores);
    environment(&env_config)?;
    let make: MakeBackend = Arc::new(move |variant, path| {
        OrtBackend::factory(env_config.clone(), path.to_path_buf(), variant.onnx.clone())
    });
    let warmup = warmup_from_env();
    let variant = |name: &str, file: &str, accuracy| {
        VariantConfig::new(name, models.join(file), accuracy)
            .with_batching(BatchingConfig::default().with_max_batch_size(8))
            .with_warmup(warmup.clone())
    };
    let config = TaskConfig::new("classify")
        .with_variant(variant("mobilenetv2-1.0", "mobilenetv2_1.0.onnx", 71.8))
        .with_variant(variant("mobilenetv2-1.0-twin", "mobilenetv2_1.0.onnx", 71.8));
    let keep_warm = std::env::var("MODELLESS_KEEP_WARM_MIB").ok().and_then(|v| v.parse().ok());
    let config = match keep_warm {
        Some(mib) => config.with_keep_warm_mib(mib),
        None => config,
    };
    let keep_warm_mib = config.keep_warm_mib;
    let task = Arc::new(Task::start(config, make)?);
    let image: Vec<f32> = (0..SHAPE.iter().product::<usize>()).map(|i| (i % 251) as f32 / 251.0).collect();

    let max = max_throughput(&task, &image, Duration::from_secs(if quick { 2 } else { 4 }))?;
    let rate = max * LOAD;
    eprintln!("mobilenetv2-1.0 through the task: {max:.1} req/s closed loop; offering {rate:.1} req/s");

    let version_dir = tempfile::tempdir()?;
    let version_file = version_dir.path().join("switching.onnx");
    std::fs::copy(models.join("mobilenetv2_1.0.onnx"), &version_file)?;
    let plan = [
        (0.2, Action::Switch("mobilenetv2-1.0-twin")),
        (0.5, Action::Switch("mobilenetv2-1.0")),
        (0.75, Action::NewVersion),
    ];
    let records = Arc::new(Mutex::new(Vec::new()));
    let mut events = Vec::new();
    let start = Instant::now();
    for round in 0..pairs * 2 {
        let switching = round % 2 == 1;
        let window_start = Instant::now();
        let control = switching.then(|| {
            let (task, version_file) = (task.clone(), version_file.clone());
            std::thread::spawn(move || run_plan(&task, &plan, window, window_start, start, &version_file))
        });
        let stamp = Stamp { start, switching, pair: round / 2 };
        open_loop(&task, rate, window, round as u64, &image, stamp, &records);
        if let Some(control) = control {
            events.extend(control.join().map_err(|_| anyhow::anyhow!("control thread panicked"))??);
        }
        let done = records.lock().map(|r| r.len()).unwrap_or(0);
        eprintln!("window {}/{} ({}) done, {done} requests so far", round + 1, pairs * 2, kind(switching));
    }
    let records = std::mem::take(&mut *records.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
    let failed = records.iter().filter(|r| r.latency_ms.is_nan()).count();

    let report = render(&records, &events, max, rate, window, cores, failed, keep_warm_mib);
    println!("{report}");
    let out = common::output_dir();
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("switching.md"), &report)?;
    std::fs::write(out.join("switching.svg"), plot(&records, &events))?;
    let json = serde_json::json!({"max_throughput": max, "rate": rate, "events": events, "records": records});
    std::fs::write(out.join("switching.json"), serde_json::to_string(&json)?)?;
    eprintln!("written to {}", out.display());
    if failed > 0 {
        bail!("{failed} requests failed");
    }
    Ok(())
}

/// `MODELLESS_WARMUP`: `none`, or batch sizes like `8,1`; unset for the default.
fn warmup_from_env() -> WarmupConfig {
    match std::env::var("MODELLESS_WARMUP").ok().as_deref() {
        None => WarmupConfig::default(),
        Some("none") => WarmupConfig::disabled(),
        Some(sizes) => WarmupConfig::default()
            .with_batch_sizes(sizes.split(',').filter_map(|s| s.trim().parse().ok()).collect::<Vec<usize>>()),
    }
}

fn kind(switching: bool) -> &'static str {
    if switching { "switching" } else { "steady" }
}

/// Closed loop with 16 clients; answers per second.
fn max_throughput(task: &Arc<Task>, image: &[f32], duration: Duration) -> Result<f64> {
    let run = |d: Duration| -> Result<f64> {
        let start = Instant::now();
        let served: usize = std::thread::scope(|s| {
            let clients: Vec<_> = (0..16)
                .map(|_| {
                    s.spawn(|| {
                        let mut n = 0;
                        while start.elapsed() < d {
                            let input = Tensor::new(SHAPE, image.to_vec()).ok();
                            let answer =
                                input.map(|t| task.submit(Inputs::from(t), &Slo::default()).and_then(|t| t.wait()));
                            n += usize::from(matches!(answer, Some(Ok(_))));
                        }
                        n
                    })
                })
                .collect();
            clients.into_iter().map(|c| c.join().unwrap_or(0)).sum()
        });
        Ok(served as f64 / start.elapsed().as_secs_f64())
    };
    run(Duration::from_secs(1))?; // warm the path
    run(duration)
}

/// Carries out a switching window's plan; returns (seconds since start, description).
fn run_plan(
    task: &Task,
    plan: &[(f64, Action)],
    window: Duration,
    window_start: Instant,
    start: Instant,
    version_file: &Path,
) -> Result<Vec<(f64, String)>> {
    let mut events = Vec::new();
    for &(offset, action) in plan {
        let at = window_start + window.mul_f64(offset);
        if let Some(wait) = at.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        let begun = start.elapsed().as_secs_f64();
        let what = match action {
            Action::Switch(variant) => {
                let report = task.switch_to(variant)?;
                format!(
                    "switch to {variant}: {:.0} ms (warm-up {:.0} ms)",
                    ms(report.took),
                    report.warmup.map_or(0.0, ms)
                )
            }
            Action::NewVersion => {
                let t = Instant::now();
                let version = task.load_version("mobilenetv2-1.0", version_file)?;
                format!("mobilenetv2-1.0 version {version}: {:.0} ms", ms(t.elapsed()))
            }
        };
        eprintln!("  {begun:7.2} s  {what}");
        events.push((begun, what));
    }
    Ok(events)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// What each record of a window says about where it was taken.
#[derive(Clone, Copy)]
struct Stamp {
    start: Instant,
    switching: bool,
    pair: usize,
}

/// One window of Poisson arrivals; each answer is recorded with the window's stamp.
fn open_loop(
    task: &Arc<Task>,
    rate: f64,
    window: Duration,
    seed: u64,
    image: &[f32],
    stamp: Stamp,
    records: &Arc<Mutex<Vec<Record>>>,
) {
    let (task, records, image) = (task.clone(), records.clone(), image.to_vec());
    common::poisson_arrivals(rate, window, seed, move |scheduled| {
        let answer = Tensor::new(SHAPE, image.clone())
            .map_err(|e| modelless_runtime::Error::InvalidInput { model: "bench".into(), reason: e.to_string() })
            .and_then(|t| task.submit(Inputs::from(t), &Slo::default()))
            .and_then(|ticket| ticket.wait());
        let (latency_ms, variant, version) = match answer {
            Ok(out) => (ms(scheduled.elapsed()), out.model.to_string(), out.version),
            Err(e) => (f64::NAN, e.to_string(), 0),
        };
        let record = Record {
            at: scheduled.duration_since(stamp.start).as_secs_f64(),
            latency_ms,
            variant,
            version,
            switching_window: stamp.switching,
            pair: stamp.pair,
        };
        if let Ok(mut r) = records.lock() {
            r.push(record);
        }
    });
}

fn percentile(latencies: &mut [f64], p: f64) -> f64 {
    latencies.sort_by(f64::total_cmp);
    let i = ((latencies.len() as f64 * p) as usize).min(latencies.len().saturating_sub(1));
    latencies.get(i).copied().unwrap_or(f64::NAN)
}

#[allow(clippy::too_many_arguments)]
fn render(
    records: &[Record],
    events: &[(f64, String)],
    max: f64,
    rate: f64,
    window: Duration,
    cores: usize,
    failed: usize,
    keep_warm_mib: u64,
) -> String {
    use std::fmt::Write;
    let latencies = |switching: bool| -> Vec<f64> {
        records
            .iter()
            .filter(|r| r.switching_window == switching && !r.latency_ms.is_nan())
            .map(|r| r.latency_ms)
            .collect()
    };
    let (mut steady, mut switching) = (latencies(false), latencies(true));
    let (s50, s99, smax) = (percentile(&mut steady, 0.5), percentile(&mut steady, 0.99), percentile(&mut steady, 1.0));
    let (w50, w99, wmax) =
        (percentile(&mut switching, 0.5), percentile(&mut switching, 0.99), percentile(&mut switching, 1.0));
    let mut s = String::new();
    let _ = writeln!(s, "## Switching under load, {cores} cores\n");
    let _ = writeln!(
        s,
        "closed-loop maximum {max:.1} req/s (mobilenetv2-1.0, max_batch_size 8); Poisson load {rate:.1} req/s; \
         windows of {:.0} s; keep-warm memory {keep_warm_mib} MiB{}\n",
        window.as_secs_f64(),
        if keep_warm_mib == 0 { " (every switch loads and warms its variant)" } else { "" }
    );
    let _ = writeln!(s, "| windows | requests | p50 ms | p99 ms | max ms |\n|---|---:|---:|---:|---:|");
    let _ = writeln!(s, "| steady | {} | {s50:.2} | {s99:.2} | {smax:.2} |", steady.len());
    let _ = writeln!(s, "| with switches | {} | {w50:.2} | {w99:.2} | {wmax:.2} |", switching.len());
    let pairs = records.iter().map(|r| r.pair + 1).max().unwrap_or(0);
    let mut ratios: Vec<f64> = (0..pairs)
        .map(|p| {
            let of = |switching: bool| -> Vec<f64> {
                records
                    .iter()
                    .filter(|r| r.pair == p && r.switching_window == switching && !r.latency_ms.is_nan())
                    .map(|r| r.latency_ms)
                    .collect()
            };
            percentile(&mut of(true), 0.99) / percentile(&mut of(false), 0.99)
        })
        .collect();
    let listed = ratios.iter().map(|r| format!("{r:.3}")).collect::<Vec<_>>().join(", ");
    let median = percentile(&mut ratios, 0.5);
    let _ = writeln!(
        s,
        "\np99 ratio (with switches / steady): {:.3} over all windows; per pair of neighbouring windows: \
         {listed} (median {median:.3}); failed requests: {failed}\n",
        w99 / s99
    );
    let _ = writeln!(s, "control actions:");
    for (at, what) in events {
        let _ = writeln!(s, "- {at:7.2} s  {what}");
    }
    s
}

/// Latency over time as an SVG scatter: steady windows grey, switching ones blue,
/// control actions as red lines.
fn plot(records: &[Record], events: &[(f64, String)]) -> String {
    use std::fmt::Write;
    let (w, h, pad) = (1000.0, 400.0, 50.0);
    let t_max = records.iter().map(|r| r.at).fold(1.0, f64::max);
    let mut ok: Vec<f64> = records.iter().map(|r| r.latency_ms).filter(|l| !l.is_nan()).collect();
    let y_max = percentile(&mut ok, 0.999).max(1.0) * 1.1;
    let x = |t: f64| pad + t / t_max * (w - 2.0 * pad);
    let y = |l: f64| h - pad - l.min(y_max) / y_max * (h - 2.0 * pad);
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    let _ = writeln!(s, r#"<line x1="{pad}" y1="{}" x2="{}" y2="{}" stroke="black"/>"#, h - pad, w - pad, h - pad);
    let _ = writeln!(s, r#"<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{}" stroke="black"/>"#, h - pad);
    for (at, what) in events {
        let _ = writeln!(
            s,
            r#"<line x1="{0:.1}" y1="{pad}" x2="{0:.1}" y2="{1}" stroke="red" stroke-width="1"><title>{2}</title></line>"#,
            x(*at),
            h - pad,
            what
        );
    }
    for r in records.iter().filter(|r| !r.latency_ms.is_nan()) {
        let color = if r.switching_window { "#1f77b4" } else { "#999999" };
        let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="1.5" fill="{color}"/>"#, x(r.at), y(r.latency_ms));
    }
    let _ =
        writeln!(s, r#"<text x="{}" y="{}" text-anchor="middle">time (s), 0 to {t_max:.0}</text>"#, w / 2.0, h - 15.0);
    let _ = writeln!(
        s,
        r#"<text x="15" y="{}" transform="rotate(-90 15 {})" text-anchor="middle">latency (ms), 0 to {y_max:.0}</text>"#,
        h / 2.0,
        h / 2.0
    );
    let _ = writeln!(
        s,
        r#"<text x="{pad}" y="30">grey: steady windows · blue: windows with switches · red: switch or new version</text>"#
    );
    s.push_str("</svg>\n");
    s
}
