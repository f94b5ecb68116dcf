//! `modelless simulate`: the requests of a load spec against a simulated runtime,
//! the machine's stored profiles and a Wasm policy (or the oracle) deciding; writes
//! what `modelless loadgen` writes.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use indicatif::ProgressBar;
use modelless::{RuntimeBuilder, RuntimeConfig};
use modelless_lab::load::read_runs_csv;
use modelless_lab::simulate::{
    Decider, Oracle, SimConfig, SimModel, WasmDecider, cheapest, effective_accuracy, optimum, share_of_gain, simulate,
};
use modelless_runtime::policy::Recorder;
use modelless_runtime::policy::{HostConfig, PolicyEngine};

/// Makes the decider of each server.
type MakeDecider = Box<dyn FnMut(usize) -> Box<dyn Decider>>;

#[derive(clap::Args)]
pub struct Args {
    /// The load, as for `modelless loadgen`.
    #[command(flatten)]
    load: crate::loadgen::LoadArgs,
    /// The runtime's TOML config: its tasks are loaded once to read their profiles
    /// (measured first where the config says `profile = "measure"`).
    #[arg(long, conflicts_with = "model")]
    config: Option<PathBuf>,
    /// A model written by `--save-model` instead of a config: no models are loaded.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Time batches as real runs of this machine ran them: directories written by
    /// `modelless loadgen` (in process), whose `runs.csv` says what the sessions ran;
    /// the oracle prices with the same times.
    #[arg(long, num_args = 1..)]
    calibrate: Vec<PathBuf>,
    /// Write the model here (after calibrating), to simulate without the models later.
    #[arg(long)]
    save_model: Option<PathBuf>,
    /// The policy module deciding (default: the config's).
    #[arg(long, conflicts_with = "oracle")]
    policy: Option<PathBuf>,
    /// Parameters (JSON) for the policy.
    #[arg(long)]
    policy_parameters: Option<String>,
    /// Let the oracle decide: it knows the next second's demand and switches for free.
    #[arg(long)]
    oracle: bool,
    /// Run the offline optimum instead of a policy: the best schedule of variants,
    /// second by second, knowing the whole load in advance (see `docs/policies.md`).
    #[arg(long, conflicts_with_all = ["oracle", "policy", "against_optimum"])]
    optimum: bool,
    /// After the policy's (or the oracle's) run, run the offline optimum and the
    /// cheapest variant too (written beside it, in `optimum/` and `cheapest/`), and
    /// say what share of the attainable gain in effective accuracy the policy took.
    #[arg(long)]
    against_optimum: bool,
    /// Highest utilisation the oracle lets a server reach.
    #[arg(long, default_value_t = 0.8)]
    oracle_utilisation: f64,
    /// Servers behind least-connections balancing, each serving every task.
    #[arg(long, default_value_t = 1)]
    servers: usize,
    #[command(flatten)]
    ticks: crate::loadgen::TickArgs,
    /// Record every policy tick (snapshot and decision, JSON Lines) to this file, for
    /// `modelless policy replay` (one server only).
    #[arg(long, conflicts_with = "oracle")]
    record_ticks: Option<PathBuf>,
    /// Seed of the batch times (the arrivals follow the load's seed).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Where the results go.
    #[arg(long, default_value = "simulate")]
    out: PathBuf,
    /// Heads the summary rows and the plots (default: the policy's name).
    #[arg(long)]
    label: Option<String>,
    /// Write the request log as CSV instead of JSON Lines.
    #[arg(long)]
    csv: bool,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let spec = args.load.read()?;
    let config = args.config.as_ref().map(RuntimeConfig::from_file).transpose()?;
    let model = match (&args.model, &config) {
        (Some(path), _) => SimModel::from_file(path)?,
        (None, Some(config)) => {
            eprintln!("loading the runtime to read its profiles ...");
            let runtime = RuntimeBuilder::default().with_config(config.clone()).build()?;
            SimModel::from_runtime(&runtime, config)?
        }
        (None, None) => anyhow::bail!("give --config or --model"),
    };
    let model = calibrated(model, &args.calibrate)?;
    if let Some(path) = &args.save_model {
        model.save(path)?;
    }
    let module = args.policy.clone().or_else(|| Some(config.as_ref()?.policy.as_ref()?.module.clone()));
    let parameters: Option<serde_json::Value> = match &args.policy_parameters {
        Some(json) => Some(serde_json::from_str(json).context("--policy-parameters")?),
        None if args.policy.is_none() => config.as_ref().and_then(|c| c.policy.as_ref()?.parameters.clone()),
        None => None,
    };
    let config = SimConfig {
        servers: args.servers,
        tick: args.ticks.tick(),
        seed: args.seed,
        early_tick: args.ticks.early_tick(),
    };
    if args.optimum {
        let found = run_optimum(&model, &spec, &config)?;
        return crate::loadgen::report(&found.result, &args.out, args.label.as_deref().unwrap_or("optimum"), args.csv);
    }
    let (mut decider, label): (MakeDecider, String) = if args.oracle {
        let oracle = Oracle::knowing(&model, args.oracle_utilisation);
        (Box::new(move |_| Box::new(oracle.clone()) as Box<dyn Decider>), "oracle".into())
    } else {
        let path = module.context("give --policy (or a config with a [policy]) or --oracle")?;
        let compiled = PolicyEngine::new(HostConfig::default())?.compile_file(&path)?;
        let name = path.file_stem().map_or("policy".into(), |s| s.to_string_lossy().into_owned());
        let model = model.clone();
        let mut recorder = match &args.record_ticks {
            Some(_) if args.servers > 1 => anyhow::bail!("--record-ticks records one server: give --servers 1"),
            Some(path) => Some(Recorder::open(path).with_context(|| format!("cannot record to {}", path.display()))?),
            None => None,
        };
        let make = move |_| {
            let decider = WasmDecider::new(compiled.clone(), parameters.clone(), &model);
            Box::new(match recorder.take() {
                Some(recorder) => decider.with_recorder(recorder),
                None => decider,
            }) as Box<dyn Decider>
        };
        (Box::new(make), name)
    };
    let label = args.label.clone().unwrap_or(label);
    let bar = ProgressBar::new(0);
    let started = Instant::now();
    let (result, stats) = simulate(&model, &spec, &config, &mut decider, &mut |second, duration| {
        bar.set_length(u64::from(duration));
        bar.set_position(u64::from(second));
    })?;
    bar.finish_and_clear();
    eprintln!(
        "simulated {} s on {} server(s) in {:.2} s: {} requests, {} policy ticks ({} early), {} switches",
        result.duration_s,
        args.servers,
        started.elapsed().as_secs_f64(),
        result.records.len(),
        stats.ticks,
        stats.early_ticks,
        stats.switches
    );
    crate::loadgen::report(&result, &args.out, &label, args.csv)?;
    if args.against_optimum {
        let found = run_optimum(&model, &spec, &config)?;
        let (floor, _) = cheapest(&model, &spec, &config)?;
        let (ours, best, least) =
            (effective_accuracy(&result), effective_accuracy(&found.result), effective_accuracy(&floor));
        found.result.write(&args.out.join("optimum"), "optimum", args.csv)?;
        floor.write(&args.out.join("cheapest"), "cheapest", args.csv)?;
        let violations = |r: &modelless_lab::load::RunResult| r.summaries().last().map_or(0.0, |s| s.slo_violation_pct);
        println!("| run | eff. accuracy | SLO violations % | share of the attainable gain |");
        println!("|---|---:|---:|---:|");
        for (name, run, accuracy) in [(&label, &result, ours), (&"optimum".into(), &found.result, best)] {
            let share = share_of_gain(accuracy, least, best).map_or("-".into(), |s| format!("{:.0} %", s * 100.0));
            println!("| {name} | {accuracy:.2} | {:.3} | {share} |", violations(run));
        }
        println!("| cheapest | {least:.2} | {:.3} | 0 % |", violations(&floor));
    }
    Ok(())
}

