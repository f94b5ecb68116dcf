//! The simulator: one seed gives one run; the Wasm policies steer simulated tasks
//! through the same snapshots as real ones; more servers behind least-connections
//! take more load; the oracle bounds what a policy can reach; a model calibrated on
//! real runs serves as they ran.

use std::time::Duration;

use modelless::policy_abi::{Decision, LatencyFit, Snapshot, TaskDecision, VariantCost, VariantSnapshot};
use modelless_lab::load::{LoadSpec, Outcome, Pattern, RunResult, SecondRuns, TaskLoad};
use modelless_lab::simulate::{
    CAPACITIES, Decider, Oracle, SimConfig, SimModel, SimTask, SimVariant, WasmDecider, actions_on_recorded, cheapest,
    decided, effective_accuracy, optimum, share_of_gain, simulate,
};
use modelless_runtime::policy::core::Action;
use modelless_runtime::policy::{EarlyTick, Recorder};
use modelless_runtime::policy::{HostConfig, PolicyEngine, read_ticks, replay};

use crate::common::policy_module;

/// A family like the MobileNetV2 widths' profiles here: (name, accuracy, a ms, c ms).
const FAMILY: [(&str, f64, f64, f64); 3] =
    [("small", 60.0, 1.5, 0.5), ("medium", 70.0, 4.0, 2.0), ("large", 75.0, 8.0, 4.0)];

pub(crate) fn model(active: usize) -> SimModel {
    let variants = FAMILY
        .iter()
        .map(|&(name, accuracy, a_ms, c_ms)| {
            let fit = LatencyFit { a_ms, c_ms, r2: 0.999 };
            SimVariant {
                name: name.into(),
                accuracy,
                fit,
                spread: 0.1,
                load_ms: 300.0,
                loaded: true,
                max_batch_size: 8,
                max_queue_delay_us: 0,
                max_queue_size: 4096,
                calibration: None,
                snapshot: VariantSnapshot {
                    name: name.into(),
                    accuracy,
                    profile: Some(VariantCost { fit: Some(fit), ..VariantCost::default() }),
                    ..VariantSnapshot::default()
                },
            }
        })
        .collect();
    SimModel {
        cores: 2,
        tasks: vec![SimTask { name: "classify".into(), slo_ms: Some(150.0), active, variants, spill: true }],
        budget: None,
    }
}

fn load(pattern: Pattern) -> LoadSpec {
    let task = TaskLoad { task: "classify".into(), pattern, slo_ms: None, min_accuracy: None, start_s: 0 };
    LoadSpec { seed: 5, tasks: vec![task], rate_scale: 1.0 }
}

/// A rise from 20/s to 200/s and back: the large variant keeps up with about 110/s.
fn rising() -> LoadSpec {
    load(Pattern::Linear { start: 20.0, step: 20.0, interval_s: 5, stop: 200.0 })
}

fn wasm(name: &str, model: &SimModel) -> Box<dyn Decider> {
    let module = PolicyEngine::new(HostConfig::default()).unwrap().compile_file(&policy_module(name)).unwrap();
    Box::new(WasmDecider::new(module, None, model))
}

fn run(model: &SimModel, spec: &LoadSpec, config: &SimConfig, policy: &str) -> RunResult {
    let mut decider = |_| match policy {
        "oracle" => Box::new(Oracle::knowing(model, 0.8)) as Box<dyn Decider>,
        name => wasm(name, model),
    };
    simulate(model, spec, config, &mut decider, &mut |_, _| {}).unwrap().0
}

