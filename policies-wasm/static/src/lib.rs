//! The static policy: serves each task with the variant and knobs it was configured
//! with. It remembers what it saw on its first tick and asks for exactly that again
//! whenever a task drifts from it (someone switched by hand, or a failed policy left
//! other knobs behind); otherwise it changes nothing.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::Policy;
use modelless_policy_abi::{Decision, ServingKnobs, Snapshot, TaskDecision};

/// The knobs each task had when the policy first saw it.
#[derive(Default)]
pub struct Static {
    configured: BTreeMap<String, ServingKnobs>,
}

impl Policy for Static {
    fn decide(&mut self, snapshot: &Snapshot) -> Decision {
        let mut decision = Decision::default();
        for task in &snapshot.tasks {
            let configured = self.configured.entry(task.name.clone()).or_insert_with(|| task.active.clone());
            let wants = TaskDecision::towards(&task.name, configured, &task.active);
            if !wants.is_empty() {
                decision.tasks.push(wants);
            }
        }
        decision
    }
}

modelless_policy_abi::export_policy!(Static);
