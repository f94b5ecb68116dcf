//! The search loop: a budget of evaluations of an objective (lower is better) over a
//! [`KnobSpace`], proposed either at random or by Bayesian optimisation (a Gaussian
//! process over what was measured, and the point of highest expected improvement).
//! Both draw their first points from the same seeded generator, so that with the
//! same seed they start from the same measurements. The model's proposal is in
//! [`super::bayes`].

use rand::SeedableRng;
use rand::rngs::StdRng;
use serde::{Deserialize, Serialize};

use super::bayes;
use super::evaluation::Evaluation;
use super::space::{KnobSpace, ServingSetting};

/// How the next point is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Strategy {
    /// Gaussian process and expected improvement, after a few random points.
    Bayes,
    /// Uniformly at random: the baseline.
    Random,
}

impl Strategy {
    /// Its name in tables and files.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::Bayes => "bayes",
            Strategy::Random => "random",
        }
    }

    /// The revision of how it proposes points, part of a stored search's key: a
    /// search another revision made is not reused as if this one had.
    pub fn revision(self) -> u32 {
        match self {
            Strategy::Bayes => bayes::REVISION,
            Strategy::Random => 1,
        }
    }
}

/// The budget and seed of one search.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchOptions {
    /// Evaluations in all.
    pub budget: usize,
    /// Random points Bayesian optimisation measures before its model proposes any.
    pub initial: usize,
    /// Seed of the random points (and of the optimiser's own choices).
    pub seed: u64,
    /// The last evaluations of the budget that measure again the best settings found
    /// before them, one each, so that the recommendation is not a lucky measurement.
    #[serde(default)]
    pub confirm: usize,
}

/// A search as it went: every evaluation in order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchTrace {
    /// How it chose its points.
    pub strategy: Strategy,
    /// Its budget and seed.
    pub options: SearchOptions,
    /// What it measured, in order.
    pub evaluations: Vec<Evaluation>,
}

/// What a search recommends: a setting and the mean of its measurements.
#[derive(Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The setting.
    pub setting: ServingSetting,
    /// The mean cost of its measurements.
    pub cost: f64,
    /// How often it was measured.
    pub measurements: usize,
}

impl SearchTrace {
    /// The setting of lowest mean cost among those measured more than once (the
    /// confirmed ones), or the single lowest measurement where none was; a setting
    /// with a failed measurement is not recommended.
    pub fn best(&self) -> Option<Recommendation> {
        let mut settings: Vec<(&ServingSetting, Vec<Option<f64>>)> = Vec::new();
        for e in &self.evaluations {
            match settings.iter_mut().find(|(s, _)| **s == e.setting) {
                Some((_, costs)) => costs.push(e.cost),
                None => settings.push((&e.setting, vec![e.cost])),
            }
        }
        let candidates: Vec<Recommendation> = settings
            .into_iter()
            .filter_map(|(setting, costs)| {
                let measured: Option<Vec<f64>> = costs.iter().copied().collect();
                let measured = measured?;
                let cost = measured.iter().sum::<f64>() / measured.len() as f64;
                Some(Recommendation { setting: setting.clone(), cost, measurements: measured.len() })
            })
            .collect();
        let confirmed = candidates.iter().any(|c| c.measurements > 1);
        candidates.into_iter().filter(|c| !confirmed || c.measurements > 1).min_by(|a, b| a.cost.total_cmp(&b.cost))
    }

    /// After each evaluation, the lowest cost measured so far (`None` until one
    /// succeeded): the convergence curve.
    pub fn best_so_far(&self) -> Vec<Option<f64>> {
        let mut best: Option<f64> = None;
        self.evaluations
            .iter()
            .map(|e| {
                if let Some(cost) = e.cost {
                    best = Some(best.map_or(cost, |b| b.min(cost)));
                }
                best
            })
            .collect()
    }
}

/// The points of the `count` lowest costs in `done`, one per setting, lowest first.
fn best_points(done: &[Evaluation], count: usize) -> Vec<Vec<f64>> {
    let mut measured: Vec<&Evaluation> = done.iter().filter(|e| e.cost.is_some()).collect();
    measured.sort_by(|a, b| cost_order(a.cost, b.cost));
    let mut chosen: Vec<&Evaluation> = Vec::new();
    for e in measured {
        if chosen.len() < count && !chosen.iter().any(|c| c.setting == e.setting) {
            chosen.push(e);
        }
    }
    chosen.into_iter().map(|e| e.point.clone()).collect()
}

fn cost_order(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    a.unwrap_or(f64::INFINITY).total_cmp(&b.unwrap_or(f64::INFINITY))
}