#[test]
fn one_seed_gives_one_run_and_another_seed_another() {
    let (model, spec) = (model(2), rising());
    let config = SimConfig { seed: 3, ..SimConfig::default() };
    let first = run(&model, &spec, &config, "slo-predictive");
    let again = run(&model, &spec, &config, "slo-predictive");
    assert_eq!(first.records, again.records);
    assert_eq!(first.samples, again.samples);
    assert_eq!(first.records.len(), spec.schedule().unwrap().arrivals.len());
    let other = run(&model, &spec, &SimConfig { seed: 4, ..config }, "slo-predictive");
    assert_eq!(other.records.len(), first.records.len(), "the arrivals follow the load's seed");
    assert_ne!(other.records, first.records, "the batch times follow the simulation's");
}

#[test]
fn a_wasm_policy_steers_simulated_tasks_and_beats_serving_the_largest_variant_regardless() {
    let (model, spec) = (model(2), rising());
    let config = SimConfig::default();
    // Regardless: the large variant answers every request, none spills to another.
    let mut large_only = model.clone();
    large_only.tasks[0].spill = false;
    let fixed = run(&large_only, &spec, &config, "static");
    let steered = run(&model, &spec, &config, "slo-predictive");
    let (fixed, steered) = (&fixed.summaries()[0], &steered.summaries()[0]);
    assert_eq!(fixed.variant_switches, 0);
    assert!(fixed.slo_violation_pct > 20.0, "200/s on the large variant: {fixed:?}");
    assert!(fixed.rejected + fixed.expired > 500, "requests that could not be answered in time: {fixed:?}");
    assert!(steered.variant_switches >= 1, "down as the load rises: {steered:?}");
    assert!(steered.slo_violation_pct < 1.0, "{steered:?}");
    assert!(steered.effective_accuracy > fixed.effective_accuracy);
}

#[test]
fn requests_end_as_the_model_says_rejected_when_the_queue_is_full_expired_past_their_deadline() {
    let mut model = model(2);
    model.tasks[0].variants[2].max_queue_size = 16;
    let spec = load(Pattern::Constant { rate: 400.0, duration_s: 5 });
    let result = run(&model, &spec, &SimConfig::default(), "static");
    let count = |status| result.records.iter().filter(|r| r.status == status).count();
    assert!(count(Outcome::Rejected) > 1000, "{} rejected", count(Outcome::Rejected));
    assert!(count(Outcome::Served) > 100);
    // Batches of 8 take 68 ms: a full queue of 16 waits at most about 3 of them.
    assert!(result.records.iter().filter(|r| r.status == Outcome::Served).all(|r| r.latency_ms < 4.0 * 68.0 * 1.5));
    assert!(result.records.iter().filter(|r| r.status == Outcome::Served).all(|r| r.batch_size.is_some()));
}

#[test]
fn more_servers_behind_least_connections_take_more_load() {
    let (model, spec) = (model(2), load(Pattern::Constant { rate: 180.0, duration_s: 30 }));
    let one = run(&model, &spec, &SimConfig::default(), "static");
    let two = run(&model, &spec, &SimConfig { servers: 2, ..SimConfig::default() }, "static");
    let (one, two) = (&one.summaries()[0], &two.summaries()[0]);
    assert!(one.slo_violation_pct > 20.0, "{one:?}");
    assert!(two.slo_violation_pct < 0.5, "90/s each: {two:?}");
}

#[test]
fn the_oracle_serves_the_next_second_within_its_utilisation_limit() {
    let (model, spec) = (model(2), rising());
    let oracle = run(&model, &spec, &SimConfig::default(), "oracle").summaries()[0].clone();
    let cheapest_meeting = run(&model, &spec, &SimConfig::default(), "cheapest-meeting-slo").summaries()[0].clone();
    assert!(oracle.slo_violation_pct < 0.5, "{oracle:?}");
    // Its limit leaves accuracy on the table, so it is no bound: the optimum is.
    assert!(oracle.effective_accuracy > cheapest_meeting.effective_accuracy, "{oracle:?}\n{cheapest_meeting:?}");
}

