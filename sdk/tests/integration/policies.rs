//! The reference policies: each module, run through the Wasm host on the fixture
//! snapshots, decides exactly as the same policy called natively; and a runtime steered
//! by a policy module, reloaded, and configured from a file.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use modelless::backend::MakeBackend;
use modelless::policy_abi::{Decision, Snapshot};
use modelless::{Error, PolicyConfig, Runtime, RuntimeConfig, TaskConfig, VariantConfig, WarmupConfig};
use modelless_policy_abi::guest::{Policy, configured};
use modelless_runtime::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use modelless_runtime::policy::{HostConfig, PolicyEngine};

use crate::common::{fixture_path, fixture_snapshots, policy_module, wait_for};

/// Decisions of the module `name` and of `native`, tick by tick.
fn both<P: Policy>(name: &str, mut native: P, snapshots: &[Snapshot]) -> (Vec<Decision>, Vec<Decision>) {
    let engine = PolicyEngine::new(HostConfig::default()).unwrap();
    let mut module = engine.compile_file(&policy_module(name)).unwrap().instantiate(None).unwrap();
    let wasm = snapshots.iter().map(|s| module.decide(s).unwrap()).collect();
    let native = snapshots.iter().map(|s| native.decide(s).unwrap()).collect();
    (wasm, native)
}

#[test]
fn static_keeps_what_each_task_had_on_its_first_tick_natively_and_as_wasm() {
    let snapshots = fixture_snapshots("load-changes");
    let (wasm, native) = both("static", modelless_policy_static::Static::default(), &snapshots);
    assert_eq!(wasm, native);
    assert!(wasm[0].tasks.is_empty(), "nothing to change on the first tick");
    // On tick 2 `classify` runs mobilenetv2-0.75 at batch 4: back to 1.0 at batch 8.
    let back = &wasm[2].tasks[0];
    assert_eq!(
        (back.task.as_str(), back.variant.as_deref(), back.max_batch_size),
        ("classify", Some("mobilenetv2-1.0"), Some(8))
    );
    assert_eq!(back.max_queue_delay_us, None);
}

#[test]
fn the_reference_policy_decides_alike_natively_and_as_wasm() {
    let snapshots = fixture_snapshots("load-changes");
    let (wasm, native) = both("reference", modelless_policy_reference::Reference::default(), &snapshots);
    assert_eq!(wasm, native);
    assert!(wasm.iter().any(|d| d.tasks.iter().any(|t| !t.standby.is_empty())), "it keeps a variant standing by");
}

#[test]
fn cpu_threshold_decides_alike_natively_and_as_wasm() {
    let snapshots = fixture_snapshots("load-changes");
    let (wasm, native) = both("cpu-threshold", modelless_policy_cpu_threshold::CpuThreshold::default(), &snapshots);
    assert_eq!(wasm, native);
    // The fixture's CPU starts at 35 %: with little demand, both tasks step up at once.
    assert!(wasm[0].tasks.iter().any(|t| t.variant.is_some()), "{:?}", wasm[0]);
}

#[test]
fn cheapest_meeting_slo_decides_alike_natively_and_as_wasm() {
    let snapshots = fixture_snapshots("load-changes");
    let native = modelless_policy_cheapest_meeting_slo::CheapestMeetingSlo::default();
    let (wasm, native) = both("cheapest-meeting-slo", native, &snapshots);
    assert_eq!(wasm, native);
    // Light load and a 100 ms target: the cheapest variant meets it.
    assert!(wasm[0].tasks.iter().any(|t| t.variant.as_deref() == Some("mobilenetv2-0.35")), "{:?}", wasm[0]);
}

#[test]
fn the_allocating_policies_decide_alike_natively_and_as_wasm() {
    let snapshots = fixture_snapshots("load-changes");
    let (wasm, native) = both("autoscale", modelless_policy_autoscale::Autoscale::default(), &snapshots);
    assert_eq!(wasm, native);
    // Tick 3 has `classify` at 210 requests a second and its p99 over the target.
    assert!(wasm[3].tasks.iter().any(|t| t.task == "classify"), "{:?}", wasm[3]);
    let (wasm, native) = both("replica-only", modelless_policy_replica_only::ReplicaOnly::default(), &snapshots);
    assert_eq!(wasm, native);
    let mut peak: modelless_policy_static_peak::StaticPeak =
        configured(serde_json::json!({ "peak_per_s": { "classify": 210.0 } })).unwrap();
    let engine = PolicyEngine::new(HostConfig::default()).unwrap();
    let parameters = Some(serde_json::json!({ "peak_per_s": { "classify": 210.0 } }));
    let mut module =
        engine.compile_file(&policy_module("static-peak")).unwrap().instantiate(parameters.as_ref()).unwrap();
    for snapshot in &snapshots {
        assert_eq!(module.decide(snapshot).unwrap(), peak.decide(snapshot).unwrap());
    }
}

