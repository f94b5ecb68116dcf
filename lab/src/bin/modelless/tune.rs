//! `modelless tune`: searches the serving settings of a task's variants for the lowest
//! cost an objective measures, by Bayesian optimisation and by random search with the
//! same budget, several seeds each; remeasures the best of each search and the
//! configured default in interleaved rounds; writes a table, convergence plots and
//! the best setting as TOML (`--write` puts it into the config).
//!
//! Each setting is measured by `modelless tune-measure` ([`crate::tune_measure`]) in
//! a process of its own, as [`modelless_lab::tune::measure`] says.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use indicatif::{ProgressBar, ProgressStyle};
use modelless::profile::{file_sha256, store_beside};
use modelless::{ProfileKey, RuntimeConfig, VariantConfig};
use modelless_lab::stats::{extremes, mean_and_sd, mean_and_sd_text, median, relative_spread};
use modelless_lab::tune::measure::{Bench, MeasureCommand, MeasureSetup, Measurer};
use modelless_lab::tune::{
    Goal, KnobSpace, Objective, SearchOptions, SearchTrace, ServingSetting, SpaceLimits, Strategy, TuneStore, plot,
    search,
};

use crate::tune_replay::{ReplayPlan, StoredFilter, replay_section};
use crate::tune_write::write_setting;

/// What a setting is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum GoalArg {
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

/// What a remeasured candidate is.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Role {
    /// The setting the config serves with.
    Default,
    /// A search's recommendation.
    Found(Strategy),
    /// The variant's sessions alone, with no serving around them: the reference.
    ModelAlone,
}

/// One thing remeasured: a label and its setting.
struct Candidate {
    label: String,
    role: Role,
    setting: ServingSetting,
    /// Its cost in each round.
    costs: Vec<Option<f64>>,
}

impl Candidate {
    /// The rounds it was measured in.
    fn measured(&self) -> Vec<f64> {
        self.costs.iter().flatten().copied().collect()
    }

