//! The static policy: serves each task with the variant and knobs it was configured
//! with. It remembers what it saw on its first tick and asks for exactly that again
//! whenever a task drifts from it (someone switched by hand, or a failed policy left
//! other knobs behind); otherwise it changes nothing. With the parameter
//! `{"variant": "<name>"}` it pins that variant instead on every task that has one.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::{Error, NoState, Policy};
use modelless_policy_abi::{Decision, ServingKnobs, Snapshot, TaskDecision};

/// The knobs each task had when the policy first saw it, and the variant pinned.
#[derive(Default)]
pub struct Static {
    configured: BTreeMap<String, ServingKnobs>,
    pinned: Option<String>,
}

/// Parameters (the `init` JSON).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// The variant every task that has one is pinned to.
    pub variant: Option<String>,
}

impl Policy for Static {
    type Parameters = Parameters;
    type State = NoState;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        Ok(Static { pinned: parameters.variant, ..Static::default() })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let mut decision = Decision::default();
        for task in &snapshot.tasks {
            let pinned = self.pinned.as_ref().filter(|p| task.has_variant(p));
            let configured = self.configured.entry(task.name.clone()).or_insert_with(|| ServingKnobs {
                variant: pinned.cloned().unwrap_or_else(|| task.active.variant.clone()),
                ..task.active.clone()
            });
            let wants = TaskDecision::towards(&task.name, configured, &task.active);
            if !wants.is_empty() {
                decision.tasks.push(wants);
            }
        }
        Ok(decision)
    }
}

modelless_policy_abi::export_policy!(Static);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{TaskSnapshot, VariantSnapshot};

    use super::*;

    fn snapshot(active: &str) -> Snapshot {
        let variant = |name: &str| VariantSnapshot { name: name.into(), ..VariantSnapshot::default() };
        let task = TaskSnapshot {
            name: "t".into(),
            active: ServingKnobs { variant: active.into(), max_batch_size: 8, ..ServingKnobs::default() },
            variants: vec![variant("small"), variant("large")],
            ..TaskSnapshot::default()
        };
        Snapshot { tasks: vec![task], ..Snapshot::default() }
    }

    fn decided(policy: &mut Static, active: &str) -> Vec<TaskDecision> {
        policy.decide(&snapshot(active)).unwrap().tasks
    }

    fn pinned(variant: &str) -> Static {
        Static::new(Parameters { variant: Some(variant.into()) }).unwrap()
    }

    #[test]
    fn it_keeps_what_it_first_saw_or_the_pinned_variant() {
        let mut keeping = Static::default();
        assert!(decided(&mut keeping, "large").is_empty());
        assert_eq!(decided(&mut keeping, "small")[0].variant.as_deref(), Some("large"));
        let mut small = pinned("small");
        assert_eq!(decided(&mut small, "large")[0].variant.as_deref(), Some("small"));
        assert!(decided(&mut small, "small").is_empty());
        assert!(decided(&mut pinned("medium"), "large").is_empty(), "a task without it keeps its own");
    }
}