#[test]
fn a_model_calibrated_on_runs_twice_as_slow_serves_twice_as_slow_and_its_oracle_picks_cheaper() {
    // The medium variant serves first: the large one, twice as slow, would fall
    // behind before the oracle's first decision.
    let model = model(1);
    // Real runs in which every variant's batches of two rows took twice their line.
    let runs: Vec<SecondRuns> = (0..20)
        .flat_map(|second| {
            model.tasks[0].variants.iter().map(move |v| SecondRuns {
                second,
                task: "classify".into(),
                variant: v.name.clone(),
                batches: 10,
                rows: 20,
                run_ms: 2.0 * 10.0 * v.fit.predict_ms(2),
            })
        })
        .collect();
    let slower = model.calibrated(&runs).unwrap();
    let median = |model: &SimModel, policy: &str, rate: f64| {
        let result = run(model, &load(Pattern::Constant { rate, duration_s: 20 }), &SimConfig::default(), policy);
        let mut latencies: Vec<f64> = result.records.iter().map(|r| r.latency_ms).collect();
        latencies.sort_by(f64::total_cmp);
        (latencies[latencies.len() / 2], result.summaries()[0].clone())
    };
    // 10/s on the largest variant (the static policy's): batches of one row, 12 ms by the line.
    let (profiled, _) = median(&model, "static", 10.0);
    let (calibrated, _) = median(&slower, "static", 10.0);
    assert!((calibrated / profiled - 2.0).abs() < 0.2, "p50 {profiled} ms, calibrated {calibrated} ms");
    // 60/s: the large variant takes 0.51 of the executor by the profile, 1.02 as it ran.
    let (_, oracle) = median(&model, "oracle", 60.0);
    let (_, oracle_slower) = median(&slower, "oracle", 60.0);
    assert!(oracle.effective_accuracy > 74.0, "the large variant after the first second: {oracle:?}");
    assert!(oracle_slower.effective_accuracy < 71.0, "the medium one: {oracle_slower:?}");
    assert!(oracle_slower.slo_violation_pct < 0.5, "{oracle_slower:?}");
}

#[test]
fn a_simulated_run_records_its_ticks_and_the_policy_replays_them_alike() {
    let (model, spec) = (model(2), rising());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ticks.jsonl");
    let module =
        PolicyEngine::new(HostConfig::default()).unwrap().compile_file(&policy_module("slo-predictive")).unwrap();
    let mut decider = |_| {
        let recorder = Recorder::open(&path).unwrap();
        Box::new(WasmDecider::new(module.clone(), None, &model).with_recorder(recorder)) as Box<dyn Decider>
    };
    let (_, stats) = simulate(&model, &spec, &SimConfig::default(), &mut decider, &mut |_, _| {}).unwrap();
    let ticks = read_ticks(&path).unwrap();
    assert_eq!(ticks.len() as u64, stats.ticks);
    let switched = ticks.iter().filter(|(_, d)| d.as_ref().is_some_and(|d| !d.tasks.is_empty())).count();
    assert!(switched > 0, "the rise makes the policy switch");
    // The same module, fresh, decides each recorded tick as it was decided.
    let replayed = replay(&mut module.instantiate(None).unwrap(), &ticks);
    assert!(replayed.iter().all(|r| r.differs == Some(false)), "{replayed:?}");
}

#[test]
fn an_early_tick_answers_a_flash_crowd_before_the_tick_is_due() {
    // 40/s for 10 s, then 250/s: the large variant falls behind at once.
    let (model, spec) = (model(2), load(Pattern::Linear { start: 40.0, step: 210.0, interval_s: 10, stop: 250.0 }));
    let mut decider = |_| wasm("slo-predictive", &model);
    let late = SimConfig::default();
    let early = SimConfig {
        early_tick: Some(EarlyTick { queue_length: 8, min_gap: Duration::from_millis(100) }),
        ..late.clone()
    };
    let (on_time, plain) = simulate(&model, &spec, &late, &mut decider, &mut |_, _| {}).unwrap();
    let (sooner, eager) = simulate(&model, &spec, &early, &mut decider, &mut |_, _| {}).unwrap();
    assert_eq!(plain.early_ticks, 0);
    assert!(eager.early_ticks > 0 && eager.ticks > plain.ticks, "{eager:?}");
    let violations = |r: &RunResult| r.summaries()[0].slo_violations;
    assert!(
        violations(&sooner) < violations(&on_time),
        "{} early, {} on time",
        violations(&sooner),
        violations(&on_time)
    );
}