    fn median(&self) -> Option<f64> {
        median(&self.measured())
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = RuntimeConfig::from_file(&args.config)?;
    let task = config.tasks.iter().find(|t| t.name == args.task).with_context(|| format!("no task `{}`", args.task))?;
    let variants: Vec<&VariantConfig> = match &args.variant {
        Some(name) => vec![
            task.variants
                .iter()
                .find(|v| &v.name == name)
                .with_context(|| format!("task `{}` has no variant `{name}`", args.task))?,
        ],
        None => task.variants.iter().collect(),
    };
    let objectives = args.objective.objectives()?;
    anyhow::ensure!(args.budget >= 1 && args.seeds >= 1 && args.rounds >= 1, "budget, seeds and rounds must be ≥ 1");
    anyhow::ensure!(args.confirm < args.budget, "--confirm must leave part of the budget to explore");
    anyhow::ensure!(
        !args.write || (variants.len() == 1 && objectives.len() == 1),
        "--write needs one variant (--variant) and one objective (one --concurrency)"
    );
    let strategies: Vec<Strategy> = args.strategies.iter().map(|&s| s.into()).collect();
    anyhow::ensure!(!(args.write && args.replay.is_some()), "--replay measures nothing to --write");
    let searches = variants.len() * objectives.len() * args.seeds as usize * strategies.len();
    let per_round: usize = objectives
        .iter()
        .map(|o| 1 + args.seeds as usize * strategies.len() + usize::from(o.concurrency.is_some()))
        .sum();
    let remeasures = variants.len() * args.rounds * per_round;
    let steps = match args.replay {
        // A replayed search is one step: it takes milliseconds, not a measurement each.
        Some(replays) => variants.len() * objectives.len() * replays as usize * strategies.len(),
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
        let sha = file_sha256(&variant.path).with_context(|| format!("reading {}", variant.path.display()))?;
        let safe = store_beside(&variant.path).max_safe_batch(&variant.name, &sha);
        let limits = SpaceLimits::new(safe, variant.preprocess.is_some());
        let space = KnobSpace::new(limits.clone());
        let default = ServingSetting::of(&config, variant, &limits);
        let store = TuneStore::new(variant.path.parent().unwrap_or(Path::new(".")));
        for objective in &objectives {
            let what = format!("{} / {}", variant.name, objective.label());
            let bench = Bench { variant: &variant.name, objective, reference: &default };
            // What decides what a setting measures; a search's key adds how it searched.
            let measured_under = serde_json::json!({
                "objective": objective, "limits": limits,
                "seconds": args.seconds, "warmup_seconds": args.warmup_seconds,
            });
            if let Some(replays) = args.replay {
                let filter = StoredFilter {
                    model_sha256: &sha,
                    device: &variant.device.name(),
                    measured_under: &measured_under,
                };
                let plan = ReplayPlan {
                    seeds: replays,
                    strategies: strategies.clone(),
                    budget: args.budget,
                    initial: args.initial,
                    confirm: args.confirm,
                    noise: args.replay_noise,
                };
                let measured = filter.measurements(&store, &variant.name);
                let (section, traces) = replay_section(&what, objective, &space, &measured, &plan, &bar)?;
                let slug = format!("{}-{}-replay", variant.name, objective.slug());
                write_convergence(&args.out, &slug, &format!("{what}: replayed"), objective, &traces)?;
                say(&bar, section.clone());
                report.push_str(&section);
                std::fs::write(args.out.join("results.md"), &report)?;
                continue;
            }
            let mut traces = Vec::new();
            for seed in 0..args.seeds {
                for &strategy in &strategies {
                    let options =
                        SearchOptions { budget: args.budget, initial: args.initial, seed, confirm: args.confirm };
                    let mut settings = measured_under.clone();
                    settings["strategy"] = serde_json::json!(strategy);
                    settings["revision"] = serde_json::json!(strategy.revision());
                    settings["options"] = serde_json::json!(options);
                    if measurer.pairs(objective) {
                        // Paired costs are ratios to the default, scaled: they hold for that default only.
                        settings["paired_with"] = serde_json::json!(default);
                    }
                    let key = ProfileKey {
                        model_sha256: sha.clone(),
                        device: variant.device.name(),
                        settings: settings.to_string(),
                    };
                    let stored = (!args.fresh).then(|| store.load(&variant.name, &key)).flatten();
                    let trace = match stored {
                        Some(trace) => {
                            bar.inc(args.budget as u64);
                            say(&bar, format!("{what}: {} seed {seed}: stored search reused", strategy.name()));
                            trace
                        }
                        None => {
                            let trace = search(
                                &space,
                                strategy,
                                options,
                                &mut |_, setting| measurer.cost(&bench, setting),
                                &mut |evaluation| {
                                    bar.inc(1);
                                    let cost = evaluation.cost.map_or("failed".into(), |c| {
                                        format!("{:.1} {}", objective.shown(c), objective.unit())
                                    });
                                    let line = format!("{what}: {} seed {seed}: {cost}", strategy.name());
                                    if bar.is_hidden() {
                                        // No terminal to draw on: a line per evaluation.
                                        eprintln!("[{}/{}] {line}", bar.position(), bar.length().unwrap_or(0));
                                    }
                                    bar.set_message(line);
                                },
                            );
                            // A search that measured nothing says nothing of the settings
                            // (the machine failed, not they): it is not kept.
                            if trace.best().is_some() {
                                store.save(&variant.name, &key, &trace)?;
                            }
                            trace
                        }
                    };
                    traces.push(trace);
                }
            }
            bar.set_message(format!("{what}: remeasuring the best of each search"));
            let mut candidates = candidates(objective, &default, limits.max_batch, &traces);
            remeasure(&measurer, &bench, &mut candidates, args.rounds, &bar);
            let slug = format!("{}-{}", variant.name, objective.slug());
            write_convergence(&args.out, &slug, &what, objective, &traces)?;
            let table = table(&what, objective, &traces, &candidates, args.rounds);
            say(&bar, table.clone());
            report.push_str(&table);
            report.push_str(&rounds_table(objective, &candidates));
            if let Some(best) = candidates
                .iter()
                .filter(|c| c.role != Role::ModelAlone && c.median().is_some())
                .min_by(|a, b| a.median().unwrap_or(f64::INFINITY).total_cmp(&b.median().unwrap_or(f64::INFINITY)))
            {
                let snippet = toml_snippet(&args.task, &variant.name, &best.setting);
                let _ = writeln!(
                    report,
                    "Best remeasured: {} ({}).\n\n```toml\n{snippet}```\n",
                    best.label,
                    best.setting.brief()
                );
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

/// What is remeasured: the default, each search's recommendation and, for closed
/// loops, the model alone as the reference.
fn candidates(
    objective: &Objective,
    default: &ServingSetting,
    max_batch: usize,
    traces: &[SearchTrace],
) -> Vec<Candidate> {
    let mut candidates =
        vec![Candidate { label: "default".into(), role: Role::Default, setting: default.clone(), costs: Vec::new() }];
    for trace in traces {
        if let Some(best) = trace.best() {
            candidates.push(Candidate {
                label: format!("{} seed {}", trace.strategy.name(), trace.options.seed),
                role: Role::Found(trace.strategy),
                setting: best.setting,
                costs: Vec::new(),
            });
        }
    }
    if let Some(clients) = objective.concurrency {
        let setting = ServingSetting { max_batch_size: max_batch.max(1), ..default.clone() };
        let label = format!("model alone ({clients} clients ÷ its best rows/s)");
        candidates.push(Candidate { label, role: Role::ModelAlone, setting, costs: Vec::new() });
    }
    candidates
}

/// Measures the candidates in `rounds` rounds, each round in another order, so that
/// the machine's drift falls on all of them alike.
fn remeasure(measurer: &Measurer, bench: &Bench, candidates: &mut [Candidate], rounds: usize, bar: &ProgressBar) {
    let n = candidates.len();
    for round in 0..rounds {
        for i in 0..n {
            let candidate = &mut candidates[(i + round) % n];
            let cost = match candidate.role {
                Role::ModelAlone => measurer.model_alone_ms(bench, &candidate.setting),
                _ => measurer.cost(bench, &candidate.setting),
            };
            candidate.costs.push(cost.ok());
            bar.inc(1);
        }
    }
}

/// The table of one objective: per strategy the best each search found and its
/// remeasured median (mean ± sd over seeds), the default, and the noise.
fn table(what: &str, objective: &Objective, traces: &[SearchTrace], candidates: &[Candidate], rounds: usize) -> String {
    let unit = objective.unit();
    let shown = |v: f64| objective.shown(v);
    let mut s = format!(
        "\n### {what}\n\n| setting | best found in the search, {unit} | remeasured (median of {rounds} interleaved rounds), {unit} | searches |\n|---|---:|---:|---:|\n"
    );
    let mut remeasured_by = std::collections::BTreeMap::new();
    for strategy in [Strategy::Bayes, Strategy::Random] {
        let found: Vec<f64> =
            traces.iter().filter(|t| t.strategy == strategy).filter_map(|t| Some(t.best()?.cost)).map(shown).collect();
        let again: Vec<f64> = candidates
            .iter()
            .filter(|c| c.role == Role::Found(strategy))
            .filter_map(Candidate::median)
            .map(shown)
            .collect();
        if found.is_empty() {
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} |",
            strategy.name(),
            mean_and_sd_text(&found),
            mean_and_sd_text(&again),
            found.len()
        );
        remeasured_by.insert(strategy, mean_and_sd(&again).map(|(m, _)| m));
    }
    let default = candidates.iter().find(|c| c.role == Role::Default);
    let model_alone = candidates.iter().find(|c| c.role == Role::ModelAlone).and_then(Candidate::median);
    let default_median = default.and_then(Candidate::median).map(shown);
    let _ = writeln!(s, "| default | – | {} | – |", default_median.map_or("failed".into(), |m| format!("{m:.2}")));
    if let Some(alone) = model_alone {
        let _ = writeln!(s, "| model alone, no serving (reference) | – | {:.2} | – |", shown(alone));
    }
    // Noise: how far one setting's measurements spread over the rounds, as a share of
    // their median (the default's, and the median of every candidate's).
    let spreads: Vec<f64> = candidates
        .iter()
        .filter(|c| c.role != Role::ModelAlone)
        .filter_map(|c| relative_spread(&c.measured()))
        .collect();
    let percent = |share: Option<f64>| share.map_or("–".into(), |m| format!("{:.1} %", m * 100.0));
    let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => format!("{:.3}", a / b),
        _ => "–".into(),
    };
    let bayes = remeasured_by.get(&Strategy::Bayes).copied().flatten();
    let random = remeasured_by.get(&Strategy::Random).copied().flatten();
    let _ = writeln!(
        s,
        "\nRemeasured, bayes ÷ random: {}; bayes ÷ default: {} ({}). Noise: a setting's measurements spread \
         over the rounds by {} of their median (the default's: {}).\n",
        ratio(bayes, random),
        ratio(bayes, default_median),
        if objective.lower_is_better() { "below 1 is better" } else { "above 1 is better" },
        median(&spreads).map_or("–".into(), |m| format!("{} (median)", percent(Some(m)))),
        percent(default.and_then(|d| relative_spread(&d.measured()))),
    );
    let better = |ratio: f64| if objective.lower_is_better() { ratio < 1.0 } else { ratio > 1.0 };
    for (what, a, b) in [
        ("bayes ÷ random", Role::Found(Strategy::Bayes), Role::Found(Strategy::Random)),
        ("bayes ÷ default", Role::Found(Strategy::Bayes), Role::Default),
    ] {
        let ratios = per_round_ratios(candidates, a, b);
        if let Some(line) = describe_ratios(what, &ratios, better) {
            let _ = writeln!(s, "{line}");
        }
    }
    s.push('\n');
    if let Some(alone) = model_alone.map(shown) {
        let _ = writeln!(
            s,
            "The model alone (its sessions run back to back at the best batch size the clients can fill, \
             with no queue, batching or preprocessing) would give {alone:.2} {unit}: default ÷ model alone {}, \
             bayes ÷ model alone {}. No setting can come much below it.\n",
            ratio(default_median, Some(alone)),
            ratio(bayes, Some(alone)),
        );
    }
    s
}

/// Per round, the mean cost of the candidates in role `a` over that of those in role
/// `b`, both measured in that round: what the machine did in a round falls on both,
/// so these ratios spread less than the settings' own rounds do. Rounds where either
/// side has no measurement are left out.
fn per_round_ratios(candidates: &[Candidate], a: Role, b: Role) -> Vec<f64> {
    let rounds = candidates.iter().map(|c| c.costs.len()).max().unwrap_or(0);
    let mean_in = |role: Role, round: usize| {
        let costs: Vec<f64> = candidates
            .iter()
            .filter(|c| c.role == role)
            .filter_map(|c| c.costs.get(round).copied().flatten())
            .collect();
        (!costs.is_empty()).then(|| costs.iter().sum::<f64>() / costs.len() as f64)
    };
    (0..rounds)
        .filter_map(|round| Some(mean_in(a, round)? / mean_in(b, round)?))
        .filter(|ratio| ratio.is_finite())
        .collect()
}

/// One line saying how per-round ratios fell: their median, range, and in how many
/// rounds the first side was the better.
fn describe_ratios(what: &str, ratios: &[f64], better: impl Fn(f64) -> bool) -> Option<String> {
    let middle = median(ratios)?;
    let (low, high) = extremes(ratios);
    let won = ratios.iter().filter(|&&r| better(r)).count();
    Some(format!(
        "Per round, {what}: median {middle:.3}, from {low:.3} to {high:.3}; better in {won} of {} rounds.",
        ratios.len()
    ))
}

/// Every remeasured setting with its cost in each round, in the order the rounds
/// measured them: where a setting's rounds split, or the default moves between
/// runs, it shows here and not in the medians.
fn rounds_table(objective: &Objective, candidates: &[Candidate]) -> String {
    let rounds = candidates.iter().map(|c| c.costs.len()).max().unwrap_or(0);
    let mut s = format!("Every remeasured setting, {} per round:\n\n| setting | what it sets |", objective.unit());
    for round in 1..=rounds {
        let _ = write!(s, " round {round} |");
    }
    s.push_str(" median | spread |\n|---|---|");
    s.push_str(&"---:|".repeat(rounds + 2));
    s.push('\n');
    for c in candidates {
        let what = if c.role == Role::ModelAlone { "its sessions alone".into() } else { c.setting.brief() };
        let _ = write!(s, "| {} | {what} |", c.label);
        for round in 0..rounds {
            match c.costs.get(round).copied().flatten() {
                Some(cost) => {
                    let _ = write!(s, " {:.2} |", objective.shown(cost));
                }
                None => s.push_str(" failed |"),
            }
        }
        let median = c.median().map_or("–".into(), |m| format!("{:.2}", objective.shown(m)));
        let spread = relative_spread(&c.measured()).map_or("–".into(), |v| format!("{:.1} %", v * 100.0));
        let _ = writeln!(s, " {median} | {spread} |");
    }
    s.push('\n');
    s
}

/// The setting as TOML to paste into the config.
fn toml_snippet(task: &str, variant: &str, setting: &ServingSetting) -> String {
    let mut s = String::from("[onnxruntime]\n");
    let _ = writeln!(s, "intra_op_threads = {}", setting.intra_op_threads);
    let _ = writeln!(s, "one_run_at_a_time = {}", setting.one_run_at_a_time);
    let _ = writeln!(s, "spinning = {}", setting.spinning);
    if let Some(threads) = setting.preprocessing_threads {
        let _ = writeln!(s, "\n[preprocessing]\nthreads = {threads}");
    }
    let _ = writeln!(s, "\n# In [[tasks]] name = \"{task}\", [[tasks.variants]] name = \"{variant}\":");
    let _ = writeln!(s, "instances = {}", setting.instances);
    let _ = writeln!(s, "batching.max_batch_size = {}", setting.max_batch_size);
    let _ = writeln!(s, "batching.max_queue_delay_us = {}", setting.max_queue_delay_us);
    let _ = writeln!(
        s,
        "batching.preferred_batch_sizes = {:?}",
        setting.preferred_batch_sizes.sizes(setting.max_batch_size)
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_setting_s_median_leaves_its_failed_rounds_out() {
        let candidate = Candidate {
            label: "default".into(),
            role: Role::Default,
            setting: KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false }).decode(&[]),
            costs: vec![Some(30.0), None, Some(20.0)],
        };
        assert_eq!(candidate.measured(), vec![30.0, 20.0], "a failed round is left out");
        assert_eq!(candidate.median(), Some(30.0));
    }

    #[test]
    fn the_rounds_table_lists_every_setting_s_rounds_and_failures() {
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false });
        let objective =
            Objective { goal: Goal::Throughput, concurrency: None, rate: Some(100.0), slo_ms: Some(50.0), load: None };
        let candidate = |label: &str, role, costs: Vec<Option<f64>>| Candidate {
            label: label.into(),
            role,
            setting: space.decode(&[4.0, 500.0, 0.0, 2.0, 1.0, 0.0, 1.0]),
            costs,
        };
        let candidates = [
            candidate("default", Role::Default, vec![Some(-90.0), Some(-80.0), Some(-100.0)]),
            candidate("bayes seed 0", Role::Found(Strategy::Bayes), vec![Some(-95.0), None, Some(-99.0)]),
        ];
        let table = rounds_table(&objective, &candidates);
        let rows: Vec<&str> = table.lines().filter(|l| l.starts_with("| ")).collect();
        assert_eq!(rows.len(), 3, "a header and a row per setting:\n{table}");
        assert!(rows[0].contains("round 3 | median | spread"), "{table}");
        assert_eq!(
            rows[1],
            "| default | batch 4 delay 500 µs preferred None instances 2 threads 1 spin | 90.00 | 80.00 | 100.00 | 90.00 | 22.2 % |"
        );
        assert!(rows[2].contains("| 95.00 | failed | 99.00 | 95.00 | 4.2 % |"), "{}", rows[2]);
    }

