//! `modelless profile CONFIG`: profiles on this machine, stored beside the models.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use modelless::backend::Device;
use modelless::backend::onnx::OrtEnvironmentConfig;
use modelless::profile::Profile;
use modelless::{BatchingConfig, RuntimeConfig, VariantConfig, WarmupConfig};
use modelless_runtime::backend::onnx::environment;
use modelless_runtime::profile::{
    Example, ProfileEvent, ProfileOptions, SteadyLoad, SweepEvent, WarmupFeatures, WarmupPredictor, closed_loop,
    fit_latency_line, mape, memory_probe, profile_model, steady_load, store_beside,
};
use modelless_runtime::{Model, StartOptions};

use modelless_lab::load::images::parse_sizes;
use modelless_lab::plot::{Series, scatter_with_lines};
use modelless_runtime::registry::{profiling_factory, variant_profile_key};

use crate::profile_photos::{profile_photos, render_photos};

/// Arguments of `modelless profile`.
#[derive(clap::Args)]
pub struct Args {
    /// The runtime's TOML config; every task variant and model in it is profiled.
    config: PathBuf,
    /// Measure again even where a stored profile matches.
    #[arg(long)]
    force: bool,
    /// Warm runs per batch size, spread over ten passes across the sizes.
    #[arg(long, default_value_t = 30)]
    warm_runs: usize,
    /// Fresh sessions that each run every batch size once, in a random order, for the
    /// warm-up predictor (0 skips them).
    #[arg(long, default_value_t = 3)]
    first_run_sessions: usize,
    /// Seconds of closed loop measuring maximal throughput (0 skips it).
    #[arg(long, default_value_t = 5.0)]
    throughput_secs: f64,
    /// Never run a batch predicted to need more than this many MiB (default: each
    /// variant's `memory_budget_mib`).
    #[arg(long)]
    memory_budget_mib: Option<u64>,
    /// Where the table and the latency plot go.
    #[arg(long, default_value = "profiles")]
    out: PathBuf,
    /// Check the maximal throughput: measure it again, then offer a steady load at 0.9
    /// and 1.1 times it, for this many seconds each, and report whether the queue held.
    #[arg(long, default_value_t = 0.0)]
    verify_secs: f64,
    /// Rounds of the check; a variant agrees when most rounds do.
    #[arg(long, default_value_t = 3)]
    verify_rounds: usize,
    /// Profile every variant on this device (`cpu`, `cuda:N`) instead of its own.
    #[arg(long)]
    device: Option<Device>,
    /// Size classes of the photos each image variant's capacity with whole photos is
    /// measured with (photo-like JPEGs generated at these sizes).
    #[arg(long, default_value = "500x375,3564x2880")]
    image_sizes: String,
    /// Seconds of closed loop per image variant and size class (0 skips them).
    #[arg(long, default_value_t = 5.0)]
    image_secs: f64,
}

/// Fractions of the measured maximal throughput offered by `--verify-secs`: the queue
/// should hold below it and grow above it.
const VERIFY_AT: [f64; 2] = [0.9, 1.1];

/// What is profiled: every task variant, and every plain model as an ONNX variant. Each
/// is measured on its own device, with no fallback: a GPU profile must be measured on
/// the GPU.
type Target = VariantConfig;