#[test]
fn slo_predictive_decides_alike_natively_and_as_wasm() {
    let snapshots = fixture_snapshots("load-changes");
    let native = modelless_policy_slo_predictive::SloPredictive::default();
    let (wasm, native) = both("slo-predictive", native, &snapshots);
    assert_eq!(wasm, native);
    // Tick 3 has `classify` at 210 requests a second and its p99 over the target.
    let classify = wasm[3].tasks.iter().find(|t| t.task == "classify");
    assert!(classify.is_some_and(|t| t.variant.is_some()), "{:?}", wasm[3]);
}

#[test]
fn the_c_policy_decides_alike_natively_and_as_wasm() {
    let module = policy_module("queue-guard");
    let native = module.parent().unwrap().join("native/queue-guard");
    let fixture = fixture_path("load-changes");
    let printed = std::process::Command::new(&native).arg(&fixture).output().unwrap();
    assert!(printed.status.success(), "{}", String::from_utf8_lossy(&printed.stderr));
    let native: Vec<Decision> =
        String::from_utf8(printed.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let engine = PolicyEngine::new(HostConfig::default()).unwrap();
    let mut wasm = engine.compile_file(&module).unwrap().instantiate(None).unwrap();
    let decided: Vec<Decision> = fixture_snapshots("load-changes").iter().map(|s| wasm.decide(s).unwrap()).collect();
    assert_eq!(decided, native);
    // Tick 3: `classify` holds 40 requests (five batches of 8) while delaying batches.
    assert_eq!(decided[3].tasks[0].max_queue_delay_us, Some(0));
    assert!(decided.iter().enumerate().all(|(i, d)| i == 3 || d.tasks.is_empty()));
}

/// A runtime serving task `classify` (fake variants v0 active, v1) steered by `static`.
fn steered_runtime() -> Runtime {
    let fake = FakeConfig { per_batch: Duration::from_millis(1), ..FakeConfig::default() };
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
    let variant =
        |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
    let task = TaskConfig::new("classify").with_variant(variant("v0", 60.0)).with_variant(variant("v1", 70.0));
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task, make).unwrap();
    rt.start_policy(PolicyConfig::new(policy_module("static")).with_tick(Duration::from_millis(30))).unwrap();
    rt
}

#[test]
fn the_static_module_steers_a_task_back_to_its_configured_variant() {
    let rt = steered_runtime();
    // `static` keeps what it saw on its first tick.
    wait_for(|| rt.policy_status().unwrap().ticks > 0);
    rt.switch_variant("classify", "v1").unwrap();
    wait_for(|| rt.task_status("classify").unwrap().active == "v0");
    let status = rt.policy_status().unwrap();
    assert!(status.ticks > 0 && status.switches >= 1 && status.failures.is_empty(), "{status:?}");
    assert_eq!(status.policy, "static");
}

#[test]
fn a_task_without_a_latency_target_under_slo_predictive_is_reported_in_the_policy_status() {
    let rt = steered_runtime();
    rt.reload_policy(policy_module("slo-predictive")).unwrap();
    wait_for(|| rt.policy_status().unwrap().reports.iter().any(|r| r.contains("no latency target")));
    let status = rt.policy_status().unwrap();
    let report = status.reports.iter().find(|r| r.contains("no latency target")).unwrap();
    assert!(report.starts_with("policy: task `classify`") && report.contains("latency_slo_ms"), "{report}");
    // Said once, not every tick.
    let ticks = status.ticks;
    wait_for(|| rt.policy_status().unwrap().ticks > ticks + 3);
    let said = rt.policy_status().unwrap().reports.iter().filter(|r| r.contains("no latency target")).count();
    assert_eq!(said, 1);
}

