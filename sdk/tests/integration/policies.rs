//! The reference policies: each module, run through the Wasm host on the fixture
//! snapshots, decides exactly as the same policy called natively.

use modelless::policy::{HostConfig, PolicyEngine};
use modelless::policy_abi::guest::Policy;
use modelless::policy_abi::{Decision, Snapshot};

use crate::common::{fixture_snapshots, policy_module};

/// Decisions of the module `name` and of `native`, tick by tick.
fn both<P: Policy>(name: &str, mut native: P, snapshots: &[Snapshot]) -> (Vec<Decision>, Vec<Decision>) {
    let engine = PolicyEngine::new(HostConfig::default()).unwrap();
    let mut module = engine.compile_file(&policy_module(name)).unwrap().instantiate(None).unwrap();
    let wasm = snapshots.iter().map(|s| module.decide(s).unwrap()).collect();
    let native = snapshots.iter().map(|s| native.decide(s)).collect();
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