/// Runs a search of `options.budget` evaluations of `objective` over `space`.
/// `objective` gets the evaluation's index and its setting; a failed measurement is
/// recorded with its reason and the search goes on. `progress` hears of each
/// evaluation as it ends.
pub fn search(
    space: &KnobSpace,
    strategy: Strategy,
    options: SearchOptions,
    objective: &mut dyn FnMut(usize, &ServingSetting) -> Result<f64, String>,
    progress: &mut dyn FnMut(&Evaluation),
) -> SearchTrace {
    let mut proposer = Proposer::new(space, strategy, options);
    let mut trace = SearchTrace { strategy, options, evaluations: Vec::new() };
    let exploring = options.budget.saturating_sub(options.confirm);
    let mut to_confirm = Vec::new();
    for index in 0..options.budget {
        if index == exploring {
            to_confirm = proposer.to_confirm(&trace.evaluations, options.confirm);
            to_confirm.reverse();
        }
        let point = match to_confirm.pop() {
            Some(point) => point,
            None => proposer.propose(&trace.evaluations),
        };
        let setting = space.decode(&point);
        let (cost, error) = match objective(index, &setting) {
            Ok(cost) if cost.is_finite() => (Some(cost), None),
            Ok(cost) => (None, Some(format!("the objective measured {cost}"))),
            Err(e) => (None, Some(e)),
        };
        let evaluation = Evaluation { point, setting, cost, error };
        progress(&evaluation);
        trace.evaluations.push(evaluation);
    }
    trace
}

/// Chooses the next point from what was measured.
struct Proposer<'a> {
    space: &'a KnobSpace,
    strategy: Strategy,
    options: SearchOptions,
    rng: StdRng,
}

impl<'a> Proposer<'a> {
    fn new(space: &'a KnobSpace, strategy: Strategy, options: SearchOptions) -> Self {
        Proposer { space, strategy, options, rng: StdRng::seed_from_u64(options.seed) }
    }

    /// The `count` settings to measure again: those of lowest fitted cost for
    /// Bayesian optimisation (the model has seen every measurement, and weighs a
    /// lucky one against its neighbours), those of lowest measurement for random
    /// search (it has no model).
    fn to_confirm(&self, done: &[Evaluation], count: usize) -> Vec<Vec<f64>> {
        let fitted = match self.strategy {
            Strategy::Bayes => bayes::lowest_fitted(self.space, done, count),
            Strategy::Random => None,
        };
        fitted.unwrap_or_else(|| best_points(done, count))
    }

