//! `modelless tune`: searches the serving settings of a task's variants for the lowest
//! cost an objective measures, by Bayesian optimisation and by random search with the
//! same budget, several seeds each; remeasures the best of each search and the
//! configured default in interleaved rounds; writes a table, convergence plots and
//! the best setting as TOML (`--write` puts it into the config).
//!
//! The work is [`modelless_lab::tune`]'s; this command turns its flags into those
//! calls, draws the progress and writes the files. Each setting is measured by
//! `modelless tune-measure` ([`crate::tune_measure`]) in a process of its own.

use std::path::{Path, PathBuf};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use modelless::RuntimeConfig;
use modelless_lab::tune::candidates::{self, best, remeasure};
use modelless_lab::tune::measure::{MeasureCommand, MeasureSetup, Measurer};
use modelless_lab::tune::replay_report::replay_section;
use modelless_lab::tune::report::{best_remeasured, rounds_table, table, toml_snippet};
use modelless_lab::tune::{
    Goal, Objective, SearchEvent, SearchPlan, SearchTrace, Strategy, TunedVariant, plot, run_searches, variants,
    write_setting,
};

/// What a setting is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum GoalArg {
    /// 99th percentile latency at a concurrency (closed loop), lower is better.
    P99,
    /// Mean latency at a concurrency (closed loop), lower is better.
    Mean,
    /// Answers per second at an open-loop rate, scaled down by how far p99 exceeds
    /// the SLO: higher is better.
    Throughput,
    /// Answers within their SLO per second under a load file: higher is better.
    Goodput,
}

impl From<GoalArg> for Goal {
    fn from(goal: GoalArg) -> Self {
        match goal {
            GoalArg::P99 => Goal::P99,
            GoalArg::Mean => Goal::Mean,
            GoalArg::Throughput => Goal::Throughput,
            GoalArg::Goodput => Goal::Goodput,
        }
    }
}

/// The load an objective is measured under.
#[derive(clap::Args, Clone, Debug)]
pub struct ObjectiveArgs {
    /// What a setting is judged by.
    #[arg(long, value_enum, default_value = "p99")]
    objective: GoalArg,
    /// Clients sending back to back (p99 and mean), e.g. `1,8,32`: one search per value.
    #[arg(long, value_delimiter = ',', default_value = "8")]
    concurrency: Vec<usize>,
    /// Requests per second, open loop (throughput).
    #[arg(long)]
    rate: Option<f64>,
    /// The p99 the throughput must stay within, ms (throughput).
    #[arg(long)]
    slo_ms: Option<f64>,
    /// The load file (goodput).
    #[arg(long)]
    load: Option<PathBuf>,
}

