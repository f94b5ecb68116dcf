//! The policy's decisions on hand-made snapshots.

use modelless_policy_abi::{
    Budget, Demand, InstanceShare, LatencyFit, ServingKnobs, SystemSnapshot, TaskSnapshot, VariantCost,
    VariantSnapshot, VariantState,
};

use super::*;

/// large (80 %) serves about 189/s an instance within 100 ms (4 ms a row, 4 a batch
/// of 8), small (70 %) about 756/s; each instance holds one core, and loads in 2 s.
fn variant(name: &str, accuracy: f64, a_ms: f64, state: VariantState, instances: u32) -> VariantSnapshot {
    VariantSnapshot {
        name: name.into(),
        accuracy,
        state,
        profile: Some(VariantCost {
            fit: Some(LatencyFit { a_ms, c_ms: a_ms, r2: 0.999 }),
            load_ms: Some(2_000.0),
            ..VariantCost::default()
        }),
        batch_ceiling: Some(8),
        instances,
        instances_set: instances.max(1),
        share: Some(InstanceShare { cores: 1.0, memory_bytes: 100 << 20, gpu_memory_bytes: 0 }),
        device: "cpu".into(),
        ..VariantSnapshot::default()
    }
}

fn task(name: &str, per_s: f64, active: &str, large: u32, small: u32) -> TaskSnapshot {
    let state = |n| if n > 0 { VariantState::Ready } else { VariantState::Unloaded };
    TaskSnapshot {
        name: name.into(),
        demand: Demand { per_s_1s: per_s, per_s_10s: per_s, per_s_60s: per_s },
        slo_latency_ms: Some(100.0),
        active: ServingKnobs { variant: active.into(), max_batch_size: 8, ..ServingKnobs::default() },
        variants: vec![
            variant("small", 70.0, 1.0, state(small), small),
            variant("large", 80.0, 4.0, state(large), large),
        ],
        ..TaskSnapshot::default()
    }
}

fn snapshot(now_s: u64, cores: f64, tasks: Vec<TaskSnapshot>) -> Snapshot {
    let budget =
        Budget { cores, cores_free: 0.0, memory_bytes: 8 << 30, memory_free_bytes: 4 << 30, ..Budget::default() };
    let system = SystemSnapshot { cores: cores as u32, budget: Some(budget), ..SystemSnapshot::default() };
    Snapshot { now_ms: now_s * 1000, tasks, system, ..Snapshot::default() }
}

fn decided(policy: &mut Autoscale, snapshot: &Snapshot, task: &str) -> Option<TaskDecision> {
    policy.decide(snapshot).unwrap().tasks.into_iter().find(|t| t.task == task)
}

#[test]
fn a_quiet_task_keeps_its_most_accurate_variant_on_one_instance_and_a_cheaper_one_ready() {
    let mut policy = Autoscale::default();
    let quiet = snapshot(0, 4.0, vec![task("t", 20.0, "large", 1, 0)]);
    let decision = decided(&mut policy, &quiet, "t").unwrap();
    assert_eq!((decision.variant, decision.instances), (None, None));
    assert_eq!(decision.load, ["small"], "the step down is kept loaded");
    let ready = snapshot(1, 4.0, vec![task("t", 20.0, "large", 1, 1)]);
    assert_eq!(decided(&mut policy, &ready, "t"), None, "nothing to change");
}

#[test]
fn demand_beyond_an_instance_adds_instances_at_once_within_the_budget() {
    // 300/s (plus two deviations, about 335): two instances of large serve 378. No
    // cheaper variant is warm to serve while more instances load.
    let mut policy = Autoscale {
        parameters: Parameters { keep_cheaper_loaded: false, ..Parameters::default() },
        ..Autoscale::default()
    };
    let busy = snapshot(0, 4.0, vec![task("t", 300.0, "large", 2, 0)]);
    assert_eq!(decided(&mut policy, &busy, "t"), None, "two serve it");
    let busier = snapshot(1, 4.0, vec![task("t", 500.0, "large", 2, 0)]);
    let decision = decided(&mut policy, &busier, "t").unwrap();
    assert_eq!((decision.variant, decision.instances), (None, Some(3)), "545/s: three instances of large, at once");
    // On a budget of two cores large cannot serve it: small does, on one.
    let tight = snapshot(1, 2.0, vec![task("t", 500.0, "large", 2, 1)]);
    let decision = decided(&mut Autoscale::default(), &tight, "t").unwrap();
    assert_eq!(decision.variant.as_deref(), Some("small"));
}

