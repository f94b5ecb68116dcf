//! Policies in Python, TypeScript, Go, Zig and AssemblyScript, as
//! `scripts/policies/build_languages.sh` builds them (`make setup` runs it): each
//! decides exactly as its Rust counterpart on the fixture and on a simulated run
//! recorded with the Rust one; hostile ones in Python and TypeScript are contained as
//! core modules are, while requests are served. A language whose toolchain could not
//! be installed is skipped, and named on stderr (`--nocapture` shows which ran).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use modelless::backend::MakeBackend;
use modelless::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use modelless::policy::DecidedBy;
use modelless::policy_abi::{Decision, ServingKnobs, Snapshot, Throughput};
use modelless::{PolicyConfig, Runtime, TaskConfig, VariantConfig, WarmupConfig};
use modelless_lab::load::{LoadSpec, Pattern, TaskLoad};
use modelless_lab::simulate::{Decider, SimConfig, SimModel, WasmDecider, simulate};
use modelless_runtime::policy::{GuardedPolicy, KeepConfigured, Recorder};
use modelless_runtime::policy::{HostConfig, PolicyEngine, PolicyModule, read_ticks, replay};
use serde_json::{Value, json};

use crate::common::{crate_dir, policy_module, wait_for};

/// What the build said of each language: `built`, `skipped: why` or `failed: …`.
fn outcomes() -> BTreeMap<String, String> {
    let path = crate_dir().join("../.modelless/policies/languages.txt");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}: run scripts/setup/base.sh (make test does)", path.display()));
    text.lines().filter_map(|l| l.split_once(": ")).map(|(l, o)| (l.to_string(), o.to_string())).collect()
}

/// Whether `language`'s policies were built; a skip is said, a failure fails.
pub fn built(language: &str) -> bool {
    match outcomes().get(language).map(String::as_str) {
        Some("built") => true,
        Some(skipped) if skipped.starts_with("skipped") => {
            eprintln!("{language} policies not tested: {skipped}");
            false
        }
        other => panic!("{language} policies: {other:?} (see .modelless/policies/build/)"),
    }
}

/// (language, module, its Rust counterpart, parameters on the fixture, on the
/// simulated run).
fn counterparts() -> Vec<(&'static str, &'static str, &'static str, Value, Value)> {
    vec![
        ("python", "cpu-threshold-py", "cpu-threshold", Value::Null, Value::Null),
        (
            "typescript",
            "cheapest-meeting-slo-ts",
            "cheapest-meeting-slo",
            json!({ "min_accuracy": { "classify": 65.0 } }),
            json!({ "min_accuracy": { "classify": 65.0 } }),
        ),
        (
            "go",
            "replica-only-go",
            "replica-only",
            json!({ "queue_per_instance": 2, "scale_down_after_ticks": 2 }),
            json!({ "queue_per_instance": 4, "scale_down_after_ticks": 3 }),
        ),
        ("zig", "static-zig", "static", json!({ "variant": "mobilenetv2-0.75" }), json!({ "variant": "medium" })),
        (
            "assemblyscript",
            "schedule-as",
            "schedule",
            json!({ "variants": ["mobilenetv2-0.5", "mobilenetv2-1.0"], "instances": [1, 2], "period_ms": 2000 }),
            json!({ "variants": ["small", "large"], "instances": [1, 2], "period_ms": 7000 }),
        ),
    ]
}

/// One engine for the tests, its compiled modules kept under `.modelless/policies/
/// compiled`: an interpreter's component compiles in seconds, and loads in
/// milliseconds once compiled.
fn engine() -> Arc<PolicyEngine> {
    static ENGINE: std::sync::OnceLock<Arc<PolicyEngine>> = std::sync::OnceLock::new();
    ENGINE
        .get_or_init(|| {
            let cache = crate_dir().join("../.modelless/policies/compiled");
            let mut host = HostConfig::default().with_deadline(Duration::from_millis(200)).with_compiled_cache(cache);
            // Below the hostile modules' "huge" answers (100 KB), above every decision.
            host.max_output_bytes = 64 << 10;
            PolicyEngine::new(host).unwrap()
        })
        .clone()
}

fn parameters(value: &Value) -> Option<&Value> {
    (!value.is_null()).then_some(value)
}