#[test]
fn a_load_the_simulator_cannot_model_is_refused() {
    let model = model(2);
    let mut asking = load(Pattern::Constant { rate: 10.0, duration_s: 2 });
    asking.tasks[0].min_accuracy = Some(70.0);
    let mut unknown = load(Pattern::Constant { rate: 10.0, duration_s: 2 });
    unknown.tasks[0].task = "segment".into();
    for (spec, expected) in [(asking, "min_accuracy"), (unknown, "unknown task")] {
        let mut decider = |_| Box::new(Oracle::default()) as Box<dyn Decider>;
        let refused = simulate(&model, &spec, &SimConfig::default(), &mut decider, &mut |_, _| {}).err();
        assert!(refused.as_ref().is_some_and(|e| e.to_string().contains(expected)), "{refused:?}");
    }
}

/// Decides once: the task to `variant` with batches of one; every later tick, nothing.
struct SwitchOnce {
    variant: &'static str,
    decided: bool,
}

impl Decider for SwitchOnce {
    fn tick(&mut self, _: Duration, snapshot: Snapshot, _: &[f64]) -> Vec<Action> {
        if std::mem::replace(&mut self.decided, true) {
            return Vec::new();
        }
        let switch = TaskDecision {
            variant: Some(self.variant.into()),
            max_batch_size: Some(1),
            ..TaskDecision::keep("classify")
        };
        decided(&snapshot, &Decision { tasks: vec![switch] })
    }
}

#[test]
fn a_decision_made_once_that_switches_and_sets_knobs_sets_them_on_the_variant_switched_to() {
    // Loaded, medium takes over at once; unloaded, once its load is done.
    for loaded in [true, false] {
        let mut model = model(2);
        model.tasks[0].variants[1].loaded = loaded;
        let spec = load(Pattern::Constant { rate: 120.0, duration_s: 10 });
        let mut decider = |_| Box::new(SwitchOnce { variant: "medium", decided: false }) as Box<dyn Decider>;
        let (result, stats) = simulate(&model, &spec, &SimConfig::default(), &mut decider, &mut |_, _| {}).unwrap();
        assert_eq!(stats.switches, 1);
        let on_medium: Vec<u32> = result
            .records
            .iter()
            .filter(|r| r.variant.as_deref() == Some("medium"))
            .filter_map(|r| r.batch_size)
            .collect();
        assert!(on_medium.len() > 500, "loaded {loaded}: {} answered by medium", on_medium.len());
        let largest = on_medium.iter().max().copied();
        assert_eq!(largest, Some(1), "loaded {loaded}: medium forms the batches of one it was switched to with");
    }
}

/// A family whose accuracies lie close together, as the EfficientNet-Lite0/1/2 profiles
/// here: (name, accuracy, a ms, c ms); batches of up to 8, a 2 ms queue delay, an SLO
/// of 100 ms. The large variant answers about 59 requests a second.
const CLOSE_FAMILY: [(&str, f64, f64, f64); 3] =
    [("lite0", 75.1, 8.2, 2.6), ("lite1", 76.7, 13.3, 0.6), ("lite2", 77.6, 16.6, 3.0)];