    fn propose(&mut self, done: &[Evaluation]) -> Vec<f64> {
        // Drawn whichever strategy proposes, so that both take the same first points.
        let random = self.space.sample(&mut self.rng);
        if self.strategy == Strategy::Random || done.len() < self.options.initial.max(2) {
            return random;
        }
        // The model's candidates come from a generator of their own, seeded per
        // proposal: a search is repeatable, and its random points stay those of
        // random search with the same seed.
        let mut candidates =
            StdRng::seed_from_u64(self.options.seed.wrapping_mul(1_000_003).wrapping_add(done.len() as u64));
        bayes::propose(self.space, done, &mut candidates).unwrap_or(random)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::space::{PreferredSizes, SpaceLimits};

    fn space() -> KnobSpace {
        KnobSpace::new(SpaceLimits { max_batch: 32, cores: 2, images: false, gpu: false })
    }

    /// A smooth bowl over the space with its bottom (cost 1) at batch 12, a 3 ms
    /// delay, preferring powers of two, 2 instances, 3 threads, taking turns, not
    /// spinning: far from the corners a random point lands on.
    fn bowl(setting: &ServingSetting) -> f64 {
        let batch = (setting.max_batch_size as f64 - 12.0) / 8.0;
        let delay = (setting.max_queue_delay_us as f64 - 3000.0) / 2500.0;
        let instances = setting.instances as f64 - 2.0;
        let threads = setting.intra_op_threads as f64 - 3.0;
        let preferred = if setting.preferred_batch_sizes == PreferredSizes::PowersOfTwo { 0.0 } else { 0.5 };
        let switches = f64::from(u8::from(!setting.one_run_at_a_time) + u8::from(setting.spinning)) * 0.5;
        1.0 + batch * batch + delay * delay + instances * instances + threads * threads + preferred + switches
    }

    fn best_of(strategy: Strategy, seed: u64, budget: usize) -> (f64, usize) {
        let options = SearchOptions { budget, initial: 5, seed, confirm: 0 };
        let mut calls = 0;
        let trace = search(
            &space(),
            strategy,
            options,
            &mut |_, setting| {
                calls += 1;
                Ok(bowl(setting))
            },
            &mut |_| {},
        );
        assert_eq!(trace.evaluations.len(), budget);
        (trace.best().map_or(f64::INFINITY, |r| r.cost), calls)
    }

    #[test]
    fn bayesian_optimisation_finds_a_known_optimum_more_often_than_random_search() {
        let (budget, seeds) = (20, 6);
        let near = |cost: f64| cost < 1.6;
        let (mut bayes_found, mut random_found, mut bayes_sum, mut random_sum) = (0, 0, 0.0, 0.0);
        for seed in 0..seeds {
            let (bayes, calls) = best_of(Strategy::Bayes, seed, budget);
            assert_eq!(calls, budget, "one objective call per evaluation");
            let (random, _) = best_of(Strategy::Random, seed, budget);
            bayes_found += usize::from(near(bayes));
            random_found += usize::from(near(random));
            bayes_sum += bayes;
            random_sum += random;
        }
        assert!(
            bayes_found > random_found && bayes_sum < random_sum,
            "near the optimum: bayes {bayes_found}, random {random_found} of {seeds}; mean best: bayes {:.2}, random {:.2}",
            bayes_sum / seeds as f64,
            random_sum / seeds as f64
        );
    }

    #[test]
    fn both_strategies_start_from_the_same_points_and_a_failure_does_not_end_the_search() {
        let options = SearchOptions { budget: 8, initial: 4, seed: 3, confirm: 0 };
        let run = |strategy| {
            search(
                &space(),
                strategy,
                options,
                &mut |index, setting| if index == 1 { Err("did not load".into()) } else { Ok(bowl(setting)) },
                &mut |_| {},
            )
        };
        let (bayes, random) = (run(Strategy::Bayes), run(Strategy::Random));
        let first = |t: &SearchTrace| t.evaluations[..4].iter().map(|e| e.setting.clone()).collect::<Vec<_>>();
        assert_eq!(first(&bayes), first(&random));
        assert_eq!(bayes.evaluations[1].error.as_deref(), Some("did not load"));
        assert_eq!(bayes.evaluations.len(), 8, "the search went on after the failure");
        let curve = bayes.best_so_far();
        assert!(curve.windows(2).all(|w| cost_order(w[1], w[0]).is_le()), "{curve:?}");
        assert_eq!(curve.last().copied().flatten(), bayes.best().map(|r| r.cost));
    }

    #[test]
    fn the_last_evaluations_confirm_the_best_and_the_confirmed_mean_is_recommended() {
        // A noisy objective: the bowl, but the first measurement of each setting is
        // flattered by a luck that fades, so the lowest single measurement misleads.
        let options = SearchOptions { budget: 12, initial: 12, seed: 5, confirm: 3 };
        let mut seen: Vec<ServingSetting> = Vec::new();
        let trace = search(
            &space(),
            Strategy::Random,
            options,
            &mut |index, setting| {
                let first = !seen.contains(setting);
                seen.push(setting.clone());
                let luck = if first && index % 3 == 0 { 0.5 } else { 1.0 };
                Ok(bowl(setting) * luck)
            },
            &mut |_| {},
        );
        let explored = &trace.evaluations[..9];
        let confirmed = &trace.evaluations[9..];
        let expected = best_points(explored, 3);
        assert_eq!(confirmed.iter().map(|e| e.point.clone()).collect::<Vec<_>>(), expected);
        let best = trace.best().unwrap_or_else(|| panic!("no recommendation: {trace:?}"));
        assert_eq!(best.measurements, 2, "only confirmed settings are recommended");
        let mean_of = |s: &ServingSetting| {
            let costs: Vec<f64> = trace.evaluations.iter().filter(|e| &e.setting == s).filter_map(|e| e.cost).collect();
            costs.iter().sum::<f64>() / costs.len() as f64
        };
        assert!((best.cost - mean_of(&best.setting)).abs() < 1e-12);
        assert!(confirmed.iter().all(|e| mean_of(&e.setting) >= best.cost), "{best:?}");
    }

    #[test]
    fn bayesian_optimisation_confirms_the_settings_its_model_fits_lowest() {
        let options = SearchOptions { budget: 14, initial: 5, seed: 2, confirm: 3 };
        let trace = search(&space(), Strategy::Bayes, options, &mut |_, setting| Ok(bowl(setting)), &mut |_| {});
        let (explored, confirmed) = trace.evaluations.split_at(11);
        let expected =
            bayes::lowest_fitted(&space(), explored, 3).unwrap_or_else(|| panic!("no model of {explored:?}"));
        assert_eq!(confirmed.iter().map(|e| e.point.clone()).collect::<Vec<_>>(), expected);
        assert!(confirmed.iter().all(|c| explored.iter().any(|e| e.setting == c.setting)), "each measured before");
    }
}
