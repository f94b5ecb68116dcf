//! The replay's report (`modelless tune --replay N`): instead of measuring, N searches
//! per strategy are replayed against a surrogate of every measurement stored for the
//! variant and objective ([`super::replay`]), and the report says where each
//! strategy's recommendation lands against the best the measured landscape holds. Seconds instead of hours, so
//! a question like "is there anything left for Bayesian optimisation to find here?"
//! gets an answer over dozens of seeds rather than three.

use std::fmt::Write as _;

use modelless::ProfileKey;

use super::replay::{Replayed, Surrogate, replay};
use super::searches::SearchPlan;
use super::{Goal, KnobSpace, Objective, SearchTrace, ServingSetting, Strategy, TuneError, TuneStore};
use crate::stats::{mean_and_sd_text, median, quantile_of_sorted};

/// Settings of the space drawn to describe its landscape.
const LANDSCAPE_SAMPLES: usize = 20_000;

/// Which stored searches measured settings as `measured_under` says (the part of a
/// store key's settings that decides a measurement: objective, space, measuring
/// times), measured alone rather than paired; whatever their strategy, seed, budget
/// or revision.
#[derive(Clone, Copy, Debug)]
pub struct StoredFilter<'a> {
    /// The model file's SHA-256.
    pub model_sha256: &'a str,
    /// The device it was measured on.
    pub device: &'a str,
    /// What decided the measurements, as in a stored search's key.
    pub measured_under: &'a serde_json::Value,
}

impl StoredFilter<'_> {
    fn matches(&self, key: &ProfileKey) -> bool {
        let Ok(stored) = serde_json::from_str::<serde_json::Value>(&key.settings) else { return false };
        key.model_sha256 == self.model_sha256
            && key.device == self.device
            && stored.get("paired_with").is_none()
            && self
                .measured_under
                .as_object()
                .is_some_and(|fields| fields.iter().all(|(k, v)| stored.get(k) == Some(v)))
    }

    /// Every successful measurement of the matching searches in `store`.
    pub fn measurements(&self, store: &TuneStore, variant: &str) -> Vec<(ServingSetting, f64)> {
        store
            .all(variant)
            .into_iter()
            .filter(|(key, _)| self.matches(key))
            .flat_map(|(_, trace)| trace.evaluations)
            .filter_map(|e| Some((e.setting, e.cost?)))
            .collect()
    }
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{Evaluation, PreferredSizes, SearchOptions, SpaceLimits};

    #[test]
    fn only_searches_of_the_same_objective_space_and_times_measured_alone_are_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let store = TuneStore::new(dir.path());
        let space = KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false });
        let setting = ServingSetting {
            max_batch_size: 4,
            max_queue_delay_us: 0,
            preferred_batch_sizes: PreferredSizes::None,
            instances: 1,
            intra_op_threads: 1,
            one_run_at_a_time: false,
            spinning: false,
            preprocessing_threads: None,
        };
        let measured_under = serde_json::json!({"objective": {"concurrency": 8}, "limits": space.limits(),
            "seconds": 3, "warmup_seconds": 1});
        let mut searched = measured_under.clone();
        searched["strategy"] = "bayes".into();
        searched["revision"] = 3.into();
        let stored = |settings: serde_json::Value, cost: f64| {
            let key = ProfileKey { model_sha256: "ab".into(), device: "cpu".into(), settings: settings.to_string() };
            let evaluation =
                Evaluation { point: space.encode(&setting), setting: setting.clone(), cost: Some(cost), error: None };
            let trace = SearchTrace {
                strategy: Strategy::Random,
                options: SearchOptions { budget: 1, initial: 1, seed: cost as u64, confirm: 0 },
                evaluations: vec![evaluation],
            };
            store.save("v", &key, &trace).unwrap();
        };
        let with = |field: &str, value: serde_json::Value| {
            let mut settings = searched.clone();
            settings[field] = value;
            settings
        };
        stored(with("strategy", "random".into()), 1.0);
        stored(with("revision", 1.into()), 2.0);
        stored(with("objective", serde_json::json!({"concurrency": 32})), 3.0);
        stored(with("seconds", 5.into()), 4.0);
        stored(with("paired_with", serde_json::json!(setting)), 5.0);
        let filter = StoredFilter { model_sha256: "ab", device: "cpu", measured_under: &measured_under };
        let mut costs: Vec<f64> = filter.measurements(&store, "v").into_iter().map(|(_, c)| c).collect();
        costs.sort_by(f64::total_cmp);
        assert_eq!(costs, vec![1.0, 2.0], "any strategy or revision; not another objective, time or pairing");
        let other_model = StoredFilter { model_sha256: "cd", ..filter };
        assert!(other_model.measurements(&store, "v").is_empty());
    }
}
