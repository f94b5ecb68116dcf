//! The oracle: the bound a real policy can approach. It knows each task's arrivals
//! over the coming second, its switches cost nothing, and it serves every task with
//! the most accurate variants whose load keeps the executor at most `max_utilisation`
//! busy (every combination is tried: accuracy weighted by demand is what it maximises).
//! It prices batches as the simulated machine runs them: by the profiles, or where
//! the model was calibrated on real runs, by the calibrated times.

use std::collections::BTreeMap;

use std::time::Duration;

use modelless::policy_abi::{Decision, LatencyFit, Snapshot, TaskDecision, TaskSnapshot};
use modelless_runtime::policy::core::Action;

use super::engine::{Decider, decided};
use super::model::SimModel;

/// Knows the next second's demand; switches for free.
#[derive(Clone, Debug)]
pub struct Oracle {
    /// Highest utilisation it lets the executor reach.
    pub max_utilisation: f64,
    /// What batches cost, by task and variant, where it is not the profile's line.
    pub costs: BTreeMap<(String, String), LatencyFit>,
}

impl Default for Oracle {
    fn default() -> Self {
        Oracle { max_utilisation: 0.8, costs: BTreeMap::new() }
    }
}

impl Oracle {
    /// An oracle that knows what batches cost in `model`.
    pub fn knowing(model: &SimModel, max_utilisation: f64) -> Oracle {
        let costs = model
            .tasks
            .iter()
            .flat_map(|t| t.variants.iter().map(|v| ((t.name.clone(), v.name.clone()), v.cost_fit())))
            .collect();
        Oracle { max_utilisation, costs }
    }

    /// Share of the executor `variant` of `task` takes at `demand` requests a second,
    /// running its largest batches (the cheapest per request): `λ·(a + c/b)`.
    fn load_share(&self, task: &TaskSnapshot, variant: usize, demand: f64) -> Option<f64> {
        let v = &task.variants[variant];
        let known = self.costs.get(&(task.name.clone(), v.name.clone())).copied();
        let fit = known.or_else(|| v.profile.as_ref()?.fit)?;
        let batch = f64::from(task.active.max_batch_size.max(1));
        Some(demand * (fit.a_ms + fit.c_ms.max(0.0) / batch) / 1e3)
    }
}

/// A variant (its index) per task, where the task has one to pick.
pub type Picks = Vec<Option<usize>>;

impl Oracle {
    /// The variant per task (`None` for a task without profiled variants): the
    /// combination with the most demand-weighted accuracy under the utilisation
    /// limit, or the one that loads the machine least when none keeps under it.
    pub fn choose(&self, tasks: &[TaskSnapshot], ahead: &[f64]) -> Picks {
        let options: Vec<Vec<(usize, f64, f64)>> = tasks
            .iter()
            .zip(ahead)
            .map(|(task, &demand)| {
                (0..task.variants.len())
                    .filter_map(|v| Some((v, self.load_share(task, v, demand)?, task.variants[v].accuracy * demand)))
                    .collect()
            })
            .collect();
        // Ranked by whether it fits, then by value if it does, by load if not.
        let rank = |load: f64, value: f64| if load <= self.max_utilisation { (1, value) } else { (0, -load) };
        let mut best: Option<((u8, f64), Picks)> = None;
        let mut chosen = vec![None; tasks.len()];
        search(&options, 0, &mut chosen, 0.0, 0.0, &mut |load, value, picked| {
            let candidate = rank(load, value);
            let better = best
                .as_ref()
                .is_none_or(|(ranked, _)| candidate.0.cmp(&ranked.0).then(candidate.1.total_cmp(&ranked.1)).is_gt());
            if better {
                best = Some((candidate, picked.to_vec()));
            }
        });
        best.map_or(chosen, |(_, picked)| picked)
    }
}

/// Every combination of one option per task: `visit(load, value, variants)`.
fn search(
    options: &[Vec<(usize, f64, f64)>],
    task: usize,
    chosen: &mut Picks,
    load: f64,
    value: f64,
    visit: &mut dyn FnMut(f64, f64, &Picks),
) {
    if task == options.len() {
        visit(load, value, chosen);
        return;
    }
    if options[task].is_empty() {
        return search(options, task + 1, chosen, load, value, visit);
    }
    for &(variant, share, weighted) in &options[task] {
        chosen[task] = Some(variant);
        search(options, task + 1, chosen, load + share, value + weighted, visit);
    }
}

impl Decider for Oracle {
    fn tick(&mut self, _now: Duration, snapshot: Snapshot, ahead: &[f64]) -> Vec<Action> {
        let decision = self.decide(&snapshot, ahead);
        decided(&snapshot, &decision)
    }