fn close_model() -> SimModel {
    let mut model = model(0);
    model.tasks[0].slo_ms = Some(100.0);
    // The policy's choice alone: no request spills to another variant.
    model.tasks[0].spill = false;
    for (variant, &(name, accuracy, a_ms, c_ms)) in model.tasks[0].variants.iter_mut().zip(&CLOSE_FAMILY) {
        let fit = LatencyFit { a_ms, c_ms, r2: 0.999 };
        (variant.name, variant.accuracy, variant.fit, variant.max_queue_delay_us) = (name.into(), accuracy, fit, 2_000);
        variant.snapshot.name = name.into();
        variant.snapshot.accuracy = accuracy;
        variant.snapshot.profile = Some(VariantCost { fit: Some(fit), ..VariantCost::default() });
    }
    model
}

/// Each second's active variant, from the run's samples.
fn actives(result: &RunResult) -> Vec<String> {
    result.samples.iter().filter_map(|s| s.active.clone()).collect()
}

#[test]
fn a_steady_load_keeps_one_variant_the_most_accurate_that_meets_the_slo() {
    let model = close_model();
    let early = SimConfig {
        early_tick: Some(EarlyTick { queue_length: 8, min_gap: Duration::from_millis(20) }),
        ..SimConfig::default()
    };
    for share in [0.15, 0.3, 0.6] {
        let spec = load(Pattern::Constant { rate: 59.0 * share, duration_s: 60 });
        let steered = run(&model, &spec, &early, "slo-predictive");
        let served = actives(&steered);
        let switches = served[5..].windows(2).filter(|w| w[0] != w[1]).count();
        assert!(switches <= 1, "at {share} of lite2's capacity: {served:?}");
        // The most accurate variant that, served alone, keeps 99.5 % in time.
        let meeting = CLOSE_FAMILY
            .iter()
            .rev()
            .map(|&(name, ..)| name)
            .find(|&name| {
                let mut decider = |_| {
                    let module = PolicyEngine::new(HostConfig::default()).unwrap();
                    let module = module.compile_file(&policy_module("static")).unwrap();
                    let parameters = serde_json::json!({ "variant": name });
                    Box::new(WasmDecider::new(module, Some(parameters), &model)) as Box<dyn Decider>
                };
                let (alone, _) = simulate(&model, &spec, &early, &mut decider, &mut |_, _| {}).unwrap();
                alone.summaries()[0].slo_violation_pct < 0.5
            })
            .unwrap();
        assert_eq!(served.last().map(String::as_str), Some(meeting), "at {share}: {served:?}");
        if share < 0.5 {
            assert_eq!(meeting, "lite2");
        }
    }
}

#[test]
fn the_offline_optimum_bounds_the_policies_and_their_share_of_the_gain_counts_from_the_cheapest() {
    let (model, spec) = (model(2), rising());
    let config = SimConfig::default();
    let found = optimum(&model, &spec, &config, &mut |_, _| {}).unwrap();
    let (floor, _) = cheapest(&model, &spec, &config).unwrap();
    let steered = run(&model, &spec, &config, "slo-predictive");
    let largest = run(&model, &spec, &config, "static");
    let (best, least) = (effective_accuracy(&found.result), effective_accuracy(&floor));
    // The large variant serves until the first tick switches.
    let after_first_tick = floor.records.iter().filter(|r| r.sent_s >= 1.1);
    assert!(after_first_tick.clone().all(|r| r.variant.as_deref().is_none_or(|v| v == "small")), "the cheapest");
    for other in [&steered, &largest] {
        assert!(best >= effective_accuracy(other), "{best} against {}", effective_accuracy(other));
    }
    assert!(found.result.summaries()[0].slo_violation_pct < 0.5, "{:?}", found.result.summaries()[0]);
    let share = share_of_gain(effective_accuracy(&steered), least, best).unwrap();
    assert!(share > 0.5 && share <= 1.0, "{share}");
    assert!(found.tried.len() > CAPACITIES.len(), "plans at every capacity, then refined");
}