#[test]
fn cores_are_given_up_only_after_the_load_stayed_low_for_the_ticks_set() {
    let parameters = Parameters { scale_down_after_ticks: 3, ..Parameters::default() };
    let mut policy = Autoscale { parameters, ..Autoscale::default() };
    let mut decisions = Vec::new();
    for (s, large) in [(0, 3), (1, 3), (2, 3), (3, 1)] {
        let quiet = snapshot(s, 4.0, vec![task("t", 20.0, "large", large, 1)]);
        decisions.push(decided(&mut policy, &quiet, "t").and_then(|d| d.instances));
    }
    assert_eq!(decisions, [None, None, Some(1), None], "three ticks low, then down to one, which stays");
    // A tick of demand between resets the count.
    let mut policy = Autoscale {
        parameters: Parameters { scale_down_after_ticks: 3, ..Parameters::default() },
        ..Autoscale::default()
    };
    let at = |s, per_s| snapshot(s, 4.0, vec![task("t", per_s, "large", 3, 1)]);
    let seen: Vec<_> = [(0, 20.0), (1, 20.0), (2, 500.0), (3, 20.0), (4, 20.0), (5, 20.0)]
        .into_iter()
        .map(|(s, per_s)| decided(&mut policy, &at(s, per_s), "t").and_then(|d| d.instances))
        .collect();
    assert_eq!(seen, [None, None, None, None, None, Some(1)], "500/s at tick 2 starts the count again");
}

#[test]
fn while_instances_load_a_warm_cheaper_variant_serves_and_they_warm_beside_it() {
    // large serves on one instance; 500/s needs three, which take 2 s to load. small,
    // warm on one instance, serves 756/s meanwhile.
    let mut policy = Autoscale::default();
    let crowd = snapshot(0, 4.0, vec![task("t", 500.0, "large", 1, 1)]);
    let decision = decided(&mut policy, &crowd, "t").unwrap();
    assert_eq!(decision.variant.as_deref(), Some("small"), "accuracy down first");
    assert_eq!(decision.standby.get("large"), Some(&3), "large's three warm beside it");
    // Once they are warm, large takes over with them.
    let mut warm = task("t", 500.0, "small", 3, 1);
    warm.variants[1].instances_set = 3;
    let decision = decided(&mut policy, &snapshot(1, 4.0, vec![warm]), "t").unwrap();
    assert_eq!((decision.variant.as_deref(), decision.instances), (Some("large"), Some(3)));
}

#[test]
fn a_busy_task_takes_the_cores_a_quiet_one_gives_up_and_a_task_without_a_target_keeps_its_own() {
    // a at 500/s wants three cores on large; b, quiet, holds two. Four in all.
    let mut policy = Autoscale {
        parameters: Parameters { scale_down_after_ticks: 1, ..Parameters::default() },
        ..Autoscale::default()
    };
    let both = snapshot(0, 4.0, vec![task("a", 500.0, "large", 2, 0), task("b", 10.0, "large", 2, 1)]);
    let decision = policy.decide(&both).unwrap();
    let of = |name: &str| decision.tasks.iter().find(|t| t.task == name).and_then(|t| t.instances);
    assert_eq!((of("a"), of("b")), (Some(3), Some(1)));
    // b without a target keeps its two: a gets what is left, and steps down to small.
    let mut untargeted = task("b", 10.0, "large", 2, 1);
    untargeted.slo_latency_ms = None;
    let both = snapshot(0, 4.0, vec![task("a", 500.0, "large", 2, 1), untargeted]);
    let decision = Autoscale::default().decide(&both).unwrap();
    assert!(decision.tasks.iter().all(|t| t.task == "a"), "{decision:?}");
    let a = decision.tasks.iter().find(|t| t.task == "a").unwrap();
    assert_eq!(a.variant.as_deref(), Some("small"), "{a:?}");
}

#[test]
fn its_state_outlives_a_reload() {
    let mut policy = Autoscale::default();
    let quiet = snapshot(0, 4.0, vec![task("t", 20.0, "large", 3, 1)]);
    policy.decide(&quiet).unwrap();
    let saved = serde_json::to_value(policy.state().unwrap()).unwrap();
    let mut reloaded = Autoscale::default();
    *reloaded.state().unwrap() = serde_json::from_value(saved).unwrap();
    assert_eq!(reloaded.state, policy.state);
}

/// `task` with its 1 s and 10 s rates apart.
fn moving(name: &str, per_s_1s: f64, per_s_10s: f64, large: u32, small: u32) -> TaskSnapshot {
    let mut task = task(name, per_s_10s, "large", large, small);
    task.demand.per_s_1s = per_s_1s;
    task
}

