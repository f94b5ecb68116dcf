//! `modelless loadgen`: open-loop load from a spec against the runtime of a config
//! (in this process, steered by its policy) or a KServe V2 gRPC endpoint; writes the
//! request log, the timeline, the summary and the plots.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use modelless::{PolicyConfig, RuntimeBuilder, RuntimeConfig};
use modelless_lab::load::images::parse_sizes;
use modelless_lab::load::{Grpc, ImageSet, InProcess, LoadSpec, Progress, RunResult, Target, markdown_table};
use modelless_runtime::policy::EarlyTick;

#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    load: LoadArgs,
    /// The runtime's TOML config: the runtime to load in process, or, with `--grpc`,
    /// where the variants' accuracies and the tasks' SLOs are read from.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Send to this KServe V2 gRPC endpoint (e.g. http://127.0.0.1:8001) instead.
    #[arg(long)]
    grpc: Option<String>,
    /// Steer with this policy module instead of the config's.
    #[arg(long)]
    policy: Option<PathBuf>,
    /// Parameters (JSON) for `--policy`.
    #[arg(long)]
    policy_parameters: Option<String>,
    #[command(flatten)]
    ticks: crate::loadgen::TickArgs,
    /// Record every policy tick (snapshot and decision, JSON Lines) to this file, for
    /// `modelless policy replay`.
    #[arg(long)]
    record_ticks: Option<PathBuf>,
    /// Where the results go.
    #[arg(long, default_value = "loadgen")]
    out: PathBuf,
    /// Heads the summary rows and the plots (default: the policy's file name).
    #[arg(long)]
    label: Option<String>,
    /// Write the request log as CSV instead of JSON Lines.
    #[arg(long)]
    csv: bool,
    #[command(flatten)]
    images: ImageArgs,
    /// Closed loop: this many clients per task, each sending its next request when its
    /// last is answered, for as long as the task's pattern lasts (its rates unused).
    #[arg(long)]
    concurrency: Option<usize>,
}

/// The images sent to tasks that take them.
#[derive(clap::Args)]
pub struct ImageArgs {
    /// Send this image file, or the JPEG and PNG files of this folder in turn, to tasks
    /// that take images (in process, without images, they are sent tensors of zeros).
    #[arg(long, conflicts_with = "image_sizes")]
    images: Option<PathBuf>,
    /// Send photo-like JPEGs generated at these sizes, e.g. `500x375,3564x2880`.
    #[arg(long)]
    image_sizes: Option<String>,
}

impl ImageArgs {
    fn read(&self, seed: u64) -> anyhow::Result<Option<ImageSet>> {
        let set = match (&self.images, &self.image_sizes) {
            (Some(dir), _) => ImageSet::from_path(dir)?,
            (None, Some(sizes)) => ImageSet::generated(&parse_sizes(sizes)?, seed)?,
            (None, None) => return Ok(None),
        };
        eprintln!("sending {} image(s) of {:.0} KB on average", set.len(), set.mean_bytes() / 1e3);
        Ok(Some(set))
    }
}

/// When the policy decides.
#[derive(clap::Args)]
pub struct TickArgs {
    /// Time between the policy's decisions, ms.
    #[arg(long, default_value_t = 1000)]
    pub tick_ms: u64,
    /// Tick early when a task's queue reaches this many requests.
    #[arg(long)]
    pub early_tick_queue: Option<u64>,
    /// Least time between an early tick and the one before, ms.
    #[arg(long, default_value_t = 200)]
    pub early_tick_gap_ms: u64,
}

/// The load to send (or simulate).
#[derive(clap::Args)]
pub struct LoadArgs {
    /// The load: TOML with a `seed` and `[[tasks]]`, each a `task`, a `pattern` and
    /// optionally `slo_ms`, `min_accuracy`, `start_s`.
    #[arg(long)]
    pub load: PathBuf,
    /// Multiply every rate of the load by this (on top of its own `rate_scale`).
    #[arg(long, default_value_t = 1.0)]
    pub rate_scale: f64,
}

impl LoadArgs {
    /// The load, scaled.
    pub fn read(&self) -> anyhow::Result<LoadSpec> {
        let mut spec = LoadSpec::from_file(&self.load)?;
        spec.rate_scale *= self.rate_scale;
        Ok(spec)
    }
}

impl TickArgs {
    /// The time between ticks.
    pub fn tick(&self) -> Duration {
        Duration::from_millis(self.tick_ms)
    }

