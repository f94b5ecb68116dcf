//! Every language kit's rules (the serving variant, whether a variant may serve, the
//! cores instances hold) answer the cases the Rust rules, which the host computes its
//! budget with, answered: `policy-abi/schema/rules-cases.json`. A kit whose toolchain
//! was not installed is skipped, and named.

use std::path::PathBuf;
use std::process::{Command, Output};

use crate::common::crate_dir;
use crate::policy_languages::built;

fn root() -> PathBuf {
    crate_dir().join("..")
}

fn toolchains() -> PathBuf {
    root().join(".modelless/toolchains")
}

fn cases() -> PathBuf {
    root().join("policy-abi/schema/rules-cases.json")
}

fn passed(language: &str, output: Output) {
    let said = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "{language} kit's rules differ from the host's:\n{said}");
}

/// Copies `files` into a fresh folder, for toolchains that read only files below them.
fn beside(files: &[PathBuf]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for file in files {
        std::fs::copy(file, dir.path().join(file.file_name().unwrap())).unwrap();
    }
    dir
}

#[test]
fn every_kits_rules_answer_as_the_host() {
    let kits = root().join("policies-wasm");
    let python = Command::new("python3")
        .args(["-m", "modelless_policy.rules"])
        .arg(cases())
        .current_dir(kits.join("python"))
        .output()
        .unwrap();
    passed("python", python);
    if built("go") {
        let tools = toolchains();
        let go = Command::new(tools.join("py/bin/go"))
            .args(["test", "./policy/"])
            .current_dir(kits.join("go"))
            .env("GOCACHE", tools.join("go-cache"))
            .env("GOPATH", tools.join("go-path"))
            .env("GOFLAGS", "-mod=mod")
            .env("GOTOOLCHAIN", "local")
            .output()
            .unwrap();
        passed("go", go);
    }
    if built("typescript") {
        let kit = kits.join("typescript/kit");
        let out = tempfile::tempdir().unwrap();
        let compiled = Command::new(toolchains().join("npm/node_modules/.bin/tsc"))
            .arg("--outDir")
            .arg(out.path())
            .args(["--module", "commonjs", "--target", "es2020", "--strict", "--skipLibCheck"])
            .args([kit.join("rules.ts"), kit.join("rules_check.ts")])
            .output()
            .unwrap();
        passed("typescript (tsc)", compiled);
        let checked = Command::new("node").arg(out.path().join("rules_check.js")).arg(cases()).output().unwrap();
        passed("typescript", checked);
    }
    if built("zig") {
        let kit = kits.join("zig/kit");
        let dir = beside(&[kit.join("rules.zig"), kit.join("types.zig"), cases()]);
        let tools = toolchains();
        let zig = Command::new(tools.join("py/bin/python"))
            .args(["-m", "ziglang", "test", "rules.zig"])
            .current_dir(dir.path())
            .env("ZIG_GLOBAL_CACHE_DIR", tools.join("zig-cache"))
            .env("ZIG_LOCAL_CACHE_DIR", tools.join("zig-cache"))
            .output()
            .unwrap();
        passed("zig", zig);
    }
    if built("assemblyscript") {
        let kit = kits.join("assemblyscript/kit");
        let out = tempfile::tempdir().unwrap();
        let module = out.path().join("rules_check.wasm");
        // json-as resolves from the toolchains' node_modules, as the policies' build has it.
        let compiled = Command::new(toolchains().join("npm/node_modules/.bin/asc"))
            .arg(kit.join("rules_check.ts"))
            .arg("--outFile")
            .arg(&module)
            .args(["--optimize", "--runtime", "incremental", "--exportRuntime", "--use", "abort="])
            .args(["--transform", "json-as/transform"])
            .current_dir(toolchains().join("npm"))
            .output()
            .unwrap();
        passed("assemblyscript (asc)", compiled);
        let checked = Command::new("node").arg(kit.join("rules_check.mjs")).arg(&module).arg(cases()).output().unwrap();
        passed("assemblyscript", checked);
    }
}