#[test]
fn recorded_ticks_with_a_refused_switch_get_the_runtimes_actions_from_the_simulator() {
    use std::sync::Arc;

    use modelless::backend::MakeBackend;
    use modelless::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use modelless::{PolicyConfig, Runtime, TaskConfig, VariantConfig, WarmupConfig};
    use modelless_runtime::policy::RecordedTick;
    use modelless_runtime::policy::core::Asked;

    // v1 answers rows of 5 where the task (v0's signature) has 4: it cannot serve.
    let make: MakeBackend = Arc::new(|variant, _| {
        let width = if variant.name == "v1" { 5 } else { 4 };
        FakeBackend::factory(FakeConfig { width, ..FakeConfig::default() }, BatchLog::default())
    });
    let variant =
        |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
    let task = TaskConfig::new("classify").with_variant(variant("v0", 60.0)).with_variant(variant("v1", 70.0));
    let runtime = Runtime::builder().build().unwrap();
    runtime.add_task_with(task, make).unwrap();
    runtime.load_variant("classify", "v1").unwrap_err();

    // The static policy pinned to v1 asks for it, with an oversized batch, every tick.
    let dir = tempfile::tempdir().unwrap();
    let recording = dir.path().join("ticks.jsonl");
    let mut policy = PolicyConfig::new(policy_module("static"))
        .with_parameters(serde_json::json!({ "variant": "v1" }))
        .with_tick(Duration::from_millis(20));
    policy.record = Some(recording.clone());
    runtime.start_policy(policy).unwrap();
    let started = std::time::Instant::now();
    let read = || -> Vec<RecordedTick> {
        let text = std::fs::read_to_string(&recording).unwrap_or_default();
        text.lines().filter_map(|line| serde_json::from_str(line).ok()).collect()
    };
    while read().len() < 3 {
        assert!(started.elapsed() < Duration::from_secs(30), "the control loop recorded no ticks");
        std::thread::sleep(Duration::from_millis(20));
    }
    runtime.stop_policy();
    let ticks = read();
    let refused = |actions: &[Action]| {
        actions
            .iter()
            .any(|a| matches!(a, Action::Refuse { variant, reason, .. } if variant == "v1" && !reason.is_empty()))
    };
    assert!(ticks.iter().all(|t| refused(&t.actions)), "the runtime refused every switch: {:?}", ticks[0].actions);

    // A simulated server of the same task, its variants as the runtime reports them.
    let snapshots = runtime.variant_snapshots("classify").unwrap();
    let variants = snapshots
        .into_iter()
        .map(|snapshot| SimVariant {
            name: snapshot.name.clone(),
            accuracy: snapshot.accuracy,
            fit: LatencyFit { a_ms: 1.0, c_ms: 1.0, r2: 1.0 },
            spread: 0.0,
            load_ms: 0.0,
            loaded: snapshot.state == modelless::status::VariantState::Ready,
            max_batch_size: snapshot.batch_ceiling.unwrap(),
            max_queue_delay_us: 0,
            max_queue_size: 64,
            calibration: None,
            snapshot,
        })
        .collect();
    let task = SimTask { name: "classify".into(), slo_ms: None, active: 0, variants, spill: true };
    let model = SimModel { cores: 2, tasks: vec![task], budget: None };
    // The same policy steers it, through the runtime's controller, at the same times.
    let module = PolicyEngine::new(HostConfig::default()).unwrap().compile_file(&policy_module("static")).unwrap();
    let mut decider = WasmDecider::new(module, Some(serde_json::json!({ "variant": "v1" })), &model);
    let simulated = actions_on_recorded(&model, &ticks, &mut decider);
    assert!(simulated.iter().flatten().any(|a| matches!(a, Action::Refuse { asked: Asked::Switch, .. })));
    for (tick, actions) in ticks.iter().zip(&simulated) {
        assert_eq!(actions, &tick.actions, "tick {}: the simulator did otherwise", tick.snapshot.tick);
    }
}