fn fixture() -> Vec<Snapshot> {
    let path = crate_dir().join("../policies-wasm/fixtures/load-changes.jsonl");
    std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

#[test]
fn each_language_decides_the_fixture_as_its_rust_counterpart() {
    let engine = engine();
    for (language, module, rust, on_fixture, _) in counterparts() {
        if !built(language) {
            continue;
        }
        let mut ours =
            engine.compile_file(&policy_module(module)).unwrap().instantiate(parameters(&on_fixture)).unwrap();
        let mut theirs =
            engine.compile_file(&policy_module(rust)).unwrap().instantiate(parameters(&on_fixture)).unwrap();
        let decided: Vec<Decision> = fixture().iter().map(|s| ours.decide(s).unwrap()).collect();
        let expected: Vec<Decision> = fixture().iter().map(|s| theirs.decide(s).unwrap()).collect();
        assert_eq!(decided, expected, "{module} against {rust}");
        eprintln!("{module}: {} ticks as {rust} decides them", decided.len());
    }
}

/// The simulator tests' family, its largest variant serving, with throughputs at
/// batches of 8 in its profiles (for the policies that price by them).
fn model() -> SimModel {
    let mut model = crate::simulate::model(2);
    for variant in &mut model.tasks[0].variants {
        let fit = variant.fit;
        let per_s = 8e3 / (8.0 * fit.a_ms + fit.c_ms);
        if let Some(profile) = variant.snapshot.profile.as_mut() {
            profile.max_throughput = Some(Throughput { requests_per_s: per_s, batch_size: 8 });
        }
    }
    model
}

#[test]
fn each_language_replays_a_run_recorded_with_its_rust_counterpart() {
    let engine = engine();
    let model = model();
    let task = TaskLoad {
        task: "classify".into(),
        pattern: Pattern::Linear { start: 20.0, step: 30.0, interval_s: 4, stop: 260.0 },
        slo_ms: None,
        min_accuracy: None,
        start_s: 0,
    };
    let spec = LoadSpec { seed: 7, tasks: vec![task], rate_scale: 1.0 };
    let mut changed = 0;
    for (language, module, rust, _, on_run) in counterparts() {
        if !built(language) {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ticks.jsonl");
        let recorded = engine.compile_file(&policy_module(rust)).unwrap();
        let mut decider = |_| {
            let recorder = Recorder::open(&path).unwrap();
            let decider = WasmDecider::new(recorded.clone(), parameters(&on_run).cloned(), &model);
            Box::new(decider.with_recorder(recorder)) as Box<dyn Decider>
        };
        simulate(&model, &spec, &SimConfig::default(), &mut decider, &mut |_, _| {}).unwrap();
        let ticks = read_ticks(&path).unwrap();
        let ours = engine.compile_file(&policy_module(module)).unwrap();
        let replayed = replay(&mut ours.instantiate(parameters(&on_run)).unwrap(), &ticks);
        let differing: Vec<_> = replayed.iter().enumerate().filter(|(_, r)| r.differs != Some(false)).collect();
        assert!(differing.is_empty(), "{module} differs from the run {rust} decided: {differing:?}");
        let decisions = ticks.iter().filter(|(_, d)| d.as_ref().is_some_and(|d| !d.tasks.is_empty())).count();
        eprintln!("{module}: {} ticks replayed as {rust} decided them, {decisions} changing something", ticks.len());
        changed += decisions;
    }
    assert!(changed > 0 || counterparts().iter().all(|c| !built(c.0)), "no policy changed anything: a weak run");
}

/// The hostile module of `language` (`hostile-py`, `hostile-ts`).
fn hostile(engine: &Arc<PolicyEngine>, language: &str) -> PolicyModule {
    let suffix = if language == "python" { "py" } else { "ts" };
    engine.compile_file(&policy_module(&format!("hostile-{suffix}"))).unwrap()
}

/// The failure kinds `behaviour` may be counted as (deep recursion is an exception
/// where the interpreter sees it coming, a trap where the stack runs out first).
fn kinds(behaviour: &str) -> &'static [&'static str] {
    match behaviour {
        "loop" => &["timeout"],
        "allocate" => &["memory_limit"],
        "recurse" => &["reported", "trap"],
        "raise" => &["reported"],
        "garbage" => &["invalid_output"],
        "huge" => &["oversized_output"],
        _ => &[],
    }
}

#[test]
fn hostile_components_are_contained_counted_by_kind_and_replaced_by_a_good_reload() {
    let engine = engine();
    let snapshot = fixture().remove(0);
    let configured = ServingKnobs { variant: "mobilenetv2-1.0".into(), max_batch_size: 8, ..ServingKnobs::default() };
    for language in ["python", "typescript"] {
        if !built(language) {
            continue;
        }
        let good = if language == "python" { "cpu-threshold-py" } else { "cheapest-meeting-slo-ts" };
        for behaviour in ["loop", "allocate", "recurse", "raise", "garbage", "huge"] {
            let fallback = KeepConfigured::new([("classify".to_string(), configured.clone())]);
            let mut policy = GuardedPolicy::new(hostile(&engine, language), Some(json!({ "do": behaviour })), fallback);
            for tick in 1..=3 {
                let decided = policy.decide(&snapshot);
                let DecidedBy::Discarded(error) = &decided.by else {
                    panic!("{language} {behaviour}, tick {tick}: {:?}", decided.by)
                };
                assert!(kinds(behaviour).contains(&error.kind()), "{language} {behaviour}: {error}");
                assert_eq!(decided.decision, Decision::default(), "the last good knobs stay");
            }
            assert!(policy.on_fallback(), "{language} {behaviour}: three in a row hand over to the fallback");
            assert_eq!(policy.decide(&snapshot).by, DecidedBy::Fallback);
            assert_eq!(policy.failures().values().sum::<u64>(), 3, "{language} {behaviour}: {:?}", policy.failures());
            let good = engine.compile_file(&policy_module(good)).unwrap();
            policy.replace(good, None, Some(&snapshot)).unwrap();
            assert_eq!(policy.decide(&snapshot).by, DecidedBy::Module, "{language} {behaviour}: the reload recovers");
        }
    }
}

#[test]
fn modules_that_are_not_policies_of_either_kind_are_refused_with_their_reason() {
    let engine = engine();
    let kind = |bytes: &[u8]| engine.compile("test", bytes).err().map(|e| e.kind());
    assert_eq!(kind(b"(component)"), Some("wrong_abi"), "a component of no world");
    let wrong = "(component (core module $m) (core instance (instantiate $m)))";
    assert_eq!(kind(wrong.as_bytes()), Some("wrong_abi"));
    // A component that imports WASI is refused: the host gives none.
    let wasi = r#"(component
        (import "wasi:cli/environment@0.2.0" (instance (export "get-arguments" (func (result (list string)))))))"#;
    let refused = engine.compile("wasi", wasi.as_bytes()).unwrap_err();
    assert_eq!(refused.kind(), "instantiate", "{refused}");
}

