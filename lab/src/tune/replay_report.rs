//! The replay's report (`modelless tune --replay N`): instead of measuring, N searches
//! per strategy are replayed against a surrogate of every measurement stored for the
//! variant and objective ([`super::replay`]), and the report says where each
//! strategy's recommendation lands against the best the measured landscape holds. Seconds instead of hours, so
//! a question like "is there anything left for Bayesian optimisation to find here?"
//! gets an answer over dozens of seeds rather than three.

use std::fmt::Write as _;

use super::replay::{Replayed, Surrogate, replay};
use super::searches::SearchPlan;
use super::{Goal, KnobSpace, Objective, SearchTrace, ServingSetting, Strategy, TuneError};
use crate::stats::{mean_and_sd_text, median, quantile_of_sorted};

/// Settings of the space drawn to describe its landscape.
const LANDSCAPE_SAMPLES: usize = 20_000;

/// Replays `plan`'s searches against the surrogate of `measured` over `space`, each
/// measurement with a log-normal `noise` (the standard deviation of its logarithm),
/// calling `replayed` after each search; returns the report's section and every
/// replayed search (for the convergence plot).
pub fn replay_section(
    what: &str,
    objective: &Objective,
    space: &KnobSpace,
    measured: &[(ServingSetting, f64)],
    plan: &SearchPlan,
    noise: f64,
    replayed: &mut dyn FnMut(),
) -> Result<(String, Vec<SearchTrace>), TuneError> {
    if !matches!(objective.goal, Goal::P99 | Goal::Mean) {
        return Err(TuneError::Invalid("--replay takes the latency objectives (p99, mean)".into()));
    }
    let surrogate =
        Surrogate::new(space.clone(), measured).ok_or_else(|| TuneError::NothingToReplay { what: what.to_string() })?;
    let mut outcomes: Vec<(Strategy, u64, Replayed)> = Vec::new();
    for (seed, strategy) in plan.searches() {
        // Both strategies see the same noise draws for a seed, as they draw the same first points.
        let noise_seed = seed.wrapping_mul(7919).wrapping_add(17);
        outcomes.push((strategy, seed, replay(&surrogate, strategy, plan.options(seed), noise, noise_seed)));
        replayed();
    }
    let landscape = surrogate.landscape(LANDSCAPE_SAMPLES, 1);
    let section = describe(what, &surrogate, &landscape, plan, noise, &outcomes);
    Ok((section, outcomes.into_iter().map(|(_, _, replayed)| replayed.trace).collect()))
}

fn describe(
    what: &str,
    surrogate: &Surrogate,
    landscape: &[f64],
    plan: &SearchPlan,
    noise: f64,
    outcomes: &[(Strategy, u64, Replayed)],
) -> String {
    let quantile = |q: f64| quantile_of_sorted(landscape, q).unwrap_or(f64::NAN);
    let mut text = String::new();
    let _ = writeln!(
        text,
        "## {what}: replayed\n\n{} searches per strategy ({} evaluations each; Bayesian optimisation's proposal \
         revision {}) against a surrogate of {} stored measurements, with {:.0} % measurement noise. Costs are the \
         surrogate's, without noise, in ms.\n",
        plan.seeds,
        plan.budget,
        Strategy::Bayes.revision(),
        surrogate.measurements(),
        noise * 100.0
    );
    let _ = writeln!(
        text,
        "The landscape ({LANDSCAPE_SAMPLES} settings at random): lowest {:.2}, best 1 % {:.2}, best 5 % {:.2}, \
         median {:.2}.\n",
        quantile(0.0),
        quantile(0.01),
        quantile(0.05),
        quantile(0.5)
    );
    text.push_str("| strategy | recommended | its place in the landscape | best it measured |\n|---|---:|---:|---:|\n");
    let of = |strategy: Strategy, pick: fn(&Replayed) -> Option<f64>| -> Vec<f64> {
        outcomes.iter().filter(|(s, _, _)| *s == strategy).filter_map(|(_, _, r)| pick(r)).collect()
    };
    for &strategy in &plan.strategies {
        let recommended = of(strategy, |r| r.recommended);
        let best_measured = of(strategy, |r| r.best_measured);
        let place = median(&recommended).map_or("–".into(), |m| {
            let below = landscape.partition_point(|&c| c < m);
            format!("best {:.1} % (median)", 100.0 * below as f64 / landscape.len() as f64)
        });
        let _ = writeln!(
            text,
            "| {} | {} | {place} | {} |",
            strategy.name(),
            mean_and_sd_text(&recommended),
            mean_and_sd_text(&best_measured)
        );
    }
    if let Some(line) = compare(plan, outcomes) {
        let _ = writeln!(text, "\n{line}");
    }
    text.push('\n');
    text
}

/// Bayes ÷ random over the seeds' recommendations, and in how many seeds Bayesian
/// optimisation's was the cheaper.
fn compare(plan: &SearchPlan, outcomes: &[(Strategy, u64, Replayed)]) -> Option<String> {
    let recommended = |strategy: Strategy, seed: u64| {
        outcomes.iter().find(|(s, n, _)| *s == strategy && *n == seed).and_then(|(_, _, r)| r.recommended)
    };
    let pairs: Vec<(f64, f64)> = (0..plan.seeds)
        .filter_map(|seed| Some((recommended(Strategy::Bayes, seed)?, recommended(Strategy::Random, seed)?)))
        .collect();
    if pairs.is_empty() {
        return None;
    }
    let (bayes, random): (Vec<f64>, Vec<f64>) = pairs.iter().copied().unzip();
    let ratio = bayes.iter().sum::<f64>() / random.iter().sum::<f64>();
    let better = pairs.iter().filter(|(b, r)| b < r).count();
    Some(format!(
        "bayes ÷ random {ratio:.3} (means of the recommendations); Bayesian optimisation's was the cheaper in \
         {better} of {} seeds.",
        pairs.len()
    ))
}