pub fn run(args: Args) -> anyhow::Result<()> {
    let mut config = RuntimeConfig::from_file(&args.config)?;
    // Profiles are stored beside the model files: beside the cached blobs of remote ones.
    config.fetch_sources()?;
    let targets: Vec<Target> = targets(&config)
        .into_iter()
        .map(|t| {
            let device = args.device.unwrap_or(t.device);
            t.with_device(device, false)
        })
        .collect();
    anyhow::ensure!(!targets.is_empty(), "{} names no models or variants", args.config.display());
    let env = config.onnxruntime.clone();
    environment(&env)?;
    let bars = MultiProgress::new();
    let mut rows = Vec::new();
    for target in &targets {
        let (profile, reused) = profile_one(target, &env, &args, &bars)?;
        rows.push((target.name.clone(), profile, reused));
    }
    let mut table = render(&rows);
    table.push_str(&warmup_prediction(&rows));
    if args.image_secs > 0.0 {
        let mut config = config.clone();
        if let Some(device) = args.device {
            for variant in config.tasks.iter_mut().flat_map(|t| t.variants.iter_mut()) {
                *variant = variant.clone().with_device(device, false);
            }
        }
        let sizes = parse_sizes(&args.image_sizes)?;
        let photos = profile_photos(&config, &sizes, Duration::from_secs_f64(args.image_secs), args.force)?;
        let by_name: HashMap<String, &Profile> = rows.iter().map(|(name, p, _)| (name.clone(), p)).collect();
        table.push_str(&render_photos(&photos, &by_name));
    }
    if args.verify_secs > 0.0 {
        let each = Duration::from_secs_f64(args.verify_secs);
        table.push_str(&verify(&targets, &rows, &env, each, args.verify_rounds.max(1))?);
    }
    println!("{table}");
    std::fs::create_dir_all(&args.out)?;
    std::fs::write(args.out.join("profiles.md"), &table)?;
    let series: Vec<Series> = rows
        .iter()
        .map(|(name, p, _)| Series {
            name: name.clone(),
            points: p.points.iter().map(|q| (f64::from(q.batch_size), q.warm_p50_ms)).collect(),
            line: p.fit.map(|f| (f.a_ms, f.c_ms)),
        })
        .collect();
    let svg = scatter_with_lines("Warm latency (p50) by batch size, with the fit a·b + c", "batch size", "ms", &series);
    std::fs::write(args.out.join("latency.svg"), svg)?;
    eprintln!("written to {}", args.out.display());
    Ok(())
}

fn targets(config: &RuntimeConfig) -> Vec<Target> {
    let models = config.models.iter().map(|m| VariantConfig {
        onnx: m.onnx.clone(),
        ..VariantConfig::new(&m.name, &m.path, 0.0).with_batching(m.batching.clone())
    });
    models.chain(config.tasks.iter().flat_map(|t| t.variants.iter().cloned())).collect()
}

