use super::*;
use crate::policy::test_modules::{EMPTY_DECISION, answering, policy};

fn engine() -> Arc<PolicyEngine> {
    PolicyEngine::new(HostConfig::default()).unwrap()
}

fn decide(engine: &Arc<PolicyEngine>, wat: &str) -> Result<Decision, PolicyError> {
    engine.compile("test", wat.as_bytes())?.instantiate(None)?.decide(&Snapshot::default())
}

#[test]
fn a_well_formed_module_decides() {
    assert_eq!(decide(&engine(), &policy(EMPTY_DECISION, "")), Ok(Decision::default()));
}

#[test]
fn an_endless_loop_is_stopped_at_the_deadline() {
    let engine = PolicyEngine::new(HostConfig::default().with_deadline(Duration::from_millis(20))).unwrap();
    let result = decide(&engine, &policy("(loop $forever (br $forever)) (unreachable)", ""));
    assert_eq!(result, Err(PolicyError::Timeout { deadline_ms: 20 }));
}

#[test]
fn with_fuel_an_endless_loop_runs_out_of_it() {
    let engine = PolicyEngine::new(HostConfig::default().with_fuel(100_000)).unwrap();
    let result = decide(&engine, &policy("(loop $forever (br $forever)) (unreachable)", ""));
    assert_eq!(result, Err(PolicyError::OutOfFuel));
}

#[test]
fn growing_memory_to_a_gibibyte_hits_the_cap() {
    let grow = "(drop (memory.grow (i32.const 16384))) (i64.const 0)";
    assert_eq!(decide(&engine(), &policy(grow, "")), Err(PolicyError::MemoryLimit { limit_bytes: 16 << 20 }));
}

#[test]
fn deep_recursion_and_a_panic_trap() {
    let recurse = "(call $decide (local.get $ptr) (local.get $len))";
    assert!(
        matches!(decide(&engine(), &policy(recurse, "")), Err(PolicyError::Trap(m)) if m.to_string().contains("stack"))
    );
    assert!(matches!(decide(&engine(), &policy("(unreachable)", "")), Err(PolicyError::Trap(_))));
}

#[test]
fn garbage_oversized_and_out_of_bounds_output_is_refused() {
    let garbage = "(i64.or (i64.shl (i64.const 1100) (i64.const 32)) (i64.const 8))";
    assert!(matches!(
        decide(&engine(), &policy(garbage, "")),
        Err(PolicyError::UnreadableOutput { what: "a decision", .. })
    ));
    let huge = "(i64.const 100000000)";
    let refused = decide(&engine(), &policy(huge, ""));
    assert_eq!(refused, Err(PolicyError::OversizedOutput { len: 100_000_000, limit: 1 << 20 }));
    let outside = "(i64.or (i64.shl (i64.const 65000) (i64.const 32)) (i64.const 1000))";
    assert!(
        matches!(decide(&engine(), &policy(outside, "")), Err(PolicyError::InvalidOutput(m)) if m.contains("outside"))
    );
}

#[test]
fn an_error_the_policy_reports_is_its_own_kind() {
    let wat = policy(
        "(i64.or (i64.shl (i64.const 1200) (i64.const 32)) (i64.const 16))",
        r#"(data (i32.const 1200) "{\"error\":\"nope\"}")"#,
    );
    assert_eq!(decide(&engine(), &wat), Err(PolicyError::Reported("nope".into())));
}

#[test]
fn modules_that_are_not_policies_are_refused_at_compile_time() {
    let engine = engine();
    let kind = |bytes: &[u8]| engine.compile("test", bytes).err().map(|e| e.kind());
    assert_eq!(kind(b"\x7fELF not wasm at all"), Some("invalid_module"));
    let wrong_marker = policy(EMPTY_DECISION, "").replace("modelless_policy_abi_v1", "modelless_policy_abi_v2");
    assert_eq!(kind(wrong_marker.as_bytes()), Some("wrong_abi"));
    let no_decide = policy(EMPTY_DECISION, "").replace(r#"(export "decide")"#, "");
    assert_eq!(kind(no_decide.as_bytes()), Some("missing_export"));
    let foreign_import = policy(EMPTY_DECISION, "")
        .replace("(memory (export", r#"(import "env" "system" (func (param i32))) (memory (export"#);
    assert_eq!(kind(foreign_import.as_bytes()), Some("instantiate"));
}

#[test]
fn a_module_file_that_cannot_be_read_keeps_the_io_error_as_its_source() {
    use std::error::Error as _;
    let missing = std::path::Path::new("/nonexistent/policy.wasm");
    let Err(refused) = engine().compile_file(missing) else { panic!("a missing file compiled") };
    assert!(matches!(&refused, PolicyError::Read { path, .. } if path == missing), "{refused}");
    let source = refused.source().and_then(|s| s.downcast_ref::<Arc<std::io::Error>>());
    assert_eq!(source.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound), "{refused}");
    assert_eq!(refused, refused.clone(), "read failures compare equal to their clones");
}

#[test]
fn logs_are_kept_within_limits() {
    let wat = policy(
        &format!(
            "(local $i i32)
             (loop $more
                (call $log (i32.const 2) (i32.const 1300) (i32.const 5))
                (local.set $i (i32.add (local.get $i) (i32.const 1)))
                (br_if $more (i32.lt_u (local.get $i) (i32.const 1000))))
             {EMPTY_DECISION}"
        ),
        r#"(data (i32.const 1300) "hello")"#,
    )
    .replace("(memory (export", r#"(import "modelless" "log" (func $log (param i32 i32 i32))) (memory (export"#);
    let engine = engine();
    let mut instance = engine.compile("test", wat.as_bytes()).unwrap().instantiate(None).unwrap();
    instance.decide(&Snapshot::default()).unwrap();
    let logs = instance.take_logs();
    assert_eq!(logs.len(), MAX_LOG_LINES);
    assert_eq!(logs[0], PolicyLog { level: 2, message: "hello".into() });
}

#[test]
fn decision_fields_the_host_does_not_know_are_logged_as_warnings_and_counted_by_digest() {
    let wat = answering(r#"{"tasks":[{"task":"a","variant":"v","max_batch":4}],"budget":1}"#);
    let engine = engine();
    let module = engine.compile("test", wat.as_bytes()).unwrap();
    assert!(module.digest().starts_with("sha256:") && module.digest().len() == 71, "{}", module.digest());
    let metrics = crate::metrics::serving_metrics();
    let series = format!("modelless_policy_unknown_decision_fields{{policy_digest=\"{}\"}} ", module.digest());
    let counted = || {
        let text = metrics.render(&Default::default());
        text.lines().find_map(|l| l.strip_prefix(&series)).map_or(0, |n| n.parse::<u64>().unwrap())
    };
    let before = counted();
    let mut instance = module.instantiate(None).unwrap();
    let decision = instance.decide(&Snapshot::default()).unwrap();
    assert_eq!(decision.tasks[0].variant.as_deref(), Some("v"), "the known fields apply");
    let warnings: Vec<String> = instance.take_logs().into_iter().filter(|l| l.level == 1).map(|l| l.message).collect();
    assert_eq!(warnings.len(), 2, "{warnings:?}");
    // In the order the policy wrote them.
    assert!(warnings[0].starts_with("decision field `max_batch` of task `a` is not known"), "{warnings:?}");
    assert!(warnings[1].starts_with("decision field `budget` of the decision is not known"), "{warnings:?}");
    // Counted under this module's digest.
    assert_eq!(counted(), before + 2);
}