#[test]
fn a_task_slo_predictive_cannot_price_is_reported_naming_the_variants_without_profiles() {
    let fake = FakeConfig { per_batch: Duration::from_millis(1), ..FakeConfig::default() };
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
    let variant =
        |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
    let task = TaskConfig::new("classify")
        .with_latency_slo_ms(100.0)
        .with_variant(variant("v0", 60.0))
        .with_variant(variant("v1", 70.0));
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task, make).unwrap();
    let policy = PolicyConfig::new(policy_module("slo-predictive")).with_tick(Duration::from_millis(30));
    rt.start_policy(policy).unwrap();
    let held = |r: &String| r.contains("is held on");
    wait_for(|| rt.policy_status().unwrap().reports.iter().any(held));
    let status = rt.policy_status().unwrap();
    let report = status.reports.iter().find(|r| held(r)).unwrap();
    assert!(report.starts_with("policy: task `classify` is held on `v0`"), "{report}");
    assert!(report.contains("none for `v0`, `v1`") && report.contains("modelless profile"), "{report}");
    assert_eq!(rt.task_status("classify").unwrap().active, "v0", "held");
}

#[test]
fn a_reload_from_a_broken_file_is_refused_and_the_running_policy_stays() {
    let rt = steered_runtime();
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("broken-policy.wasm");
    std::fs::write(&broken, b"\0asm\x01\0\0\0 truncated").unwrap();
    assert!(rt.reload_policy(&broken).is_err());
    // The running policy was neither replaced nor stopped: it goes on deciding.
    let refused = rt.policy_status().unwrap();
    assert_eq!((refused.policy.as_str(), refused.reloads), ("static", 0), "{refused:?}");
    wait_for(|| rt.policy_status().unwrap().ticks > refused.ticks + 2);
    rt.switch_variant("classify", "v1").unwrap();
    wait_for(|| rt.task_status("classify").unwrap().active == "v0");
    rt.reload_policy(policy_module("static")).unwrap();
    let status = rt.policy_status().unwrap();
    assert_eq!((status.policy.as_str(), status.reloads), ("static", 1));
    rt.stop_policy();
    assert!(rt.policy_status().is_none());
}

#[test]
fn the_config_file_names_the_policy_and_its_settings() {
    let text = r#"
        [policy]
        module = "static.wasm"
        tick_ms = 250
        watch = true
        parameters = { target_cpu = 65 }
    "#;
    let config = RuntimeConfig::from_toml(text, Path::new("/policies")).unwrap();
    let policy = config.policy.unwrap();
    assert_eq!(policy.module, Path::new("/policies/static.wasm"));
    assert_eq!((policy.tick_ms, policy.deadline_ms, policy.watch), (250, 10, true));
    assert_eq!(policy.parameters.unwrap()["target_cpu"], 65);
    let wrong = RuntimeConfig::from_toml("[policy]\nmodule = \"p.wasm\"\ntick = 5\n", Path::new("."));
    assert!(matches!(&wrong, Err(e @ Error::ConfigRefused { .. }) if e.to_string().contains("tick")), "{wrong:?}");
}

#[test]
fn a_recorded_run_replays_to_the_same_decisions_and_a_shadow_is_never_applied() {
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("sdk-record.jsonl");
    let rt = steered_runtime();
    let mut config = PolicyConfig::new(policy_module("static")).with_tick(Duration::from_millis(30));
    config.record = Some(record.clone());
    rt.start_policy(config).unwrap();
    // A shadow that wants v1 on every tick, beside `static`, which keeps v0.
    let always_v1 = serde_json::json!({ "variants": ["v1"], "period_ms": 1000 });
    rt.shadow_policy_with(&policy_module("schedule"), always_v1).unwrap();
    wait_for(|| rt.policy_status().unwrap().shadow_decision.is_some());
    let first = rt.policy_status().unwrap();
    assert_eq!(first.shadow.as_deref(), Some("schedule"));
    let wanted = first.shadow_decision.unwrap();
    assert_eq!(wanted.tasks[0].variant.as_deref(), Some("v1"), "{wanted:?}");
    // Several ticks later, v0 still serves and nothing switched.
    wait_for(|| rt.policy_status().unwrap().ticks > first.ticks + 3);
    let status = rt.policy_status().unwrap();
    assert_eq!(rt.task_status("classify").unwrap().active, "v0", "the shadow's decision was applied");
    assert_eq!(status.switches, 0, "{status:?}");
    rt.stop_policy();
    let ticks = modelless_runtime::policy::read_ticks(&record).unwrap();
    assert!(ticks.len() >= 3 && ticks.iter().all(|t| t.1.is_some()));
    let engine = PolicyEngine::new(HostConfig::default()).unwrap();
    let mut again = engine.compile_file(&policy_module("static")).unwrap().instantiate(None).unwrap();
    let replayed = modelless_runtime::policy::replay(&mut again, &ticks);
    assert!(replayed.iter().all(|r| r.differs == Some(false)), "{replayed:?}");
}
