//! Static provisioning for the peak, as Clipper+, TF Serving and Triton are run: each
//! task serves on the most accurate variant that answers its peak within the task's
//! target (or the one `variant` pins), with the fewest instances that do, all the
//! time. The peak is a parameter, per task (`{"peak_per_s": {"classify": 40}}`);
//! capacity is `capacity_within_slo`, within the task's share of the budget's cores or,
//! for a fixed split of them, `cores_per_task`. Being static, it holds every task's
//! peak at once, so the tasks share the budget in proportion to the cores each one's
//! peak needs on its most accurate variant. Where no variant answers the peak, the
//! one that answers most. A task without a peak, or without a target, keeps what it has. Like the
//! static policy, it asks again whenever a task drifts from that.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::{Error, NoState, Policy};
use modelless_policy_abi::{
    Decision, LatencyFit, Snapshot, TaskDecision, TaskSnapshot, capacity_within_slo, instances_within,
};

/// Parameters (the `init` JSON).
#[derive(Clone, Debug, Default, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Each task's peak, requests a second.
    pub peak_per_s: BTreeMap<String, f64>,
    /// The variant every task that has one serves on; else its most accurate.
    pub variant: Option<String>,
    /// Most instances of one variant.
    pub max_instances: Option<u32>,
    /// The cores each task may hold (a fixed split of the budget); default its share
    /// of the budget, in proportion to what its peak needs.
    pub cores_per_task: Option<f64>,
}

/// The policy.
#[derive(Debug, Default)]
pub struct StaticPeak {
    parameters: Parameters,
}

impl Policy for StaticPeak {
    type Parameters = Parameters;
    type State = NoState;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        Ok(StaticPeak { parameters })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let budget = snapshot.system.budget.as_ref().map(|b| b.cores);
        let needs: Vec<f64> = snapshot.tasks.iter().map(|task| self.peak_needs(task)).collect();
        let total: f64 = needs.iter().sum();
        let tasks = snapshot
            .tasks
            .iter()
            .zip(&needs)
            .filter_map(|(task, need)| {
                let share = budget.map(|cores| if total > 0.0 { cores * need / total } else { cores });
                self.towards(task, share)
            })
            .collect();
        Ok(Decision { tasks })
    }
}

impl StaticPeak {
    /// The cores `task`'s peak needs on its most accurate variant, with no budget: 0
    /// without a peak.
    fn peak_needs(&self, task: &TaskSnapshot) -> f64 {
        let Some((name, instances)) = self.sized(task, None) else { return 0.0 };
        let per_instance = task.variant(&name).and_then(|v| v.share).map_or(0.0, |s| s.cores);
        f64::from(instances) * per_instance.max(1.0)
    }

    /// The variant and instances `task` holds for its peak, on a budget of `cores`.
    pub fn sized(&self, task: &TaskSnapshot, cores: Option<f64>) -> Option<(String, u32)> {
        let peak = *self.parameters.peak_per_s.get(&task.name)?;
        let slo_ms = task.slo_latency_ms?;
        let cores = match (cores, self.parameters.cores_per_task) {
            (Some(budget), Some(split)) => Some(budget.min(split)),
            (budget, split) => budget.or(split),
        };
        let pinned = self.parameters.variant.as_ref().filter(|p| task.has_variant(p));
        let candidates = task
            .variants
            .iter()
            .filter(|v| pinned.is_none_or(|name| &v.name == name))
            .filter(|v| v.may_serve())
            .filter_map(|variant| {
                let line = fit(variant)?;
                let per_instance = variant.share.map_or(0.0, |s| s.cores);
                let most = instances_within(cores, per_instance, self.parameters.max_instances.unwrap_or(16));
                let ceiling = variant.batch_ceiling.unwrap_or(32).max(1);
                let capacity = |n| capacity_within_slo(&line, ceiling, n, slo_ms);
                let instances = (1..=most).find(|&n| capacity(n) >= peak).unwrap_or(most);
                Some((variant, instances, capacity(instances)))
            });
        let (serving, short): (Vec<_>, Vec<_>) = candidates.partition(|(_, _, capacity)| *capacity >= peak);
        let chosen = match serving.into_iter().max_by(|a, b| a.0.accuracy.total_cmp(&b.0.accuracy)) {
            Some(chosen) => chosen,
            None => short.into_iter().max_by(|a, b| a.2.total_cmp(&b.2))?,
        };
        Some((chosen.0.name.clone(), chosen.1))
    }

    fn towards(&self, task: &TaskSnapshot, cores: Option<f64>) -> Option<TaskDecision> {
        let (variant, instances) = self.sized(task, cores)?;
        let mut decision = TaskDecision::keep(&task.name);
        if variant != task.active.variant {
            decision.variant = Some(variant.clone());
            decision.instances = Some(instances);
        } else if task.variant(&variant).is_some_and(|v| v.instances_set != instances) {
            decision.instances = Some(instances);
        }
        (!decision.is_empty()).then_some(decision)
    }
}

/// A variant's profiled line.
fn fit(variant: &modelless_policy_abi::VariantSnapshot) -> Option<LatencyFit> {
    variant.profile.as_ref()?.fit
}