fn profile_one(
    target: &Target,
    env: &OrtEnvironmentConfig,
    args: &Args,
    bars: &MultiProgress,
) -> anyhow::Result<(Profile, bool)> {
    let max_batch_size = target.batching.max_batch_size;
    let mut options = ProfileOptions::new(max_batch_size);
    options.sweep.warm_runs = args.warm_runs;
    options.sweep.memory_budget_bytes = args.memory_budget_mib.or(target.memory_budget_mib).map(|m| m << 20);
    options.throughput_for = Duration::from_secs_f64(args.throughput_secs);
    options.first_run_sessions = args.first_run_sessions;
    options.force = args.force;
    let key = variant_profile_key(target, &target.path, target.device, env, &options)?;
    let store = store_beside(&target.path);
    let sweep_runs = options.sweep.batch_sizes.len() as u64 * (options.sweep.warm_runs as u64 + 1);
    let first_runs = (options.first_run_sessions * max_batch_size) as u64;
    let total = sweep_runs + first_runs + (options.throughput_for.as_secs_f64() * 10.0) as u64;
    let bar = bars.add(ProgressBar::new(total));
    bar.set_style(
        ProgressStyle::with_template("{prefix:>18} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(target.name.clone());
    let mut reused = false;
    let factory = profiling_factory(target, &target.path, env);
    let probe = memory_probe(target.device);
    let profile =
        profile_model(&target.name, factory, key, &store, &options, probe.as_ref(), &mut |event| match event {
            ProfileEvent::Reused => {
                reused = true;
                bar.set_position(total);
                bar.set_message("stored profile reused");
            }
            ProfileEvent::Sweep(SweepEvent::Ran { batch_size, done, .. }) => {
                bar.set_position(done as u64);
                bar.set_message(format!("batch {batch_size}"));
            }
            ProfileEvent::Sweep(SweepEvent::Measured(_)) => {}
            ProfileEvent::Sweep(SweepEvent::Stopped { batch_size, predicted_bytes }) => {
                bar.println(format!(
                    "{}: batch {batch_size} not run: predicted {} MiB is over the budget",
                    target.name,
                    predicted_bytes >> 20
                ));
            }
            ProfileEvent::FirstRuns { done, .. } => {
                bar.set_position(sweep_runs + done as u64);
                bar.set_message("first runs in fresh sessions");
            }
            ProfileEvent::Throughput { done, .. } => {
                bar.set_position(sweep_runs + first_runs + (done * 10.0) as u64);
                bar.set_message("maximal throughput");
            }
        })?;
    bar.finish_with_message(if reused { "stored profile reused" } else { "measured" });
    Ok((profile, reused))
}

/// Offers steady loads around each measured maximal throughput, in rounds; a table of
/// the results. The machine's speed drifts, so each steady load sits between two closed
/// loops that measure the maximum again, and a round whose three maxima spread by more
/// than 10 % says nothing about a 10 % margin: it is reported, not counted.
fn verify(
    targets: &[Target],
    rows: &[(String, Profile, bool)],
    env: &OrtEnvironmentConfig,
    each: Duration,
    rounds: usize,
) -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut s = format!(
        "\nMaximal throughput checked against steady loads, {rounds} rounds per variant. A round measures the \
         maximum (closed loop at the best batch), offers a steady load at 0.9× it, measures the maximum again, \
         offers 1.1× that, and measures it a third time. It agrees when the queue held at 0.9× and grew at 1.1× \
         (median latency early → late): what a steady load sustains is then within 10 % of the maximum. Rounds \
         whose three maxima spread by more than 10 % (the machine's speed changed) are not counted.\n\n"
    );
    let _ = writeln!(s, "| variant | stored max req/s | round | maxima now | 0.9× | 1.1× | verdict |");
    let _ = writeln!(s, "|---|---:|---:|---|---|---|---|");
    let mut verdicts = Vec::new();
    for (target, (name, profile, _)) in targets.iter().zip(rows) {
        let Some(stored) = profile.max_throughput else { continue };
        let factory = target.backend_factory(env, &target.path);
        let batching = BatchingConfig::default().with_max_batch_size(stored.batch_size as usize);
        let warm = StartOptions { warmup: WarmupConfig::default(), ..StartOptions::default() };
        let model = Model::start_with(name, factory, 1, batching, warm)?;
        let clients = 2 * stored.batch_size as usize;
        let max_now = || closed_loop(&model, clients, each / 2, &mut |_, _| {});
        max_now()?;
        let (mut agreeing, mut counted) = (0, 0);
        for round in 1..=rounds {
            let mut maxima = vec![max_now()?];
            let mut results: Vec<SteadyLoad> = Vec::new();
            for f in VERIFY_AT {
                let rate = f * maxima[maxima.len() - 1];
                eprintln!("{name}: round {round}/{rounds}, steady load at {rate:.1} req/s");
                results.push(steady_load(&model, rate, each)?);
                maxima.push(max_now()?);
            }
            let (low, high) = maxima.iter().fold((f64::MAX, 0.0f64), |(l, h), &m| (l.min(m), h.max(m)));
            let stable = high - low <= 0.1 * maxima.iter().sum::<f64>() / maxima.len() as f64;
            let agrees = results[0].sustained() && !results[1].sustained();
            counted += usize::from(stable);
            agreeing += usize::from(stable && agrees);
            let cells: Vec<String> = results
                .iter()
                .map(|r| {
                    let held = if r.sustained() { "held" } else { "grew" };
                    format!("{held} ({:.0} → {:.0} ms)", r.early_p50_ms, r.late_p50_ms)
                })
                .collect();
            let maxima: Vec<String> = maxima.iter().map(|m| format!("{m:.0}")).collect();
            let verdict = match (stable, agrees) {
                (false, _) => "not counted",
                (true, true) => "agrees",
                (true, false) => "disagrees",
            };
            let _ = writeln!(
                s,
                "| {name} | {:.1} | {round} | {} | {} | {verdict} |",
                stored.requests_per_s,
                maxima.join(", "),
                cells.join(" | "),
            );
        }
        verdicts.push(format!("{name} {agreeing} of {counted}"));
    }
    let _ = writeln!(s, "\nCounted rounds that agree: {}.", verdicts.join(", "));
    Ok(s)
}

/// The error of the fit at a batch size left out of it: the second largest measured,
/// predicted from the others, against what was measured.
fn held_out_error(profile: &Profile) -> Option<(u32, f64)> {
    let points = &profile.points;
    let held = points.len().checked_sub(2)?;
    let others: Vec<(f64, f64)> = points
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != held)
        .map(|(_, p)| (f64::from(p.batch_size), p.warm_p50_ms))
        .collect();
    let line = fit_latency_line(&others)?;
    let p = &points[held];
    Some((p.batch_size, (line.at(f64::from(p.batch_size)) - p.warm_p50_ms) / p.warm_p50_ms))
}

