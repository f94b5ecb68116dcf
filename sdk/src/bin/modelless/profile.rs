//! `modelless profile CONFIG`: profiles on this machine, stored beside the models.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};
use modelless::backend::onnx::{OrtBackend, OrtEnvironmentConfig, OrtSessionConfig, environment};
use modelless::profile::{
    ProcessMemory, ProfileEvent, ProfileOptions, ProfileStore, SteadyLoad, SweepEvent, closed_loop, fit_line,
    profile_key, profile_model, steady_load,
};
use modelless::{BatchingConfig, Model, Profile, RuntimeConfig, StartOptions, WarmupConfig};
use serde::Serialize;

use crate::plot::{Series, scatter_with_lines};

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
    /// Seconds of closed loop measuring maximal throughput (0 skips it).
    #[arg(long, default_value_t = 5.0)]
    throughput_secs: f64,
    /// Never run a batch predicted to need more than this many MiB.
    #[arg(long)]
    memory_budget_mib: Option<u64>,
    /// Where the table and the latency plot go.
    #[arg(long, default_value = "profiles")]
    out: PathBuf,
    /// Check the maximal throughput: measure it again, then offer a steady load at 0.9,
    /// 1.0 and 1.1 times it, for this many seconds each, and report whether the queue held.
    #[arg(long, default_value_t = 0.0)]
    verify_secs: f64,
}

/// Fractions of the measured maximal throughput offered by `--verify-secs`.
const VERIFY_AT: [f64; 3] = [0.9, 1.0, 1.1];

/// What a profile was measured with; part of its key.
#[derive(Serialize)]
struct Settings<'a> {
    onnx: &'a OrtSessionConfig,
    intra_op_threads: usize,
    max_batch_size: usize,
    warm_runs: usize,
    memory_budget_mib: Option<u64>,
}