#[test]
fn requests_are_served_while_a_hostile_python_policy_loops_and_after_the_fallback_takes_over() {
    if !built("python") {
        return;
    }
    let fake = FakeConfig { per_batch: Duration::from_millis(1), ..FakeConfig::default() };
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
    let variant =
        |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
    let task = TaskConfig::new("classify").with_variant(variant("v0", 60.0)).with_variant(variant("v1", 70.0));
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task, make).unwrap();
    let mut config = PolicyConfig::new(policy_module("hostile-py")).with_tick(Duration::from_millis(50));
    config.parameters = Some(json!({ "do": "loop" }));
    rt.start_policy(config).unwrap();
    let mut served = 0;
    let mut fallback_seen = false;
    for i in 0..2000 {
        let row = modelless::Tensor::new([1, 4], vec![i as f32; 4]).unwrap();
        rt.infer_task_blocking("classify", row, modelless::Slo::default()).unwrap();
        served += 1;
        let status = rt.policy_status().unwrap();
        if status.on_fallback {
            fallback_seen = true;
            assert_eq!(status.failures.get("timeout"), Some(&3), "{status:?}");
            break;
        }
    }
    assert!(fallback_seen, "three timeouts in a row hand over to the fallback ({served} requests served)");
    rt.reload_policy_with(policy_module("cpu-threshold-py"), json!({})).unwrap();
    let reloaded = rt.policy_status().unwrap();
    wait_for(|| rt.policy_status().unwrap().ticks > reloaded.ticks + 2);
    assert!(!rt.policy_status().unwrap().on_fallback, "the good reload decides again");
    // A component runs in shadow as a core module does: it decides, nothing applies.
    if built("typescript") {
        rt.shadow_policy_with(&policy_module("hostile-ts"), json!({ "do": "nothing" })).unwrap();
        wait_for(|| rt.policy_status().unwrap().shadow_decision.is_some());
        let status = rt.policy_status().unwrap();
        assert_eq!(status.shadow.as_deref(), Some("hostile-ts"), "{status:?}");
    }
}
