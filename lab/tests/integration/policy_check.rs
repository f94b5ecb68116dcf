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
