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
            let now = &task.active;
            let wants = TaskDecision {
                variant: changed(&configured.variant, &now.variant),
                max_batch_size: changed(&configured.max_batch_size, &now.max_batch_size),
                max_queue_delay_us: changed(&configured.max_queue_delay_us, &now.max_queue_delay_us),
                instances: changed(&configured.instances, &now.instances),
                ..TaskDecision::keep(&task.name)
            };
            if !wants.is_empty() {
                decision.tasks.push(wants);
            }
        }
        decision
    }
}

/// `want` when it differs from `have`.
fn changed<T: PartialEq + Clone>(want: &T, have: &T) -> Option<T> {
    (want != have).then(|| want.clone())
}

modelless_policy_abi::export_policy!(Static);
