use modelless_policy_abi::guest::configured;
use modelless_policy_abi::{
    Budget, Demand, InstanceShare, LatencyFit, ServingKnobs, SystemSnapshot, VariantCost, VariantSnapshot,
};

use super::*;

/// (name, accuracy, a ms a row, c ms): within 100 ms at batch 8, `small` serves 442
/// requests a second an instance, `large` 103.
const FAMILY: [(&str, f64, f64, f64); 2] = [("small", 60.0, 2.0, 1.0), ("large", 75.0, 8.0, 4.0)];

/// Task `t` on `active` (its `instances` serving, the other variant unloaded) at
/// `per_s`, on a budget of 4 cores of which `free` are free.
fn snapshot(now_ms: u64, active: &str, instances: u32, per_s: f64, free: f64) -> Snapshot {
    let variants = FAMILY
        .iter()
        .map(|&(name, accuracy, a_ms, c_ms)| VariantSnapshot {
            name: name.into(),
            accuracy,
            state: if name == active { VariantState::Ready } else { VariantState::Unloaded },
            instances: if name == active { instances } else { 0 },
            share: Some(InstanceShare { cores: 1.0, ..InstanceShare::default() }),
            profile: Some(VariantCost { fit: Some(LatencyFit { a_ms, c_ms, r2: 0.999 }), ..VariantCost::default() }),
            ..VariantSnapshot::default()
        })
        .collect();
    let demand = Demand { per_s_1s: per_s, per_s_10s: per_s, per_s_60s: per_s };
    let task = TaskSnapshot {
        name: "t".into(),
        demand,
        slo_latency_ms: Some(100.0),
        active: ServingKnobs { variant: active.into(), max_batch_size: 8, instances, ..ServingKnobs::default() },
        variants,
        ..TaskSnapshot::default()
    };
    let budget = Budget { cores: 4.0, cores_free: free, ..Budget::default() };
    let system = SystemSnapshot { budget: Some(budget), ..SystemSnapshot::default() };
    Snapshot { now_ms, tasks: vec![task], system, ..Snapshot::default() }
}

fn decided(policy: &mut Reference, snapshot: &Snapshot) -> Option<TaskDecision> {
    policy.decide(snapshot).unwrap().tasks.into_iter().next()
}

#[test]
fn light_demand_is_served_by_the_most_accurate_variant_on_one_instance() {
    let mut policy = Reference::default();
    let moved = decided(&mut policy, &snapshot(0, "small", 1, 50.0, 3.0)).unwrap();
    assert_eq!((moved.variant.as_deref(), moved.instances), (Some("large"), Some(1)));
    assert_eq!(moved.standby, BTreeMap::new(), "small, below it, is loaded");
}

#[test]
fn a_variant_that_cannot_keep_up_gets_instances_or_gives_way_at_once() {
    let mut policy = Reference::default();
    // 150/s (180 with headroom) on large: two instances serve it, and two cores are free.
    let scaled = decided(&mut policy, &snapshot(0, "large", 1, 150.0, 3.0)).unwrap();
    assert_eq!((scaled.variant, scaled.instances), (None, Some(2)));
    // A second later, 500/s: large would need more cores than the task may hold.
    let down = decided(&mut policy, &snapshot(1_000, "large", 2, 500.0, 1.0)).unwrap();
    assert_eq!((down.variant.as_deref(), down.instances), (Some("small"), Some(2)));
}

#[test]
fn a_move_that_is_not_needed_waits_for_the_last_change_to_settle() {
    let mut policy = Reference::default();
    decided(&mut policy, &snapshot(0, "large", 1, 500.0, 3.0)).unwrap();
    // Quiet again: large would serve, but small keeps up and the change is 1 s old.
    let quiet = snapshot(1_000, "small", 2, 20.0, 2.0);
    assert_eq!(decided(&mut policy, &quiet).and_then(|d| d.variant), None);
    let later = snapshot(5_000, "small", 2, 20.0, 2.0);
    let up = decided(&mut policy, &later).unwrap();
    assert_eq!((up.variant.as_deref(), up.instances), (Some("large"), Some(1)));
}

#[test]
fn the_variant_below_the_one_serving_stands_by_once_loaded() {
    let mut policy = Reference::default();
    let quiet = snapshot(0, "large", 1, 20.0, 3.0);
    let asked = decided(&mut policy, &quiet).unwrap();
    assert_eq!(asked.standby, BTreeMap::from([("small".to_string(), 1)]));
    assert_eq!((asked.variant, asked.instances), (None, None), "nothing else to change");
    let mut loaded = quiet.clone();
    loaded.tasks[0].variants[0].state = VariantState::Ready;
    assert_eq!(decided(&mut policy, &loaded), None);
    let mut without: Reference = configured(serde_json::json!({ "standby": false })).unwrap();
    assert_eq!(decided(&mut without, &quiet), None);
}

#[test]
fn its_state_outlives_a_reload_and_bad_parameters_are_refused() {
    let mut policy = Reference::default();
    decided(&mut policy, &snapshot(3_000, "small", 1, 50.0, 3.0)).unwrap();
    let saved = serde_json::to_value(policy.state().unwrap()).unwrap();
    assert_eq!(saved, serde_json::json!({ "last_change_ms": { "t": 3000 } }));
    assert!(configured::<Reference>(serde_json::json!({ "max_instances": 0 })).is_err());
    assert!(configured::<Reference>(serde_json::json!({ "headroom": -0.5 })).is_err());
}
