//! The searches of one variant under one objective: each seed and strategy taken
//! from the store where a search with the same key was kept, else measured and
//! stored.

use super::measure::Measurer;
use super::variant::TunedVariant;
use super::{Evaluation, Objective, SearchOptions, SearchTrace, Strategy, TuneError, search};

/// The searches to run for each variant and objective.
#[derive(Clone, Debug, PartialEq)]
pub struct SearchPlan {
    /// Searches per strategy, seeded 0, 1, …
    pub seeds: u64,
    /// The strategies compared.
    pub strategies: Vec<Strategy>,
    /// Evaluations per search.
    pub budget: usize,
    /// Random points Bayesian optimisation measures before its model proposes.
    pub initial: usize,
    /// The last evaluations of each search's budget, which measure its best settings
    /// again (one each).
    pub confirm: usize,
}

impl SearchPlan {
    /// The options of the search seeded `seed`.
    pub fn options(&self, seed: u64) -> SearchOptions {
        SearchOptions { budget: self.budget, initial: self.initial, seed, confirm: self.confirm }
    }

    /// Every search, seed by seed and in each seed strategy by strategy.
    pub fn searches(&self) -> impl Iterator<Item = (u64, Strategy)> + '_ {
        (0..self.seeds).flat_map(move |seed| self.strategies.iter().map(move |&strategy| (seed, strategy)))
    }
}

/// What happened in a search, as it went.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum SearchEvent<'a> {
    /// The search of `strategy` and `seed` was taken from the store: nothing was
    /// measured.
    Reused {
        /// Its strategy.
        strategy: Strategy,
        /// Its seed.
        seed: u64,
    },
    /// The search of `strategy` and `seed` measured a setting.
    Evaluated {
        /// Its strategy.
        strategy: Strategy,
        /// Its seed.
        seed: u64,
        /// What it measured.
        evaluation: &'a Evaluation,
    },
}

/// Runs `plan`'s searches of `variant` under `objective`, each point measured by
/// `measurer`: a search stored under the same key is reused unless `fresh`; one that
/// measured something is stored. `event` hears of each search and evaluation.
pub fn run_searches(
    variant: &TunedVariant,
    objective: &Objective,
    plan: &SearchPlan,
    fresh: bool,
    measurer: &Measurer,
    event: &mut dyn FnMut(SearchEvent),
) -> Result<Vec<SearchTrace>, TuneError> {
    let bench = variant.bench(objective);
    let setup = measurer.setup();
    let measured_under = variant.measured_under(objective, setup.seconds, setup.warmup_seconds);
    let mut traces = Vec::new();
    for (seed, strategy) in plan.searches() {
        let options = plan.options(seed);
        let key = variant.search_key(&measured_under, strategy, options, measurer.pairs(objective));
        let stored = (!fresh).then(|| variant.store.load(variant.name(), &key)).flatten();
        let trace = match stored {
            Some(trace) => {
                event(SearchEvent::Reused { strategy, seed });
                trace
            }
            None => {
                let trace = search(
                    &variant.space,
                    strategy,
                    options,
                    &mut |_, setting| measurer.cost(&bench, setting),
                    &mut |evaluation| event(SearchEvent::Evaluated { strategy, seed, evaluation }),
                );
                // A search that measured nothing says nothing of the settings (the
                // machine failed, not they): it is not kept.
                if trace.best().is_some() {
                    variant
                        .store
                        .save(variant.name(), &key, &trace)
                        .map_err(|source| TuneError::Write { path: variant.store.path(variant.name()), source })?;
                }
                trace
            }
        };
        traces.push(trace);
    }
    Ok(traces)
}
