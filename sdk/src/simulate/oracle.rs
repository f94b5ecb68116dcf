//! The oracle: the bound a real policy can approach. It knows each task's arrivals
//! over the coming second, its switches cost nothing, and it serves every task with
//! the most accurate variants whose load keeps the executor at most `max_utilisation`
//! busy (every combination is tried: accuracy weighted by demand is what it maximises).

use modelless_runtime::policy_abi::{Decision, Snapshot, TaskDecision, TaskSnapshot};

use super::engine::Decider;

/// Knows the next second's demand; switches for free.
#[derive(Clone, Debug)]
pub struct Oracle {
    /// Highest utilisation it lets the executor reach.
    pub max_utilisation: f64,
}

impl Default for Oracle {
    fn default() -> Self {
        Oracle { max_utilisation: 0.8 }
    }
}

/// Share of the executor `variant` of `task` takes at `demand` requests a second,
/// running its largest batches (the cheapest per request): `λ·(a + c/b)`.
fn load_share(task: &TaskSnapshot, variant: usize, demand: f64) -> Option<f64> {
    let v = &task.variants[variant];
    let fit = v.profile.as_ref()?.fit?;
    let batch = f64::from(task.active.max_batch_size.max(1));
    Some(demand * (fit.a_ms + fit.c_ms.max(0.0) / batch) / 1e3)
}

impl Oracle {
    /// The variant per task: the combination with the most demand-weighted accuracy
    /// under the utilisation limit, or the cheapest when none keeps under it.
    pub fn choose(&self, tasks: &[TaskSnapshot], ahead: &[f64]) -> Vec<usize> {
        let options: Vec<Vec<(usize, f64, f64)>> = tasks
            .iter()
            .zip(ahead)
            .map(|(task, &demand)| {
                (0..task.variants.len())
                    .filter_map(|v| Some((v, load_share(task, v, demand)?, task.variants[v].accuracy * demand)))
                    .collect()
            })
            .collect();
        let mut best: Option<(f64, f64, Vec<usize>)> = None;
        let mut chosen = vec![0; tasks.len()];
        search(&options, 0, &mut chosen, 0.0, 0.0, &mut |load, value, picked| {
            let fits = load <= self.max_utilisation;
            let better = match &best {
                None => true,
                Some((best_load, best_value, _)) => {
                    let best_fits = *best_load <= self.max_utilisation;
                    match (fits, best_fits) {
                        (true, false) => true,
                        (false, true) => false,
                        (true, true) => value > *best_value,
                        (false, false) => load < *best_load,
                    }
                }
            };
            if better {
                best = Some((load, value, picked.to_vec()));
            }
        });
        best.map_or_else(|| tasks.iter().map(|_| 0).collect(), |(_, _, picked)| picked)
    }
}

/// Every combination of one option per task: `visit(load, value, variants)`.
fn search(
    options: &[Vec<(usize, f64, f64)>],
    task: usize,
    chosen: &mut Vec<usize>,
    load: f64,
    value: f64,
    visit: &mut dyn FnMut(f64, f64, &[usize]),
) {
    if task == options.len() {
        visit(load, value, chosen);
        return;
    }
    if options[task].is_empty() {
        return search(options, task + 1, chosen, load, value, visit);
    }
    for &(variant, share, weighted) in &options[task] {
        chosen[task] = variant;
        search(options, task + 1, chosen, load + share, value + weighted, visit);
    }
}

impl Decider for Oracle {
    fn decide(&mut self, snapshot: &Snapshot, ahead: &[f64]) -> Decision {
        let picked = self.choose(&snapshot.tasks, ahead);
        let tasks = snapshot
            .tasks
            .iter()
            .zip(picked)
            .filter(|(task, _)| !task.variants.is_empty())
            .map(|(task, variant)| TaskDecision {
                variant: Some(task.variants[variant].name.clone()).filter(|v| *v != task.active.variant),
                max_queue_delay_us: Some(0).filter(|&d| d != task.active.max_queue_delay_us),
                ..TaskDecision::keep(&task.name)
            })
            .collect();
        Decision { tasks }
    }

    fn free_switches(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use modelless_runtime::policy_abi::{LatencyFit, ServingKnobs, VariantCost, VariantSnapshot};

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
        assert_eq!(oracle.choose(&[task("a", &family)], &[100.0]), vec![1]);
        assert_eq!(oracle.choose(&[task("a", &family)], &[50.0]), vec![2], "0.45 fits");
        assert_eq!(oracle.choose(&[task("a", &family)], &[1000.0]), vec![0], "nothing fits: the cheapest");
        // Two tasks share the executor: 0.4 + 0.4 fits, 0.9 with anything does not;
        // the busier task gets the better variant when only one can.
        let tasks = [task("a", &family), task("b", &family)];
        assert_eq!(oracle.choose(&tasks, &[100.0, 100.0]), vec![1, 1]);
        assert_eq!(oracle.choose(&tasks, &[150.0, 30.0]), vec![1, 1], "0.6 + 0.12");
        assert_eq!(oracle.choose(&tasks, &[20.0, 100.0]), vec![2, 1], "0.18 + 0.4");
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
