//! `modelless policy new --lang L NAME` in every language: the starter it writes
//! builds with its own `build.sh` (the toolchains `scripts/setup/policy_toolchains.sh`
//! installed) and passes `modelless policy check`. A language whose toolchain is not
//! installed is skipped, and named on stderr.

use std::path::Path;
use std::process::Command;

use crate::common::crate_dir;

/// The release CLI `make test` builds, or the debug one cargo built for the tests.
pub fn modelless() -> std::path::PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| crate_dir().join("../target"), Into::into);
    let release = Path::new(&target).join("release/modelless");
    if release.is_file() { release } else { env!("CARGO_BIN_EXE_modelless").into() }
}

/// Whether the toolchain `language` builds with is installed.
fn toolchain(language: &str) -> bool {
    let tools = crate_dir().join("../.modelless/toolchains");
    let present = match language {
        "python" => tools.join("py/bin/componentize-py").is_file(),
        "go" | "zig" => tools.join("py.stamp").is_file(),
        "typescript" | "assemblyscript" => tools.join("npm/node_modules/.bin/asc").is_file(),
        "c" => Command::new("clang").arg("--version").output().is_ok_and(|o| o.status.success()),
        _ => true,
    };
    if !present {
        eprintln!("policy new --lang {language}: not tested, its toolchain is not installed");
    }
    present
}

#[test]
fn a_starter_policy_in_every_language_builds_and_passes_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let mut checked = Vec::new();
    for language in ["python", "typescript", "go", "zig", "assemblyscript", "c", "rust"] {
        if !toolchain(language) {
            continue;
        }
        let name = format!("starter-{language}");
        let wrote = Command::new(modelless())
            .args(["policy", "new", "--lang", language, &name, "--parent"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(wrote.status.success(), "{language}: {}", String::from_utf8_lossy(&wrote.stderr));
        let folder = dir.path().join(&name);
        let built = Command::new("bash").arg(folder.join("build.sh")).output().unwrap();
        assert!(
            built.status.success(),
            "{language}: build.sh failed:\n{}{}",
            String::from_utf8_lossy(&built.stdout),
            String::from_utf8_lossy(&built.stderr)
        );
        let fixture = crate_dir().join("../policies-wasm/fixtures/load-changes.jsonl");
        let checked_out = Command::new(modelless())
            .args(["policy", "check"])
            .arg(folder.join(format!("{name}.wasm")))
            .arg("--snapshots")
            .arg(&fixture)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&checked_out.stdout);
        assert!(checked_out.status.success(), "{language}: {stdout}{}", String::from_utf8_lossy(&checked_out.stderr));
        // The starters log each task they see, and change nothing.
        assert!(stdout.contains("tick 5: {\"tasks\":[]}"), "{language}: {stdout}");
        assert!(stdout.contains("  log 2: "), "{language}: its log lines show: {stdout}");
        checked.push(language);
    }
    eprintln!("policy new: built and checked {checked:?}");
    // Writing over a folder that exists is refused.
    let again = Command::new(modelless())
        .args(["policy", "new", "--lang", "c", "starter-c", "--parent"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(!again.status.success() || !checked.contains(&"c"), "a second `policy new` into the same folder");
}