#[test]
fn a_variant_that_serves_what_arrives_keeps_serving_while_instances_for_the_margin_load() {
    // One instance of large serves 189/s. 170/s arriving (the last second, well above
    // the 10 s rate of 120) plus two deviations is 196: a second instance is asked,
    // and large keeps serving while it loads; small, warm, is not stepped down to.
    let mut policy = Autoscale::default();
    let decision = decided(&mut policy, &snapshot(0, 4.0, vec![moving("t", 170.0, 120.0, 1, 1)]), "t").unwrap();
    assert_eq!((decision.variant, decision.instances), (None, Some(2)));
    assert!(decision.standby.is_empty(), "{:?}", decision.standby);
    // A noisy second (200 against 185, within two deviations of 13.6) counts as 185.
    let noisy = decided(&mut Autoscale::default(), &snapshot(0, 4.0, vec![moving("t", 200.0, 185.0, 1, 1)]), "t");
    assert_eq!(noisy.and_then(|d| d.variant), None);
    // Behind what arrives (250 on 189), small serves while large's instances load.
    let behind = decided(&mut Autoscale::default(), &snapshot(0, 4.0, vec![moving("t", 250.0, 120.0, 1, 1)]), "t");
    assert_eq!(behind.and_then(|d| d.variant).as_deref(), Some("small"));
}

#[test]
fn where_no_core_is_free_for_the_loading_a_warm_cheaper_variant_serves_meanwhile() {
    // The 170/s above, on a machine of two cores whose other core a second task's
    // instance holds: the instance loading takes its share of the two, leaving large
    // two thirds of its 189/s, 126. small serves while large's second instance warms.
    let mut on_two = snapshot(0, 4.0, vec![moving("t", 170.0, 120.0, 1, 1), task("other", 10.0, "large", 1, 0)]);
    on_two.system.cores = 2;
    let decision = decided(&mut Autoscale::default(), &on_two, "t").unwrap();
    assert_eq!(decision.variant.as_deref(), Some("small"), "{decision:?}");
    assert_eq!(decision.standby.get("large"), Some(&2), "{decision:?}");
    // With the other core free, large keeps serving while its instance loads there.
    let mut alone = snapshot(0, 4.0, vec![moving("t", 170.0, 120.0, 1, 1)]);
    alone.system.cores = 2;
    let decision = decided(&mut Autoscale::default(), &alone, "t").unwrap();
    assert_eq!((decision.variant, decision.instances), (None, Some(2)));
}

#[test]
fn a_rising_rate_is_followed_ahead_by_a_tick_and_an_instance_load() {
    // 100/s then 150/s a second later, the 10 s rate well below: 50/s more each
    // second, followed 3 s ahead (a tick, and large's 2 s load) is 300/s more. Two
    // instances of large are asked where 150/s alone (174 with the margin) needs one.
    let parameters = Parameters { keep_cheaper_loaded: false, ..Parameters::default() };
    let mut policy = Autoscale { parameters, ..Autoscale::default() };
    let first = decided(&mut policy, &snapshot(0, 4.0, vec![moving("t", 100.0, 60.0, 1, 0)]), "t");
    assert_eq!(first, None, "no slope yet, and 100/s is served");
    let rising = decided(&mut policy, &snapshot(1, 4.0, vec![moving("t", 150.0, 80.0, 1, 0)]), "t").unwrap();
    assert_eq!(rising.instances, Some(2), "150 + 24 + 3 × 50 = 324, which two serve (378)");
}

#[test]
fn a_task_runs_no_more_instances_than_the_machine_has_cores_whatever_the_budget() {
    // A budget of four cores on a machine of two: three instances of large would wait
    // on each other. 500/s: large's two serve 378, so small serves.
    let mut on_two = snapshot(0, 4.0, vec![task("t", 500.0, "large", 2, 1)]);
    on_two.system.cores = 2;
    let decision = decided(&mut Autoscale::default(), &on_two, "t").unwrap();
    assert_eq!(decision.variant.as_deref(), Some("small"), "{decision:?}");
    assert!(decision.instances.is_none_or(|n| n <= 2), "{decision:?}");
}

#[test]
fn batches_running_slower_than_their_profile_are_priced_at_the_pace_they_run() {
    // 300/s: two instances of large serve it at the profile's pace (378/s). Once its
    // batches take twice their profiled time, two serve half that: three or more are
    // asked for.
    let parameters = Parameters { keep_cheaper_loaded: false, ..Parameters::default() };
    let mut policy = Autoscale { parameters, ..Autoscale::default() };
    let ran = |s: u64, run_ms: f64| {
        let mut t = task("t", 300.0, "large", 2, 0);
        // 100 batches of 8 rows a tick: 100 · (4·8 + 4) = 3600 ms on the profile's line.
        t.variants[1].runs = Some(modelless_policy_abi::RunTotals { batches: 100 * s, rows: 800 * s, run_ms });
        snapshot(s, 8.0, vec![t])
    };
    assert_eq!(decided(&mut policy, &ran(1, 3_600.0), "t"), None, "at the profile's pace two serve it");
    assert_eq!(decided(&mut policy, &ran(2, 7_200.0), "t"), None, "still the profile's pace");
    let slower = decided(&mut policy, &ran(3, 14_400.0), "t").unwrap();
    assert!(slower.instances.is_some_and(|n| n > 2), "at twice the time, more instances: {slower:?}");
}
