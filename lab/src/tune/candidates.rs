//! What is remeasured after the searches: the default, each search's recommendation
//! and, for closed loops, the model alone as the reference, in interleaved rounds.

use super::measure::{Bench, Measurer};
use super::{Objective, SearchTrace, ServingSetting, Strategy};
use crate::stats::median;

/// What a remeasured candidate is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Role {
    /// The setting the config serves with.
    Default,
    /// A search's recommendation.
    Found(Strategy),
    /// The variant's sessions alone, with no serving around them: the reference.
    ModelAlone,
}

/// One thing remeasured: a label and its setting.
#[derive(Clone, Debug, PartialEq)]
pub struct Candidate {
    /// Its name in the tables.
    pub label: String,
    /// What it is.
    pub role: Role,
    /// What it sets.
    pub setting: ServingSetting,
    /// Its cost in each round (`None` where that round's measurement failed).
    pub costs: Vec<Option<f64>>,
}

impl Candidate {
    /// The rounds it was measured in.
    pub fn measured(&self) -> Vec<f64> {
        self.costs.iter().flatten().copied().collect()
    }

    /// The median of its measured rounds.
    pub fn median(&self) -> Option<f64> {
        median(&self.measured())
    }
}

/// What is remeasured: the default, each search's recommendation and, for closed
/// loops, the model alone (at up to `max_batch` rows) as the reference.
pub fn candidates(
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
/// the machine's drift falls on all of them alike; `measured` is called after each
/// measurement.
pub fn remeasure(
    measurer: &Measurer,
    bench: &Bench,
    candidates: &mut [Candidate],
    rounds: usize,
    measured: &mut dyn FnMut(),
) {
    let n = candidates.len();
    for round in 0..rounds {
        for i in 0..n {
            let candidate = &mut candidates[(i + round) % n];
            let cost = match candidate.role {
                Role::ModelAlone => measurer.model_alone_ms(bench, &candidate.setting),
                _ => measurer.cost(bench, &candidate.setting),
            };
            candidate.costs.push(cost.ok());
            measured();
        }
    }
}

/// The setting of lowest remeasured median, the model alone aside (it serves
/// nothing); `None` where none was measured.
pub fn best(candidates: &[Candidate]) -> Option<&Candidate> {
    candidates
        .iter()
        .filter(|c| c.role != Role::ModelAlone && c.median().is_some())
        .min_by(|a, b| a.median().unwrap_or(f64::INFINITY).total_cmp(&b.median().unwrap_or(f64::INFINITY)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tune::{KnobSpace, SpaceLimits};

    #[test]
    fn a_setting_s_median_leaves_its_failed_rounds_out() {
        let candidate = Candidate {
            label: "default".into(),
            role: Role::Default,
            setting: KnobSpace::new(SpaceLimits { max_batch: 8, cores: 2, images: false, gpu: false }).decode(&[]),
            costs: vec![Some(30.0), None, Some(20.0)],
        };
        assert_eq!(candidate.measured(), vec![30.0, 20.0], "a failed round is left out");
        assert_eq!(candidate.median(), Some(30.0));
    }
}
