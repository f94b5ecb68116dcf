//! `modelless policy check` says what a module's decisions hold that this host does
//! not know, rather than dropping it silently.

use std::process::Command;

use modelless_runtime::policy::test_modules::answering;

use crate::policy_new::modelless;

#[test]
fn policy_check_names_the_decision_fields_this_host_does_not_know() {
    let dir = tempfile::tempdir().unwrap();
    let module = dir.path().join("newer-abi.wat");
    std::fs::write(&module, answering(r#"{"tasks":[{"task":"classify","variant":"small","warm":true}]}"#)).unwrap();
    let checked = Command::new(modelless()).args(["policy", "check"]).arg(&module).output().unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{stdout}{}", String::from_utf8_lossy(&checked.stderr));
    assert!(stdout.contains("log 1: decision field `warm` of task `classify` is not known to this host"), "{stdout}");
    // The fields it knows still make the decision.
    assert!(stdout.contains(r#"tick 0: {"tasks":[{"task":"classify","variant":"small"}]}"#), "{stdout}");
}

/// A policy built with the Rust kit exports its parameters' schema, and the check
/// lists them with their types, defaults and descriptions; the starter's parameter
/// refused by its `init` fails the check with the policy's own message.
#[test]
fn policy_check_lists_a_rust_policys_parameters_and_reports_its_init_errors() {
    let module = crate::common::crate_dir().join("../.modelless/policies/replica-only.wasm");
    let checked = Command::new(modelless()).args(["policy", "check"]).arg(&module).output().unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(checked.status.success(), "{stdout}{}", String::from_utf8_lossy(&checked.stderr));
    assert!(
        stdout.contains("\n  scale_down_after_ticks (integer, default 10): Ticks in a row that must want fewer"),
        "{stdout}"
    );
    let wrong = Command::new(modelless())
        .args(["policy", "check"])
        .arg(&module)
        .args(["--parameters", r#"{"max_instances": "many"}"#])
        .output()
        .unwrap();
    let said = format!("{}{}", String::from_utf8_lossy(&wrong.stdout), String::from_utf8_lossy(&wrong.stderr));
    assert!(!wrong.status.success(), "{said}");
    assert!(said.contains("invalid parameters: invalid type: string \"many\", expected u32"), "{said}");
}