    #[test]
    fn per_round_ratios_compare_sides_within_each_round_and_skip_rounds_a_side_missed() {
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false });
        let candidate =
            |role, costs: Vec<Option<f64>>| Candidate { label: String::new(), role, setting: space.decode(&[]), costs };
        let bayes = Role::Found(Strategy::Bayes);
        let random = Role::Found(Strategy::Random);
        // Round 2 is slow for everyone; round 3 lost both random searches.
        let candidates = [
            candidate(Role::Default, vec![Some(100.0), Some(150.0), Some(100.0)]),
            candidate(bayes, vec![Some(80.0), Some(120.0), Some(90.0)]),
            candidate(bayes, vec![Some(100.0), Some(150.0), None]),
            candidate(random, vec![Some(100.0), Some(150.0), None]),
            candidate(random, vec![Some(100.0), None, None]),
        ];
        let ratios = per_round_ratios(&candidates, bayes, random);
        assert_eq!(ratios, vec![0.9, 0.9], "the slow round cancels; the third has no random");
        let against_default = per_round_ratios(&candidates, bayes, Role::Default);
        assert_eq!(against_default, vec![0.9, 0.9, 0.9]);
        let line = describe_ratios("bayes ÷ default", &[0.9, 1.1, 0.95], |r| r < 1.0).unwrap();
        assert_eq!(line, "Per round, bayes ÷ default: median 0.950, from 0.900 to 1.100; better in 2 of 3 rounds.");
        assert_eq!(describe_ratios("x", &[], |r| r < 1.0), None);
    }
}