modelless_policy_abi::export_policy!(StaticPeak);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{
        Budget, InstanceShare, ServingKnobs, SystemSnapshot, VariantCost, VariantSnapshot, VariantState,
    };

    use super::*;

    fn snapshot(active: &str, large_instances: u32, cores: f64) -> Snapshot {
        let variant = |name: &str, accuracy, a_ms, instances| VariantSnapshot {
            name: name.into(),
            accuracy,
            state: VariantState::Ready,
            profile: Some(VariantCost {
                fit: Some(LatencyFit { a_ms, c_ms: a_ms, r2: 1.0 }),
                ..VariantCost::default()
            }),
            batch_ceiling: Some(8),
            instances,
            instances_set: instances,
            share: Some(InstanceShare { cores: 1.0, ..InstanceShare::default() }),
            ..VariantSnapshot::default()
        };
        let task = TaskSnapshot {
            name: "t".into(),
            slo_latency_ms: Some(100.0),
            active: ServingKnobs { variant: active.into(), ..ServingKnobs::default() },
            variants: vec![variant("small", 70.0, 1.0, 1), variant("large", 80.0, 4.0, large_instances)],
            ..TaskSnapshot::default()
        };
        let budget = Budget { cores, ..Budget::default() };
        Snapshot {
            tasks: vec![task],
            system: SystemSnapshot { budget: Some(budget), ..Default::default() },
            ..Default::default()
        }
    }

    fn policy(parameters: serde_json::Value) -> StaticPeak {
        modelless_policy_abi::guest::configured(parameters).unwrap()
    }

    #[test]
    fn each_task_holds_the_most_accurate_variant_with_the_instances_its_peak_needs() {
        // large serves 189/s an instance within 100 ms: 500/s takes three.
        let mut sized = policy(serde_json::json!({ "peak_per_s": { "t": 500.0 } }));
        let decision = sized.decide(&snapshot("small", 1, 8.0)).unwrap().tasks.remove(0);
        assert_eq!((decision.variant.as_deref(), decision.instances), (Some("large"), Some(3)));
        assert!(sized.decide(&snapshot("large", 3, 8.0)).unwrap().tasks.is_empty(), "it holds them, whatever the load");
        let decision = sized.decide(&snapshot("large", 3, 2.0)).unwrap().tasks.remove(0);
        assert_eq!(
            (decision.variant.as_deref(), decision.instances),
            (Some("small"), Some(1)),
            "two cores of large fall short: the most accurate that answers the peak"
        );
        let mut pinned_large = policy(serde_json::json!({ "peak_per_s": { "t": 500.0 }, "variant": "large" }));
        let decision = pinned_large.decide(&snapshot("large", 3, 2.0)).unwrap().tasks.remove(0);
        assert_eq!(decision.instances, Some(2), "pinned: no more than the budget's cores");
        let pinned = policy(serde_json::json!({ "peak_per_s": { "t": 500.0 }, "variant": "small" }));
        assert_eq!(pinned.sized(&snapshot("large", 3, 8.0).tasks[0], Some(8.0)), Some(("small".into(), 1)));
        let split = policy(serde_json::json!({ "peak_per_s": { "t": 500.0 }, "cores_per_task": 1.0 }));
        assert_eq!(
            split.sized(&snapshot("large", 3, 8.0).tasks[0], Some(8.0)),
            Some(("small".into(), 1)),
            "one core: the most accurate variant that answers the peak on it"
        );
        let beyond = policy(serde_json::json!({ "peak_per_s": { "t": 5000.0 }, "cores_per_task": 1.0 }));
        assert_eq!(
            beyond.sized(&snapshot("large", 3, 8.0).tasks[0], Some(8.0)),
            Some(("small".into(), 1)),
            "none answers it: the one that answers most"
        );
        assert!(
            policy(serde_json::json!({})).decide(&snapshot("small", 1, 8.0)).unwrap().tasks.is_empty(),
            "no peak given"
        );
    }

    #[test]
    fn tasks_share_the_budget_in_proportion_to_what_their_peaks_need() {
        // large serves 189/s an instance within 100 ms: a peak of 500/s takes three
        // instances, one of 150/s takes one.
        let mut two = snapshot("large", 1, 4.0);
        let mut other = two.tasks[0].clone();
        other.name = "u".into();
        two.tasks.push(other);
        let mut sized = policy(serde_json::json!({ "peak_per_s": { "t": 500.0, "u": 150.0 } }));
        let decisions = sized.decide(&two).unwrap();
        let held: Vec<_> =
            decisions.tasks.iter().map(|d| (d.task.as_str(), d.variant.as_deref(), d.instances)).collect();
        assert_eq!(held, [("t", None, Some(3))], "3 + 1 cores of 4: both peaks held at once");
        two.system.budget.as_mut().unwrap().cores = 2.0;
        let mut even = policy(serde_json::json!({ "peak_per_s": { "t": 500.0, "u": 500.0 } }));
        let decisions = even.decide(&two).unwrap();
        let held: Vec<_> =
            decisions.tasks.iter().map(|d| (d.task.as_str(), d.variant.as_deref(), d.instances)).collect();
        assert_eq!(
            held,
            [("t", Some("small"), Some(1)), ("u", Some("small"), Some(1))],
            "a core each: never more than the machine's cores together"
        );
    }
}