/// The offline optimum of `spec` on `model`, with a bar over the plans tried.
fn run_optimum(
    model: &SimModel,
    spec: &modelless_lab::load::LoadSpec,
    config: &SimConfig,
) -> anyhow::Result<modelless_lab::simulate::Optimum> {
    let bar = ProgressBar::new(0);
    let started = Instant::now();
    let found = optimum(model, spec, config, &mut |done, all| {
        bar.set_length(all as u64);
        bar.set_position(done as u64);
    })?;
    bar.finish_and_clear();
    let best = found.tried.iter().map(|t| t.1).fold(f64::NEG_INFINITY, f64::max);
    let mean_capacity = found.plan.capacities.iter().sum::<f64>() / found.plan.capacities.len().max(1) as f64;
    eprintln!(
        "optimum in {:.2} s: {} plans run, the best scoring {best:.2} (planned at a mean capacity of {mean_capacity:.2}{}, \
         {} switches)",
        started.elapsed().as_secs_f64(),
        found.tried.len(),
        if found.no_queue_delay { ", no queue delay" } else { "" },
        found.plan.switches()
    );
    Ok(found)
}

/// `model` calibrated on the runs written under `dirs` (itself when there are none).
fn calibrated(model: SimModel, dirs: &[PathBuf]) -> anyhow::Result<SimModel> {
    if dirs.is_empty() {
        return Ok(model);
    }
    let mut runs = Vec::new();
    for dir in dirs {
        let path = dir.join("runs.csv");
        runs.extend(read_runs_csv(&path).with_context(|| {
            format!("--calibrate {}: a run of `modelless loadgen` in process writes runs.csv", dir.display())
        })?);
    }
    let model = model.calibrated(&runs)?;
    // Variants of the same name in several tasks are calibrated alike: one line each.
    let mut told = std::collections::BTreeSet::new();
    for variant in model.tasks.iter().flat_map(|t| &t.variants) {
        if let Some(c) = variant.calibration
            && told.insert(variant.name.clone())
        {
            let largest = variant.max_batch_size;
            eprintln!(
                "calibrated {}: {:.2} x its line at 1 row, {:.2} x at {largest}",
                variant.name,
                c.at(1.0),
                c.at(f64::from(largest))
            );
        }
    }
    Ok(model)
}