fn render(rows: &[(String, Profile, bool)]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| variant | device | a ms/row | c ms | R² | held-out batch: error | max req/s | best batch | ÷ raw loop | first run b1 ms | warm b1 ms | source |"
    );
    let _ = writeln!(s, "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (name, p, reused) in rows {
        let fit = p.fit.map_or("- | - | -".into(), |f| format!("{:.3} | {:.3} | {:.4}", f.a_ms, f.c_ms, f.r2));
        let held = held_out_error(p).map_or("-".into(), |(b, e)| format!("{b}: {:+.1} %", e * 100.0));
        let tp = p.max_throughput.map_or("- | -".into(), |t| format!("{:.1} | {}", t.requests_per_s, t.batch_size));
        // The sweep runs the session in a loop by hand: its best batch is the raw limit.
        let raw = p.points.iter().map(|q| f64::from(q.batch_size) * 1e3 / q.warm_p50_ms).fold(0.0, f64::max);
        let ratio =
            p.max_throughput.filter(|_| raw > 0.0).map_or("-".into(), |t| format!("{:.3}", t.requests_per_s / raw));
        let b1 = p.points.first().map_or("- | -".into(), |q| format!("{:.2} | {:.2}", q.first_run_ms, q.warm_p50_ms));
        let source = if *reused { "stored" } else { "measured" };
        let _ = writeln!(s, "| {name} | {} | {fit} | {held} | {tp} | {ratio} | {b1} | {source} |", p.key.device);
    }
    for (name, p, _) in rows {
        if let Some(reason) = &p.fit_refused {
            let _ = writeln!(s, "\n{name}: latency fit not kept, admission will not price its requests: {reason}");
        }
    }
    s
}

/// How well a random forest trained on the first runs at powers of two (all variants
/// together) predicts the first runs at the other sizes; against taking the warm
/// latency for the first run.
fn warmup_prediction(rows: &[(String, Profile, bool)]) -> String {
    use std::fmt::Write;
    let held_out = |b: u32| !b.is_power_of_two();
    let examples: Vec<(&str, Example)> = rows
        .iter()
        .filter_map(|(name, p, _)| Some((name, p.fit?, p)))
        .flat_map(|(name, fit, p)| {
            let features = move |r| WarmupFeatures::of(r, &fit, &p.points);
            p.first_runs.iter().map(move |r| (name.as_str(), (features(r), r.first_run_ms)))
        })
        .collect();
    let train: Vec<Example> = examples.iter().filter(|(_, e)| !held_out(e.0.batch_size)).map(|(_, e)| *e).collect();
    let test: Vec<(&str, Example)> = examples.iter().filter(|(_, e)| held_out(e.0.batch_size)).copied().collect();
    let predicted =
        WarmupPredictor::train(&train).and_then(|p| p.predict(&test.iter().map(|(_, e)| e.0).collect::<Vec<_>>()));
    let predicted = match predicted {
        Ok(predicted) if !test.is_empty() => predicted,
        Ok(_) => return "\nWarm-up prediction: no first runs at sizes other than powers of two.\n".into(),
        Err(e) => return format!("\nWarm-up prediction: {e}\n"),
    };
    let mut s = format!(
        "\nWarm-up prediction: a random forest trained on {} first runs at powers of two, tested on {} at the other \
         sizes (MAPE; the baseline takes the warm latency for the first run):\n\n",
        train.len(),
        test.len()
    );
    let _ = writeln!(s, "| variant | first runs tested | forest MAPE | baseline MAPE |\n|---|---:|---:|---:|");
    let mut names: Vec<&str> = test.iter().map(|(n, _)| *n).collect();
    names.dedup();
    names.push("all");
    for name in names {
        let mine: Vec<(f64, &Example)> = predicted
            .iter()
            .zip(&test)
            .filter(|(_, (n, _))| name == "all" || *n == name)
            .map(|(p, (_, e))| (*p, e))
            .collect();
        let actual = || mine.iter().map(|(_, e)| e.1);
        let forest = mape(&mine.iter().map(|(p, _)| *p).collect::<Vec<_>>(), actual());
        let baseline = mape(&mine.iter().map(|(_, e)| e.0.warm_ms).collect::<Vec<_>>(), actual());
        let _ = writeln!(s, "| {name} | {} | {forest:.1} % | {baseline:.1} % |", mine.len());
    }
    s
}
