//! The schedule policy: serves each task with the listed variants in turn, and with
//! the listed instances in turn, each for `period_ms`, shifted by `offset_ms`, on the
//! control loop's clock. It decides nothing from load: it exists for experiments that
//! need switches or changes of instances at known moments, such as replicas of a
//! fleet switching in the same second or staggered, or a variant going from one
//! instance to three and back under load.
//! Parameters: `{"variants": ["a", "b"], "instances": [1, 3], "period_ms": 5000,
//! "offset_ms": 0}`; either list may be left out, not both.

use modelless_policy_abi::guest::{Error, NoState, Policy};
use modelless_policy_abi::{Decision, ServingKnobs, Snapshot, TaskDecision};

/// Parameters (the `init` JSON).
#[derive(Debug, Default, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Parameters {
    /// The variants served in turn.
    #[serde(default)]
    pub variants: Vec<String>,
    /// The instances asked in turn.
    #[serde(default)]
    pub instances: Vec<u32>,
    /// How long each turn lasts, ms.
    pub period_ms: u64,
    /// What the control loop's clock is shifted by, ms.
    #[serde(default)]
    pub offset_ms: u64,
}

/// The variants and the clock.
#[derive(Default)]
pub struct Schedule {
    parameters: Parameters,
}

impl Schedule {
    /// The variant due at `now_ms`, if variants are listed.
    fn due(&self, now_ms: u64) -> Option<&str> {
        let p = &self.parameters;
        p.variants.get(self.turn(now_ms) % p.variants.len().max(1)).map(String::as_str)
    }

    /// The instances due at `now_ms`, if instances are listed.
    fn instances_due(&self, now_ms: u64) -> Option<u32> {
        let p = &self.parameters;
        p.instances.get(self.turn(now_ms) % p.instances.len().max(1)).copied()
    }

    fn turn(&self, now_ms: u64) -> usize {
        let p = &self.parameters;
        ((now_ms + p.offset_ms) / p.period_ms.max(1)) as usize
    }
}

impl Policy for Schedule {
    type Parameters = Parameters;
    type State = NoState;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        if (parameters.variants.is_empty() && parameters.instances.is_empty()) || parameters.period_ms == 0 {
            return Err("schedule needs variants or instances, and a period_ms above 0".into());
        }
        Ok(Schedule { parameters })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        let mut decision = Decision::default();
        let (due, instances) = (self.due(snapshot.now_ms), self.instances_due(snapshot.now_ms));
        let tasks = snapshot.tasks.iter().filter(|t| due.is_none_or(|due| t.has_variant(due)));
        for task in tasks {
            let variant = due.map_or_else(|| task.active.variant.clone(), str::to_string);
            let instances = instances.unwrap_or(task.active.instances);
            let wanted = ServingKnobs { variant, instances, ..task.active.clone() };
            let wants = TaskDecision::towards(&task.name, &wanted, &task.active);
            if !wants.is_empty() {
                decision.tasks.push(wants);
            }
        }
        Ok(decision)
    }
}

modelless_policy_abi::export_policy!(Schedule);

#[cfg(test)]
mod tests {
    use modelless_policy_abi::guest::configured;
    use modelless_policy_abi::{TaskSnapshot, VariantSnapshot};

    use super::*;

    fn snapshot(now_ms: u64, active: &str) -> Snapshot {
        let variant = |name: &str| VariantSnapshot { name: name.into(), ..VariantSnapshot::default() };
        let task = TaskSnapshot {
            name: "t".into(),
            active: ServingKnobs { variant: active.into(), max_batch_size: 8, ..ServingKnobs::default() },
            variants: vec![variant("a"), variant("b")],
            ..TaskSnapshot::default()
        };
        Snapshot { now_ms, tasks: vec![task], ..Snapshot::default() }
    }

    fn wants(policy: &mut Schedule, now_ms: u64, active: &str) -> Option<String> {
        policy.decide(&snapshot(now_ms, active)).unwrap().tasks.first().and_then(|t| t.variant.clone())
    }

    #[test]
    fn it_takes_the_variants_in_turn_shifted_by_its_offset() {
        let mut policy: Schedule = configured(serde_json::json!({"variants": ["a", "b"], "period_ms": 1000})).unwrap();
        assert_eq!(wants(&mut policy, 999, "a"), None, "a is due and serves");
        assert_eq!(wants(&mut policy, 1000, "a").as_deref(), Some("b"));
        assert_eq!(wants(&mut policy, 2500, "b").as_deref(), Some("a"));
        let mut shifted: Schedule =
            configured(serde_json::json!({"variants": ["a", "b"], "period_ms": 1000, "offset_ms": 500})).unwrap();
        assert_eq!(wants(&mut shifted, 499, "a"), None);
        assert_eq!(wants(&mut shifted, 500, "a").as_deref(), Some("b"));
    }

    #[test]
    fn bad_parameters_are_refused() {
        assert!(configured::<Schedule>(serde_json::json!({"variants": [], "period_ms": 1000})).is_err());
        assert!(configured::<Schedule>(serde_json::json!({"variants": ["a"], "period_ms": 0})).is_err());
        assert!(configured::<Schedule>(serde_json::json!({"variants": ["a"], "period_ms": 10, "extra": 1})).is_err());
    }

    #[test]
    fn instances_listed_are_asked_in_turn_of_the_variant_serving() {
        let mut policy: Schedule = configured(serde_json::json!({ "instances": [1, 3], "period_ms": 1000 })).unwrap();
        let asked = |policy: &mut Schedule, now_ms, serving: u32| {
            let mut snapshot = snapshot(now_ms, "a");
            snapshot.tasks[0].active.instances = serving;
            policy.decide(&snapshot).unwrap().tasks.first().map(|t| (t.variant.clone(), t.instances))
        };
        assert_eq!(asked(&mut policy, 0, 1), None);
        assert_eq!(asked(&mut policy, 1000, 1), Some((None, Some(3))));
        assert_eq!(asked(&mut policy, 2500, 3), Some((None, Some(1))));
        assert!(configured::<Schedule>(serde_json::json!({ "period_ms": 1000 })).is_err());
    }
}