struct Target {
    name: String,
    path: PathBuf,
    onnx: OrtSessionConfig,
    max_batch_size: usize,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = RuntimeConfig::from_file(&args.config)?;
    let targets = targets(&config);
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
    if args.verify_secs > 0.0 {
        table.push_str(&verify(&targets, &rows, &env, Duration::from_secs_f64(args.verify_secs))?);
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
    let models = config.models.iter().map(|m| Target {
        name: m.name.clone(),
        path: m.path.clone(),
        onnx: m.onnx.clone(),
        max_batch_size: m.batching.max_batch_size,
    });
    let variants = config.tasks.iter().flat_map(|t| &t.variants).map(|v| Target {
        name: v.name.clone(),
        path: v.path.clone(),
        onnx: v.onnx.clone(),
        max_batch_size: v.batching.max_batch_size,
    });
    models.chain(variants).collect()
}

fn profile_one(
    target: &Target,
    env: &OrtEnvironmentConfig,
    args: &Args,
    bars: &MultiProgress,
) -> anyhow::Result<(Profile, bool)> {
    let mut options = ProfileOptions::new(target.max_batch_size);
    options.sweep.warm_runs = args.warm_runs;
    options.sweep.memory_budget_bytes = args.memory_budget_mib.map(|m| m << 20);
    options.throughput_for = Duration::from_secs_f64(args.throughput_secs);
    options.force = args.force;
    let threads = env.intra_op_threads.max(1);
    let settings = Settings {
        onnx: &target.onnx,
        intra_op_threads: threads,
        max_batch_size: target.max_batch_size,
        warm_runs: args.warm_runs,
        memory_budget_mib: args.memory_budget_mib,
    };
    let key = profile_key(&target.path, "cpu", &settings)
        .with_context(|| format!("cannot read {}", target.path.display()))?;
    let store = ProfileStore::new(target.path.parent().unwrap_or(Path::new(".")));
    let sweep_runs = options.sweep.batch_sizes.len() as u64 * (options.sweep.warm_runs as u64 + 1);
    let total = sweep_runs + (options.throughput_for.as_secs_f64() * 10.0) as u64;
    let bar = bars.add(ProgressBar::new(total));
    bar.set_style(
        ProgressStyle::with_template("{prefix:>18} [{bar:30}] {pos}/{len} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar.set_prefix(target.name.clone());
    let mut reused = false;
    let factory = OrtBackend::factory(env.clone(), target.path.clone(), target.onnx.clone());
    let profile =
        profile_model(&target.name, factory, key, &store, &options, &ProcessMemory, &mut |event| match event {
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
            ProfileEvent::Throughput { done, .. } => {
                bar.set_position(sweep_runs + (done * 10.0) as u64);
                bar.set_message("maximal throughput");
            }
        })?;
    bar.finish_with_message(if reused { "stored profile reused" } else { "measured" });
    Ok((profile, reused))
}

/// Offers steady loads around each measured maximal throughput; a table of the results.
fn verify(
    targets: &[Target],
    rows: &[(String, Profile, bool)],
    env: &OrtEnvironmentConfig,
    each: Duration,
) -> anyhow::Result<String> {
    use std::fmt::Write;
    let mut s = String::from(
        "\nMaximal throughput measured again (closed loop at the best batch), then steady loads at \
         fractions of it (median latency early → late):\n\n",
    );
    let _ = writeln!(
        s,
        "| variant | stored max req/s | max now | {} | within 10 % |",
        VERIFY_AT.map(|f| format!("{f}×")).join(" | ")
    );
    let _ = writeln!(s, "|---|---:|---:|{}---|", "---|".repeat(VERIFY_AT.len()));
    for (target, (name, profile, _)) in targets.iter().zip(rows) {
        let Some(stored) = profile.max_throughput else { continue };
        let factory = OrtBackend::factory(env.clone(), target.path.clone(), target.onnx.clone());
        let batching = BatchingConfig::default().with_max_batch_size(stored.batch_size as usize);
        let warm = StartOptions { warmup: WarmupConfig::default(), ..StartOptions::default() };
        let model = Model::start_with(name, factory, 1, batching, warm)?;
        let clients = 2 * stored.batch_size as usize;
        closed_loop(&model, clients, each / 5, &mut |_, _| {})?;
        let max = closed_loop(&model, clients, each, &mut |_, _| {})?;
        let results: Vec<SteadyLoad> = VERIFY_AT
            .iter()
            .map(|f| {
                eprintln!("{name}: steady load at {:.1} req/s", f * max);
                steady_load(&model, f * max, each)
            })
            .collect::<Result<_, _>>()?;
        let cells: Vec<String> = results
            .iter()
            .map(|r| {
                let held = if r.sustained() { "held" } else { "grew" };
                format!("{held} ({:.0} → {:.0} ms)", r.early_p50_ms, r.late_p50_ms)
            })
            .collect();
        // Held at 0.9× and grew at 1.1×: what a steady load sustains is within 10 % of the max.
        let agrees = results[0].sustained() && !results[2].sustained();
        let _ = writeln!(
            s,
            "| {name} | {:.1} | {max:.1} | {} | {} |",
            stored.requests_per_s,
            cells.join(" | "),
            if agrees { "yes" } else { "no" }
        );
    }
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
    let line = fit_line(&others)?;
    let p = &points[held];
    Some((p.batch_size, (line.at(f64::from(p.batch_size)) - p.warm_p50_ms) / p.warm_p50_ms))
}

fn render(rows: &[(String, Profile, bool)]) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| variant | a ms/row | c ms | R² | held-out batch: error | max req/s | best batch | first run b1 ms | warm b1 ms | source |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|");
    for (name, p, reused) in rows {
        let fit = p.fit.map_or("- | - | -".into(), |f| format!("{:.3} | {:.3} | {:.4}", f.a_ms, f.c_ms, f.r2));
        let held = held_out_error(p).map_or("-".into(), |(b, e)| format!("{b}: {:+.1} %", e * 100.0));
        let tp = p.max_throughput.map_or("- | -".into(), |t| format!("{:.1} | {}", t.requests_per_s, t.batch_size));
        let b1 = p.points.first().map_or("- | -".into(), |q| format!("{:.2} | {:.2}", q.first_run_ms, q.warm_p50_ms));
        let source = if *reused { "stored" } else { "measured" };
        let _ = writeln!(s, "| {name} | {fit} | {held} | {tp} | {b1} | {source} |");
    }
    s
}