    /// The early ticks asked for, if any.
    pub fn early_tick(&self) -> Option<EarlyTick> {
        let queue_length = self.early_tick_queue?;
        Some(EarlyTick { queue_length, min_gap: Duration::from_millis(self.early_tick_gap_ms) })
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let spec = args.load.read()?;
    let images = args.images.read(spec.seed)?;
    let config = args.config.as_ref().map(RuntimeConfig::from_file).transpose()?;
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let mut steered = None;
    let (target, label): (Arc<dyn Target>, String) = match &args.grpc {
        Some(url) => {
            let accuracies = config.as_ref().map(accuracies).unwrap_or_default();
            let mut spec = spec.clone();
            for task in &mut spec.tasks {
                task.slo_ms = task.slo_ms.or_else(|| config_slo(config.as_ref(), &task.task));
            }
            let target = tokio.block_on(Grpc::connect(url, &spec, &accuracies, images.as_ref()))?;
            (Arc::new(target), args.label.clone().unwrap_or_else(|| url.clone()))
        }
        None => {
            let mut config = config.context("--config is needed unless --grpc is given")?;
            if let Some(module) = &args.policy {
                let parameters = args.policy_parameters.as_deref().map(serde_json::from_str).transpose()?;
                let mut policy = PolicyConfig::new(module).with_tick(args.ticks.tick());
                if let Some(early) = args.ticks.early_tick() {
                    policy = policy.with_early_tick(early.queue_length, early.min_gap);
                }
                if let Some(parameters) = parameters {
                    policy = policy.with_parameters(parameters);
                }
                config.policy = Some(policy);
            }
            if let (Some(policy), Some(path)) = (config.policy.as_mut(), &args.record_ticks) {
                policy.record = Some(path.clone());
            }
            let label = args.label.clone().unwrap_or_else(|| policy_name(&config));
            eprintln!("loading the runtime ...");
            let runtime = Arc::new(RuntimeBuilder::default().with_config(config).build()?);
            steered = Some(runtime.clone());
            let mut target = InProcess::new(runtime, &spec)?;
            if let Some(images) = &images {
                let taking = target.with_images(images);
                anyhow::ensure!(!taking.is_empty(), "no task of the load takes images");
            }
            (Arc::new(target), label)
        }
    };
    let result = drive(&tokio, target, &spec, args.concurrency)?;
    if let Some(status) = steered.and_then(|r| r.policy_status()) {
        eprintln!(
            "policy {}: {} ticks ({} early), {} switches, failures {:?}{}",
            status.policy,
            status.ticks,
            status.early_ticks,
            status.switches,
            status.failures,
            status.reports.last().map_or(String::new(), |r| format!(", last report: {r}"))
        );
    }
    report(&result, &args.out, &label, args.csv)
}

/// Runs the load with a progress bar that shows each second's sampled state.
fn drive(
    tokio: &tokio::runtime::Runtime,
    target: Arc<dyn Target>,
    spec: &LoadSpec,
    concurrency: Option<usize>,
) -> anyhow::Result<RunResult> {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} s {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let mut on_second = |p: &Progress| {
        bar.set_length(u64::from(p.duration_s));
        bar.set_position(u64::from(p.second));
        let tasks: Vec<String> = p
            .samples
            .iter()
            .map(|s| {
                let queue = s.queue_length.map_or(String::new(), |q| format!(" queue {q}"));
                format!("{}: {}{queue}", s.task, s.active.as_deref().unwrap_or("?"))
            })
            .collect();
        let cpu = p.samples.first().and_then(|s| s.cpu_percent).map_or("-".into(), |c| format!("{c:.0} %"));
        let line = format!("sent {} ended {}  CPU {cpu}  {}", p.sent, p.ended, tasks.join("  "));
        // Not a terminal (a log, the experiment script): a line every 10 s instead.
        if bar.is_hidden() && p.second.is_multiple_of(10) {
            eprintln!("{:>4}/{} s  {line}", p.second, p.duration_s);
        }
        bar.set_message(line);
    };
    let result = match concurrency {
        Some(clients) => tokio.block_on(modelless_lab::load::run_closed(target, spec, clients, &mut on_second))?,
        None => tokio.block_on(modelless_lab::load::run(target, spec, &mut on_second))?,
    };
    bar.finish();
    Ok(result)
}

/// Writes a run's files under `out` and prints its summary table.
pub fn report(result: &RunResult, out: &std::path::Path, label: &str, csv: bool) -> anyhow::Result<()> {
    let written = result.write(out, label, csv)?;
    let rows: Vec<_> = result.summaries().into_iter().map(|s| (label.to_string(), s)).collect();
    println!("{}", markdown_table(&rows));
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// Task → variant → accuracy, as the config registers them.
fn accuracies(config: &RuntimeConfig) -> BTreeMap<String, BTreeMap<String, f64>> {
    config
        .tasks
        .iter()
        .map(|t| (t.name.clone(), t.variants.iter().map(|v| (v.name.clone(), v.variant_accuracy())).collect()))
        .collect()
}

fn config_slo(config: Option<&RuntimeConfig>, task: &str) -> Option<f64> {
    config?.tasks.iter().find(|t| t.name == task)?.latency_slo_ms
}

/// The policy steering the runtime, by its module's file name.
fn policy_name(config: &RuntimeConfig) -> String {
    config
        .policy
        .as_ref()
        .and_then(|p| p.module.file_stem())
        .map_or("no policy".to_string(), |s| s.to_string_lossy().into_owned())
}
