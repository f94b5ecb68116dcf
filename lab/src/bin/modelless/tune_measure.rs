//! `modelless tune-measure`: the measuring process of `tune`. It loads one setting
//! of one variant, warms it up, says `ready`, then measures a slice for every line of
//! standard input (the slice's seconds) and answers each with a line of JSON, until
//! standard input ends. Staying up between slices is what lets `tune` alternate a
//! candidate's slices with a reference's (see [`crate::tune_measurer`]).

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use modelless::{ProfileMode, RuntimeBuilder, RuntimeConfig};
use modelless_lab::load::{InProcess, LoadSpec, Pattern, RunResult, Status, TaskLoad};
use modelless_lab::tune::ServingSetting;
use serde::{Deserialize, Serialize};

use crate::tune::ObjectiveArgs;
use crate::tune_reference::{ModelAlone, Sessions};

/// What one slice measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub throughput_per_s: f64,
    pub goodput_per_s: f64,
    pub mean_ms: Option<f64>,
    pub p99_ms: Option<f64>,
    pub failed: u64,
}

impl Measured {
    /// What the model alone's rate means to `clients` closed-loop clients.
    fn of_model_alone(alone: &ModelAlone, clients: usize) -> Self {
        let latency = alone.closed_loop_latency_ms(clients);
        Measured {
            throughput_per_s: alone.rows_per_s,
            goodput_per_s: alone.rows_per_s,
            mean_ms: Some(latency),
            p99_ms: Some(latency),
            failed: 0,
        }
    }

    fn of_run(result: &RunResult) -> Self {
        let summary = result.summaries().into_iter().find(|s| s.task != "all").unwrap_or_default();
        let answered: Vec<f64> =
            result.records.iter().filter(|r| r.status == Status::Ok).map(|r| r.latency_ms).collect();
        Measured {
            throughput_per_s: summary.throughput_per_s,
            goodput_per_s: summary.goodput_per_s,
            mean_ms: (!answered.is_empty()).then(|| answered.iter().sum::<f64>() / answered.len() as f64),
            p99_ms: summary.p99_ms,
            failed: summary.sent.saturating_sub(summary.completed),
        }
    }
}

#[derive(clap::Args)]
pub struct MeasureArgs {
    #[arg(long)]
    config: PathBuf,
    #[arg(long)]
    task: String,
    #[arg(long)]
    variant: String,
    /// The setting, as JSON.
    #[arg(long)]
    setting: String,
    #[command(flatten)]
    objective: ObjectiveArgs,
    #[arg(long, default_value_t = 1)]
    warmup_seconds: u32,
    #[arg(long, default_value = "640x480")]
    image_sizes: String,
    /// Measure the variant's sessions alone instead (closed-loop objectives only).
    #[arg(long)]
    model_alone: bool,
}

/// Loads and warms the setting, then measures the slices standard input asks for.
pub fn measure(args: MeasureArgs) -> anyhow::Result<()> {
    let objective = args.objective.objectives()?.into_iter().next().context("no objective")?;
    let setting: ServingSetting = serde_json::from_str(&args.setting).context("--setting")?;
    let mut config = RuntimeConfig::from_file(&args.config)?;
    only_variant(&mut config, &args.task, &args.variant)?;
    setting.apply(&mut config, &args.task, &args.variant);
    if args.model_alone {
        let clients = objective.concurrency.context("the model alone is measured in a closed loop only")?;
        let mut sessions = Sessions::load(&config, &args.task, &args.variant, setting.instances)?;
        return serve_slices(|seconds| {
            Ok(Measured::of_model_alone(&sessions.run(clients, f64::from(seconds))?, clients))
        });
    }
    if let Some(clients) = objective.concurrency {
        // Closed loop: no batch holds more rows than there are clients, so warming
        // larger ones up would only lengthen every evaluation.
        for variant in config.tasks.iter_mut().flat_map(|t| t.variants.iter_mut()) {
            variant.warmup.up_to_batch = Some(clients);
        }
    }
    let slo = config.tasks.first().and_then(|t| t.latency_slo_ms);
    let takes_images = config.tasks.iter().flat_map(|t| &t.variants).any(|v| v.preprocess.is_some());
    let runtime = Arc::new(RuntimeBuilder::default().with_config(config).build()?);
    let tokio = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
    let spec_for = |seconds: u32| -> anyhow::Result<LoadSpec> {
        if let Some(load) = &objective.load {
            return Ok(LoadSpec::from_file(load)?);
        }
        let rate = objective.rate.unwrap_or(1.0);
        let task = TaskLoad {
            task: args.task.clone(),
            pattern: Pattern::Constant { rate, duration_s: seconds },
            slo_ms: objective.slo_ms.or(slo).or(Some(60_000.0)),
            min_accuracy: None,
            start_s: 0,
        };
        Ok(LoadSpec { seed: 0, tasks: vec![task], rate_scale: 1.0 })
    };
    let images = takes_images
        .then(|| {
            modelless_lab::load::ImageSet::generated(&modelless_lab::load::images::parse_sizes(&args.image_sizes)?, 0)
        })
        .transpose()?;
    let drive = |spec: &LoadSpec| -> anyhow::Result<RunResult> {
        let mut target = InProcess::new(runtime.clone(), spec)?;
        if let Some(images) = &images {
            target.with_images(images);
        }
        let target: Arc<dyn modelless_lab::load::Target> = Arc::new(target);
        Ok(match objective.concurrency {
            Some(clients) => tokio.block_on(modelless_lab::load::run_closed(target, spec, clients, &mut |_| {}))?,
            None => tokio.block_on(modelless_lab::load::run(target, spec, &mut |_| {}))?,
        })
    };
    if args.warmup_seconds > 0 && objective.load.is_none() {
        drive(&spec_for(args.warmup_seconds)?)?;
    }
    serve_slices(|seconds| Ok(Measured::of_run(&drive(&spec_for(seconds)?)?)))
}

/// Says `ready`, then measures a slice of the seconds each line of standard input
/// gives and answers it with a line of JSON, until standard input ends.
fn serve_slices(mut slice: impl FnMut(u32) -> anyhow::Result<Measured>) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let seconds: u32 = line.trim().parse().with_context(|| format!("a slice's seconds, not `{line}`"))?;
        anyhow::ensure!(seconds >= 1, "a slice lasts at least a second");
        writeln!(out, "{}", serde_json::to_string(&slice(seconds)?)?)?;
        out.flush()?;
    }
    Ok(())
}

/// Leaves only `variant` of `task` in `config`, active, with whatever profile is
/// stored (profiling at every evaluation would measure the profiler).
fn only_variant(config: &mut RuntimeConfig, task: &str, variant: &str) -> anyhow::Result<()> {
    config.tasks.retain(|t| t.name == task);
    let found = config.tasks.first_mut().with_context(|| format!("no task `{task}`"))?;
    found.variants.retain(|v| v.name == variant);
    let chosen = found.variants.first_mut().with_context(|| format!("task `{task}` has no variant `{variant}`"))?;
    if chosen.profile == ProfileMode::Measure {
        chosen.profile = ProfileMode::Stored;
    }
    found.active = Some(variant.to_string());
    config.models.clear();
    config.policy = None;
    config.server = None;
    Ok(())
}
