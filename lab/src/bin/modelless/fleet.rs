//! `modelless fleet`: a trace through a simulated fleet of replicas of a config's
//! task, scaled by each scaler in turn (the HPA on the demand ratio, the HPA on CPU,
//! KServe's concurrency target, static peak provisioning); writes the table and the
//! plots.

use std::path::PathBuf;
use std::time::Instant;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use modelless::{RuntimeBuilder, RuntimeConfig};
use modelless_lab::fleet::{
    FleetConfig, FleetReport, FleetRow, FleetTrace, ReplicaModel, ScalerConfig, ScalerKind, run_fleet,
};
use modelless_lab::simulate::SimModel;

/// Seconds from `modelless serve --config experiments/fleet.toml` starting to its
/// `/v2/health/ready` answering 200: the median of 5 starts on the 2-core VM with
/// stored profiles (docs/load-and-simulation.md says how it was measured).
const MEASURED_START_S: f64 = 4.8;

#[derive(clap::Args)]
pub struct Args {
    /// The runtime's TOML config: its task's variants are loaded once to read their
    /// profiles (unless `--model`), and say how many instances each runs.
    #[arg(long)]
    config: PathBuf,
    /// A model written by `modelless simulate --save-model`: profiles from it, and
    /// no variant is loaded.
    #[arg(long)]
    model: Option<PathBuf>,
    /// The task (default: the trace's only one; for a CSV trace, the config's first).
    #[arg(long)]
    task: Option<String>,
    /// The trace: a load file, as `modelless loadgen --load` reads it, or a CSV of
    /// requests per second.
    #[arg(long)]
    trace: PathBuf,
    /// Multiply every rate of the trace by this.
    #[arg(long, default_value_t = 1.0)]
    rate_scale: f64,
    /// Where the table and the plots go.
    #[arg(long, default_value = "fleet")]
    out: PathBuf,
    /// Seconds from a pod asked for to its readiness.
    #[arg(long, default_value_t = MEASURED_START_S)]
    start_s: f64,
    /// The scalers to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "demand,cpu,kserve,static")]
    scalers: Vec<ScalerKind>,
    /// Most replicas any autoscaler may ask for.
    #[arg(long, default_value_t = 100)]
    max_replicas: u32,
    /// Pods ready at the start (default: what the trace's first minute needs).
    #[arg(long)]
    initial_replicas: Option<u32>,
    /// The demand HPA's target averageValue of `modelless_task_demand_ratio`.
    #[arg(long, default_value_t = 0.7)]
    demand_target: f64,
    /// Of the largest surge a replica saw in the last 10 minutes (its rate's jump
    /// within a second beyond the noise), the share the demand ratio adds as headroom:
    /// by default the runtime's (a task's `demand_surge_weight`); 0 reads the demand
    /// alone.
    #[arg(long, default_value_t = modelless::policy_abi::DEMAND_SURGE_WEIGHT)]
    demand_surge_weight: f64,
    /// How far ahead, s, the demand ratio carries a rising rate (its 10 s rate's rise
    /// over its 60 s one): by default the runtime's (a task's `demand_lead_s`); 0
    /// reads the demand of now.
    #[arg(long, default_value_t = modelless::policy_abi::DEMAND_LEAD_S)]
    demand_lead_s: f64,
    /// The CPU HPA's target utilisation.
    #[arg(long, default_value_t = 0.7)]
    cpu_target: f64,
    /// Both HPAs' `behavior.scaleDown.stabilizationWindowSeconds`: scale down to no
    /// fewer than the most asked for over this window (Kubernetes' default 300 s).
    #[arg(long, default_value_t = 300.0)]
    scale_down_window_s: f64,
    /// Both HPAs' scale-up policy of `Percent` type: at most this share more pods per
    /// 15 s, or 4 pods where that is more (Kubernetes' default 100 %).
    #[arg(long, default_value_t = 100.0)]
    scale_up_percent: f64,
    /// KServe's `scaleTarget`: requests in flight per pod (at Knative's 70 %).
    #[arg(long, default_value_t = 8.0)]
    kserve_target: f64,
    /// Cores of a pod (default: this machine's, as the runtime's budget defaults to):
    /// a variant with intra-op threads of its own runs as many instances as they fit.
    #[arg(long)]
    cores: Option<u32>,
    /// Seed of the batch times (the arrivals follow the trace's own seed).
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = RuntimeConfig::from_file(&args.config)?;
    let csv = args.trace.extension().is_some_and(|e| e.eq_ignore_ascii_case("csv"));
    let task_hint = args.task.clone().or_else(|| csv.then(|| config.tasks.first().map(|t| t.name.clone())).flatten());
    let trace = FleetTrace::read(&args.trace, task_hint.as_deref(), args.seed, args.rate_scale)?;
    let model = match &args.model {
        Some(path) => SimModel::from_file(path)?,
        None => {
            eprintln!("loading the runtime to read its profiles ...");
            let runtime = RuntimeBuilder::default().with_config(config.clone()).build()?;
            SimModel::from_runtime(&runtime, &config)?
        }
    };
    let task = model
        .tasks
        .iter()
        .find(|t| t.name == trace.task)
        .with_context(|| format!("the model has no task `{}`", trace.task))?;
    let slo_ms = trace.slo_ms.or(task.slo_ms).context("the task has no latency SLO: set `slo_ms` in the trace")?;
    let configured = config.tasks.iter().find(|t| t.name == trace.task);
    let cores = args.cores.unwrap_or(model.cores).max(1);
    // The runtime's best allocation: all the cores in instances of a variant's own
    // threads, one instance where it runs on the shared pool.
    let instances = |variant: &str| {
        let threads = configured
            .and_then(|t| t.variants.iter().find(|v| v.name == variant))
            .and_then(|v| v.onnx.intra_op_threads)
            .filter(|&t| t > 0);
        threads.map_or(1, |t| (cores as usize / t).max(1) as u32)
    };
    let replica = ReplicaModel::cheapest(task, &instances, slo_ms)?;
    let capacity = replica.capacity_per_s();
    let mut scalers = ScalerConfig {
        demand_target: args.demand_target,
        demand_surge_weight: args.demand_surge_weight,
        demand_lead_s: args.demand_lead_s,
        cpu_target: args.cpu_target,
        ..Default::default()
    };
    scalers.hpa.max_replicas = args.max_replicas;
    scalers.hpa.scale_down_stabilisation_s = args.scale_down_window_s;
    scalers.hpa.scale_up_percent = args.scale_up_percent;
    scalers.kpa.max_replicas = args.max_replicas;
    scalers.kpa.target_concurrency = args.kserve_target;
    let fleet = FleetConfig {
        start_s: args.start_s,
        initial_replicas: args.initial_replicas.unwrap_or_else(|| trace.opening_replicas(capacity)),
        static_replicas: trace.peak_replicas(capacity),
        scalers,
        seed: args.seed,
    };
    let arrivals = trace.arrivals();
    let mut report = FleetReport {
        trace: args.trace.display().to_string(),
        task: trace.task.clone(),
        duration_s: trace.duration_s(),
        replica,
        capacity_per_s: capacity,
        config: fleet,
        rows: Vec::new(),
    };
    eprintln!("{}", report.preamble());
    let mut runs = Vec::new();
    for &kind in &args.scalers {
        let bar = ProgressBar::new(u64::from(trace.duration_s()));
        bar.set_style(
            ProgressStyle::with_template("{prefix:>7} [{bar:30}] {pos}/{len} s")
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar.set_prefix(kind.name());
        let started = Instant::now();
        let run = run_fleet(&report.replica, &arrivals, trace.duration_s(), kind, &report.config, &mut |second, _| {
            bar.set_position(u64::from(second));
        })?;
        bar.finish_and_clear();
        eprintln!("{kind}: {} requests simulated in {:.1} s", run.totals.requests, started.elapsed().as_secs_f64());
        report.rows.push(FleetRow { scaler: kind, totals: run.totals.clone() });
        runs.push(run);
    }
    println!("{}", report.markdown());
    for path in report.write(&args.out, &runs, &trace.rates)? {
        println!("wrote {}", path.display());
    }
    Ok(())
}