impl ObjectiveArgs {
    pub fn objectives(&self) -> anyhow::Result<Vec<Objective>> {
        let goal = Goal::from(self.objective);
        let base = Objective { goal, concurrency: None, rate: None, slo_ms: None, load: None };
        Ok(match goal {
            Goal::P99 | Goal::Mean => {
                anyhow::ensure!(!self.concurrency.is_empty(), "--concurrency needs at least one value");
                for &c in &self.concurrency {
                    anyhow::ensure!(
                        (1..=modelless_lab::load::MAX_CONCURRENCY).contains(&c),
                        "concurrency {c} out of range"
                    );
                }
                self.concurrency.iter().map(|&c| Objective { concurrency: Some(c), ..base.clone() }).collect()
            }
            Goal::Throughput => {
                let rate = self.rate.filter(|r| *r > 0.0).context("--objective throughput needs --rate > 0")?;
                let slo = self.slo_ms.filter(|s| *s > 0.0).context("--objective throughput needs --slo-ms > 0")?;
                vec![Objective { rate: Some(rate), slo_ms: Some(slo), ..base }]
            }
            Goal::Goodput => {
                let load = self.load.clone().context("--objective goodput needs --load")?;
                vec![Objective { load: Some(load), ..base }]
            }
        })
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// The runtime's TOML config.
    #[arg(long)]
    config: PathBuf,
    /// The task whose variants are tuned.
    #[arg(long)]
    task: String,
    /// Only this variant (default: every variant of the task).
    #[arg(long)]
    variant: Option<String>,
    #[command(flatten)]
    objective: ObjectiveArgs,
    /// Evaluations per search.
    #[arg(long, default_value_t = 20)]
    budget: usize,
    /// Random points Bayesian optimisation measures before its model proposes.
    #[arg(long, default_value_t = 5)]
    initial: usize,
    /// The last evaluations of each search's budget, which measure its best settings
    /// again (one each); a search recommends the best mean of those it measured twice.
    #[arg(long, default_value_t = 3)]
    confirm: usize,
    /// Searches per strategy, seeded 0, 1, …
    #[arg(long, default_value_t = 3)]
    seeds: u64,
    /// The strategies compared.
    #[arg(long, value_delimiter = ',', default_value = "bayes,random")]
    strategies: Vec<StrategyArg>,
    /// Seconds each evaluation measures (after its warm-up).
    #[arg(long, default_value_t = 3)]
    seconds: u32,
    /// Seconds of load before each measurement, not counted.
    #[arg(long, default_value_t = 1)]
    warmup_seconds: u32,
    /// Interleaved rounds in which the default and each search's best are remeasured.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Photo-like JPEGs of these sizes for tasks that take images.
    #[arg(long, default_value = "640x480")]
    image_sizes: String,
    /// Measure closed-loop objectives in one-second slices alternating with the
    /// default's, and cost each setting as its ratio to the default: for machines whose
    /// speed drifts alike for every setting (clocks, heat), not where neighbours' load
    /// slows some settings more than others.
    #[arg(long)]
    paired: bool,
    /// Search again even where a stored search matches.
    #[arg(long)]
    fresh: bool,
    /// Where the tables and plots go.
    #[arg(long, default_value = "tune")]
    out: PathBuf,
    /// Write the best setting into the config (one variant and one objective only).
    #[arg(long)]
    write: bool,
    /// Measure nothing: replay this many searches per strategy against a surrogate of
    /// every measurement stored for the variant and objective (any strategy, seed or
    /// revision), and report where their recommendations land in its landscape.
    #[arg(long)]
    replay: Option<u64>,
    /// The noise replayed measurements carry: the standard deviation of a cost's
    /// logarithm (0.07: about what remeasured settings spread by on a 2-core VM).
    #[arg(long, default_value_t = 0.07)]
    replay_noise: f64,
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum StrategyArg {
    Bayes,
    Random,
}

impl From<StrategyArg> for Strategy {
    fn from(s: StrategyArg) -> Self {
        match s {
            StrategyArg::Bayes => Strategy::Bayes,
            StrategyArg::Random => Strategy::Random,
        }
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = RuntimeConfig::from_file(&args.config)?;
    let variants = variants(&config, &args.task, args.variant.as_deref())?;
    let objectives = args.objective.objectives()?;
    anyhow::ensure!(args.budget >= 1 && args.seeds >= 1 && args.rounds >= 1, "budget, seeds and rounds must be ≥ 1");
    anyhow::ensure!(args.confirm < args.budget, "--confirm must leave part of the budget to explore");
    anyhow::ensure!(
        !args.write || (variants.len() == 1 && objectives.len() == 1),
        "--write needs one variant (--variant) and one objective (one --concurrency)"
    );
    let plan = SearchPlan {
        seeds: args.seeds,
        strategies: args.strategies.iter().map(|&s| s.into()).collect(),
        budget: args.budget,
        initial: args.initial,
        confirm: args.confirm,
    };
    anyhow::ensure!(!(args.write && args.replay.is_some()), "--replay measures nothing to --write");
    let searches = variants.len() * objectives.len() * args.seeds as usize * plan.strategies.len();
    let per_round: usize = objectives
        .iter()
        .map(|o| 1 + args.seeds as usize * plan.strategies.len() + usize::from(o.concurrency.is_some()))
        .sum();
    let remeasures = variants.len() * args.rounds * per_round;
    let steps = match args.replay {
        // A replayed search is one step: it takes milliseconds, not a measurement each.
        Some(replays) => variants.len() * objectives.len() * replays as usize * plan.strategies.len(),
        None => searches * args.budget + remeasures,
    };
    let bar = ProgressBar::new(steps as u64);
    bar.set_style(
        ProgressStyle::with_template("[{bar:30}] {pos}/{len} evaluations, {elapsed} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    let measurer = Measurer::new(MeasureSetup {
        command: MeasureCommand {
            // Found once: a rebuild replacing the file mid-run leaves this process's path dangling.
            program: std::env::current_exe().context("this program's path")?,
            args: vec!["tune-measure".into()],
        },
        config: args.config.clone(),
        task: args.task.clone(),
        seconds: args.seconds,
        warmup_seconds: args.warmup_seconds,
        image_sizes: args.image_sizes.clone(),
        paired: args.paired,
    });
    std::fs::create_dir_all(&args.out)?;
    let mut report = String::new();
    let mut best_overall = None;
    for variant in variants {
        let tuned = TunedVariant::new(&config, variant)?;
        for objective in &objectives {
            let what = format!("{} / {}", variant.name, objective.label());
            if let Some(replays) = args.replay {
                let measured_under = tuned.measured_under(objective, args.seconds, args.warmup_seconds);
                let measured = tuned.stored_measurements(&measured_under);
                let replayed = SearchPlan { seeds: replays, ..plan.clone() };
                let (section, traces) = replay_section(
                    &what,
                    objective,
                    &tuned.space,
                    &measured,
                    &replayed,
                    args.replay_noise,
                    &mut || bar.inc(1),
                )?;
                let slug = format!("{}-{}-replay", variant.name, objective.slug());
                write_convergence(&args.out, &slug, &format!("{what}: replayed"), objective, &traces)?;
                say(&bar, section.clone());
                report.push_str(&section);
                std::fs::write(args.out.join("results.md"), &report)?;
                continue;
            }
            let traces = run_searches(&tuned, objective, &plan, args.fresh, &measurer, &mut |event| match event {
                SearchEvent::Reused { strategy, seed } => {
                    bar.inc(args.budget as u64);
                    say(&bar, format!("{what}: {} seed {seed}: stored search reused", strategy.name()));
                }
                SearchEvent::Evaluated { strategy, seed, evaluation } => {
                    bar.inc(1);
                    let cost = evaluation
                        .cost
                        .map_or("failed".into(), |c| format!("{:.1} {}", objective.shown(c), objective.unit()));
                    let line = format!("{what}: {} seed {seed}: {cost}", strategy.name());
                    if bar.is_hidden() {
                        // No terminal to draw on: a line per evaluation.
                        eprintln!("[{}/{}] {line}", bar.position(), bar.length().unwrap_or(0));
                    }
                    bar.set_message(line);
                }
                _ => {}
            })?;
            bar.set_message(format!("{what}: remeasuring the best of each search"));
            let mut candidates = candidates::candidates(objective, &tuned.default, tuned.limits.max_batch, &traces);
            remeasure(&measurer, &tuned.bench(objective), &mut candidates, args.rounds, &mut || bar.inc(1));
            let slug = format!("{}-{}", variant.name, objective.slug());
            write_convergence(&args.out, &slug, &what, objective, &traces)?;
            let table = table(&what, objective, &traces, &candidates, args.rounds);
            say(&bar, table.clone());
            report.push_str(&table);
            report.push_str(&rounds_table(objective, &candidates));
            if let Some(best) = best(&candidates) {
                report.push_str(&best_remeasured(&args.task, &variant.name, best));
                let snippet = toml_snippet(&args.task, &variant.name, &best.setting);
                say(&bar, format!("best for {what}: {}\n{snippet}", best.label));
                best_overall = Some((variant.name.clone(), best.setting.clone(), best.label.clone()));
            }
            // Written as each objective ends: a long run's finished tables are kept.
            std::fs::write(args.out.join("results.md"), &report)?;
        }
    }
    bar.finish_and_clear();
    eprintln!("tables, plots and the best settings in {}", args.out.display());
    if args.write {
        let (variant, setting, label) = best_overall.context("no setting was measured: nothing to write")?;
        write_setting(&args.config, &args.task, &variant, &setting)?;
        eprintln!("wrote {label} ({}) into {}", setting.brief(), args.config.display());
    }
    Ok(())
}

/// Writes the convergence plot of `traces` as `<slug>-convergence.svg` in `out`.
fn write_convergence(
    out: &Path,
    slug: &str,
    what: &str,
    objective: &Objective,
    traces: &[SearchTrace],
) -> anyhow::Result<()> {
    let svg = plot::convergence_svg(traces, &format!("{what}: best so far"), objective.unit(), |c| objective.shown(c));
    std::fs::write(out.join(format!("{slug}-convergence.svg")), svg)?;
    Ok(())
}

/// Prints `line` above the progress bar, or plainly where there is no terminal to
/// draw the bar on (a hidden bar drops what it is asked to print).
fn say(bar: &ProgressBar, line: String) {
    if bar.is_hidden() { eprintln!("{line}") } else { bar.println(line) }
}
