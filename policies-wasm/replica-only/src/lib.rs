//! Replica-only scaling, as SageMaker's target tracking runs it: every task keeps one
//! variant (the one `variant` pins, else the one it had at the first tick) and scales
//! its instances on the queue: the instances wanted are the queue over
//! `queue_per_instance` (by default the variant's batch ceiling), rounded up, within
//! the budget's cores. More are asked at once; fewer after `scale_down_after_ticks`
//! ticks in a row that wanted fewer. It never changes the variant, whatever the load.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::{Error, Policy};
use modelless_policy_abi::{Decision, Snapshot, TaskDecision, TaskSnapshot, instances_within};
use serde::{Deserialize, Serialize};

/// Parameters (the `init` JSON); every field is optional.
#[derive(Clone, Debug, PartialEq, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// The variant every task that has one keeps.
    pub variant: Option<String>,
    /// Requests queued an instance is sized for; default the variant's batch ceiling.
    pub queue_per_instance: Option<u32>,
    /// Ticks in a row that must want fewer instances before they go.
    pub scale_down_after_ticks: u32,
    /// Most instances of one variant.
    pub max_instances: u32,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters { variant: None, queue_per_instance: None, scale_down_after_ticks: 10, max_instances: 8 }
    }
}

/// The policy.
#[derive(Debug, Default)]
pub struct ReplicaOnly {
    parameters: Parameters,
    state: State,
}

/// Per task: the variant it keeps, and ticks in a row that wanted fewer instances.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct State {
    kept: BTreeMap<String, String>,
    low_ticks: BTreeMap<String, u32>,
}

impl Policy for ReplicaOnly {
    type Parameters = Parameters;
    type State = State;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        Ok(ReplicaOnly { parameters, ..ReplicaOnly::default() })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let cores = snapshot.system.budget.as_ref().map(|b| b.cores);
        let tasks = snapshot.tasks.iter().filter_map(|task| self.towards(task, cores)).collect();
        Ok(Decision { tasks })
    }

    fn state(&mut self) -> Option<&mut State> {
        Some(&mut self.state)
    }
}

impl ReplicaOnly {
    fn towards(&mut self, task: &TaskSnapshot, cores: Option<f64>) -> Option<TaskDecision> {
        let pinned = self.parameters.variant.clone().filter(|p| task.has_variant(p));
        let kept = self
            .state
            .kept
            .entry(task.name.clone())
            .or_insert_with(|| pinned.unwrap_or_else(|| task.active.variant.clone()));
        let variant = task.variant(kept)?;
        if task.active.variant != *kept {
            return Some(TaskDecision::switch(&task.name, kept.clone()));
        }
        let per_instance = variant.share.map_or(0.0, |s| s.cores);
        let most = instances_within(cores, per_instance, self.parameters.max_instances);
        let target = self.parameters.queue_per_instance.unwrap_or(variant.batch_ceiling.unwrap_or(8)).max(1);
        let wanted = (task.queue_length.div_ceil(u64::from(target)) as u32).clamp(1, most);
        let now = variant.serving_instances().max(1);
        let low = self.state.low_ticks.entry(task.name.clone()).or_default();
        *low = if wanted < now { *low + 1 } else { 0 };
        let change = wanted > now || (wanted < now && *low >= self.parameters.scale_down_after_ticks);
        if !change {
            return None;
        }
        *low = 0;
        Some(TaskDecision::scale(&task.name, wanted))
    }
}

modelless_policy_abi::export_policy!(ReplicaOnly);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{Budget, InstanceShare, ServingKnobs, SystemSnapshot, VariantSnapshot};

    use super::*;

    fn snapshot(active: &str, queue_length: u64, instances: u32) -> Snapshot {
        let variant = |name: &str| VariantSnapshot {
            name: name.into(),
            batch_ceiling: Some(8),
            instances,
            share: Some(InstanceShare { cores: 1.0, ..InstanceShare::default() }),
            ..VariantSnapshot::default()
        };
        let task = TaskSnapshot {
            name: "t".into(),
            queue_length,
            active: ServingKnobs { variant: active.into(), ..ServingKnobs::default() },
            variants: vec![variant("small"), variant("large")],
            ..TaskSnapshot::default()
        };
        let budget = Budget { cores: 4.0, ..Budget::default() };
        Snapshot {
            tasks: vec![task],
            system: SystemSnapshot { budget: Some(budget), ..Default::default() },
            ..Default::default()
        }
    }

    #[test]
    fn instances_follow_the_queue_up_at_once_down_after_a_while_and_the_variant_never_moves() {
        let mut policy = ReplicaOnly {
            parameters: Parameters { scale_down_after_ticks: 2, ..Parameters::default() },
            ..ReplicaOnly::default()
        };
        let instances = |policy: &mut ReplicaOnly, queue, n| {
            policy.decide(&snapshot("large", queue, n)).unwrap().tasks.first().and_then(|t| t.instances)
        };
        assert_eq!(instances(&mut policy, 4, 1), None);
        assert_eq!(instances(&mut policy, 20, 1), Some(3), "20 queued over 8 an instance");
        assert_eq!(instances(&mut policy, 100, 3), Some(4), "no more than the budget's 4 cores");
        assert_eq!(instances(&mut policy, 0, 4), None);
        assert_eq!(instances(&mut policy, 0, 4), Some(1), "two ticks low");
        let moved = policy.decide(&snapshot("small", 0, 1)).unwrap().tasks.remove(0);
        assert_eq!(moved.variant.as_deref(), Some("large"), "it keeps the variant it first had");
    }
}
