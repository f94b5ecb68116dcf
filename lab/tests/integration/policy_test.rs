//! `modelless policy test`: the reference policy meets the expectations written beside
//! it, and a wrong expectation fails the run, naming its tick, task and field.

use std::process::Command;

use crate::common::crate_dir;
use crate::policy_new::modelless;

fn policy_test(expectations: &std::path::Path) -> (bool, String) {
    let module = crate_dir().join("../.modelless/policies/reference.wasm");
    let ran = Command::new(modelless()).args(["policy", "test"]).arg(&module).arg(expectations).output().unwrap();
    (ran.status.success(), format!("{}{}", String::from_utf8_lossy(&ran.stdout), String::from_utf8_lossy(&ran.stderr)))
}

#[test]
fn the_reference_policy_meets_its_expectations_and_a_wrong_one_is_named() {
    let written = crate_dir().join("../policies-wasm/reference/expect/load-changes.toml");
    let (passed, said) = policy_test(&written);
    assert!(passed, "{said}");
    assert!(said.contains("6 ticks, 4 expectations\nok"), "{said}");
    // The same file with tick 1's variant for classify wrong: beside the original, so
    // that its snapshots resolve alike.
    let text = std::fs::read_to_string(&written).unwrap();
    let wrong_text =
        text.replace(r#"variant = "mobilenetv2-1.4", instances = 2"#, r#"variant = "mobilenetv2-1.0", instances = 2"#);
    assert_ne!(wrong_text, text);
    let dir = tempfile::tempdir().unwrap();
    let wrong = dir.path().join("wrong.toml");
    let snapshots = crate_dir().join("../policies-wasm/fixtures/load-changes.jsonl");
    let wrong_text = wrong_text.replace("../../fixtures/load-changes.jsonl", &snapshots.display().to_string());
    std::fs::write(&wrong, wrong_text).unwrap();
    let (passed, said) = policy_test(&wrong);
    assert!(!passed, "{said}");
    assert!(
        said.contains(
            r#"tick 1: task `classify`, field `variant`: expected "mobilenetv2-1.0", decided "mobilenetv2-1.4""#
        ),
        "{said}"
    );
    assert!(said.contains("1 expectations did not hold"), "{said}");
}