    fn free_switches(&self) -> bool {
        true
    }
}

impl Oracle {
    /// Its decision on `snapshot`.
    pub fn decide(&mut self, snapshot: &Snapshot, ahead: &[f64]) -> Decision {
        let picked = self.choose(&snapshot.tasks, ahead);
        let tasks = snapshot
            .tasks
            .iter()
            .zip(picked)
            .filter_map(|(task, variant)| {
                let variant = &task.variants[variant?].name;
                let decision = TaskDecision {
                    variant: Some(variant.clone()).filter(|v| *v != task.active.variant),
                    max_queue_delay_us: Some(0).filter(|&d| d != task.active.max_queue_delay_us),
                    ..TaskDecision::keep(&task.name)
                };
                (!decision.is_empty()).then_some(decision)
            })
            .collect();
        Decision { tasks }
    }
}

#[cfg(test)]
mod tests {
    use modelless::policy_abi::{LatencyFit, ServingKnobs, VariantCost, VariantSnapshot};

    use super::*;

    /// Variants (accuracy, a ms, c ms), batches of 8.
    fn task(name: &str, variants: &[(f64, f64, f64)]) -> TaskSnapshot {
        TaskSnapshot {
            name: name.into(),
            active: ServingKnobs { variant: "v0".into(), max_batch_size: 8, ..ServingKnobs::default() },
            variants: variants
                .iter()
                .enumerate()
                .map(|(i, &(accuracy, a_ms, c_ms))| VariantSnapshot {
                    name: format!("v{i}"),
                    accuracy,
                    profile: Some(VariantCost {
                        fit: Some(LatencyFit { a_ms, c_ms, r2: 1.0 }),
                        ..VariantCost::default()
                    }),
                    ..VariantSnapshot::default()
                })
                .collect(),
            ..TaskSnapshot::default()
        }
    }

    #[test]
    fn the_most_accurate_variants_that_keep_utilisation_under_the_limit_are_chosen() {
        // Shares at 100/s: v0 0.1, v1 0.4, v2 0.9 (c/8 adds nothing here).
        let family = [(60.0, 1.0, 0.0), (70.0, 4.0, 0.0), (80.0, 9.0, 0.0)];
        let oracle = Oracle::default();
        assert_eq!(oracle.choose(&[task("a", &family)], &[100.0]), vec![Some(1)]);
        assert_eq!(oracle.choose(&[task("a", &family)], &[50.0]), vec![Some(2)], "0.45 fits");
        assert_eq!(oracle.choose(&[task("a", &family)], &[1000.0]), vec![Some(0)], "nothing fits: the cheapest");
        // Two tasks share the executor: 0.4 + 0.4 fits, 0.9 with anything does not;
        // the busier task gets the better variant when only one can.
        let tasks = [task("a", &family), task("b", &family)];
        assert_eq!(oracle.choose(&tasks, &[100.0, 100.0]), vec![Some(1), Some(1)]);
        assert_eq!(oracle.choose(&tasks, &[150.0, 30.0]), vec![Some(1), Some(1)], "0.6 + 0.12");
        assert_eq!(oracle.choose(&tasks, &[20.0, 100.0]), vec![Some(2), Some(1)], "0.18 + 0.4");
    }

    #[test]
    fn costs_it_knows_price_the_variants_instead_of_their_profiles() {
        let family = [(60.0, 1.0, 0.0), (70.0, 4.0, 0.0), (80.0, 9.0, 0.0)];
        let mut oracle = Oracle::default();
        oracle.costs.insert(("a".into(), "v1".into()), LatencyFit { a_ms: 9.0, c_ms: 0.0, r2: 1.0 });
        // At 100/s v1 now takes 0.9: only v0 fits.
        assert_eq!(oracle.choose(&[task("a", &family)], &[100.0]), vec![Some(0)]);
        oracle.costs.clear();
        assert_eq!(oracle.choose(&[task("a", &family)], &[100.0]), vec![Some(1)]);
    }

    #[test]
    fn its_decisions_switch_without_touching_the_batch_size() {
        let family = [(60.0, 1.0, 0.0), (70.0, 4.0, 0.0)];
        let snapshot = Snapshot { tasks: vec![task("a", &family)], ..Snapshot::default() };
        let decision = Oracle::default().decide(&snapshot, &[10.0]);
        assert_eq!(decision.tasks[0].variant.as_deref(), Some("v1"));
        assert_eq!(decision.tasks[0].max_batch_size, None);
        assert!(Oracle::default().free_switches());
    }
}
