//! The static policy: serves each task with the variant and knobs it was configured
//! with. It remembers what it saw on its first tick and asks for exactly that again
//! whenever a task drifts from it (someone switched by hand, or a failed policy left
//! other knobs behind); otherwise it changes nothing. With the parameter
//! `{"variant": "<name>"}` it pins that variant instead on every task that has one.

use std::collections::BTreeMap;

use modelless_policy_abi::guest::Policy;
use modelless_policy_abi::{Decision, ServingKnobs, Snapshot, TaskDecision};

/// The knobs each task had when the policy first saw it, and the variant pinned.
#[derive(Default)]
pub struct Static {
    configured: BTreeMap<String, ServingKnobs>,
    pinned: Option<String>,
}

/// Parameters (the `init` JSON).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Parameters {
    variant: Option<String>,
}

impl Policy for Static {
    fn decide(&mut self, snapshot: &Snapshot) -> Decision {
        let mut decision = Decision::default();
        for task in &snapshot.tasks {
            let pinned = self.pinned.as_ref().filter(|p| task.variants.iter().any(|v| &v.name == *p));
            let configured = self.configured.entry(task.name.clone()).or_insert_with(|| ServingKnobs {
                variant: pinned.cloned().unwrap_or_else(|| task.active.variant.clone()),
                ..task.active.clone()
            });
            let wants = TaskDecision::towards(&task.name, configured, &task.active);
            if !wants.is_empty() {
                decision.tasks.push(wants);
            }
        }
        decision
    }

    fn init(&mut self, parameters: &serde_json::Value) -> Result<(), String> {
        let parameters: Parameters = serde_json::from_value(parameters.clone()).map_err(|e| e.to_string())?;
        self.pinned = parameters.variant;
        Ok(())
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

    #[test]
    fn it_keeps_what_it_first_saw_or_the_pinned_variant() {
        let mut keeping = Static::default();
        assert!(keeping.decide(&snapshot("large")).tasks.is_empty());
        assert_eq!(keeping.decide(&snapshot("small")).tasks[0].variant.as_deref(), Some("large"));
        let mut pinned = Static::default();
        pinned.init(&serde_json::json!({"variant": "small"})).unwrap();
        assert_eq!(pinned.decide(&snapshot("large")).tasks[0].variant.as_deref(), Some("small"));
        assert!(pinned.decide(&snapshot("small")).tasks.is_empty());
        let mut unknown = Static::default();
        unknown.init(&serde_json::json!({"variant": "medium"})).unwrap();
        assert!(unknown.decide(&snapshot("large")).tasks.is_empty(), "a task without it keeps its own");
        assert!(Static::default().init(&serde_json::json!({"speed": 1})).is_err());
    }
}
