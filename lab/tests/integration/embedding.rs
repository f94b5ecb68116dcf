//! The README's examples built as an application outside the workspace builds them
//! (a crate of its own that depends on `modelless`), and run where ONNX Runtime is
//! found only the ways users install it: a Python environment, or the per-user
//! directory that `modelless setup` fills.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::common::{crate_dir, models_dir};

/// Longest the application's build may take (its dependencies are mostly built
/// already in the shared target folder).
const BUILD_LIMIT: Duration = Duration::from_secs(1200);
/// Longest one example may run.
const RUN_LIMIT: Duration = Duration::from_secs(300);

/// The ```rust blocks of the README, in order.
fn readme_examples(readme: &str) -> Vec<String> {
    let mut examples = Vec::new();
    let mut current: Option<Vec<&str>> = None;
    for line in readme.lines() {
        match (&mut current, line.trim_end()) {
            (None, "```rust") => current = Some(Vec::new()),
            (Some(lines), "```") => {
                examples.push(lines.join("\n") + "\n");
                current = None;
            }
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    examples
}

/// Runs `command` to its end or `limit`, whichever comes first.
fn run_bounded(mut command: Command, limit: Duration) -> Output {
    let mut child = command.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("{command:?} ran past {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    child.wait_with_output().unwrap()
}

/// An application crate in `dir` with one binary per README example.
fn write_application(dir: &Path, examples: &[String]) {
    let repo = crate_dir().join("..").canonicalize().unwrap();
    let manifest = format!(
        "[package]\nname = \"readme-app\"\nversion = \"0.0.0\"\nedition = \"2024\"\npublish = false\n\n\
         [dependencies]\nmodelless = {{ path = \"{}\" }}\ntokio = {{ version = \"1\", features = [\"rt-multi-thread\", \"macros\"] }}\n\n\
         [workspace]\n",
        repo.join("sdk").display()
    );
    std::fs::write(dir.join("Cargo.toml"), manifest).unwrap();
    // The workspace's lock: the same versions, so the shared target folder's builds serve.
    std::fs::copy(repo.join("Cargo.lock"), dir.join("Cargo.lock")).unwrap();
    std::fs::create_dir_all(dir.join("src/bin")).unwrap();
    for (i, example) in examples.iter().enumerate() {
        std::fs::write(dir.join(format!("src/bin/readme_{i}.rs")), example).unwrap();
    }
    // What the examples open, relative to where they run: the models, and the
    // example config with the models it names (`../.modelless/models/`).
    std::fs::create_dir_all(dir.join("models")).unwrap();
    std::os::unix::fs::symlink(models_dir().join("mobilenetv2_1.0.onnx"), dir.join("models/mobilenetv2_1.0.onnx"))
        .unwrap();
    std::fs::create_dir_all(dir.join("run/examples")).unwrap();
    std::fs::create_dir_all(dir.join("run/.modelless")).unwrap();
    std::fs::copy(repo.join("examples/classify.toml"), dir.join("run/examples/classify.toml")).unwrap();
    std::os::unix::fs::symlink(models_dir(), dir.join("run/.modelless/models")).unwrap();
    std::os::unix::fs::symlink(dir.join("models"), dir.join("run/models")).unwrap();
}

/// The target folder the tests were built in, shared so the application's build
/// reuses what it can.
fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| crate_dir().join("../target"), PathBuf::from).join("readme-app")
}

/// A command for `program` with none of the variables that point at ONNX Runtime,
/// and `home` as the user's home.
fn isolated(program: &Path, home: &Path, cwd: &Path) -> Command {
    let mut command = Command::new(program);
    for var in ["ORT_DYLIB_PATH", "VIRTUAL_ENV", "CONDA_PREFIX", "LD_LIBRARY_PATH", "XDG_DATA_HOME"] {
        command.env_remove(var);
    }
    command.env("HOME", home).current_dir(cwd);
    command
}

/// Whether this machine has ONNX Runtime where the system's loader or its Python looks.
fn system_has_onnxruntime() -> bool {
    let cached = Command::new("/sbin/ldconfig").arg("-p").output().map(|o| o.stdout).unwrap_or_default();
    let python = ["/usr/lib/python3/dist-packages/onnxruntime", "/usr/local/lib"].iter().any(|p| {
        let path = Path::new(p);
        path.is_dir()
            && (path.ends_with("onnxruntime")
                || std::fs::read_dir(path)
                    .is_ok_and(|mut e| e.any(|e| e.is_ok_and(|e| e.path().join("dist-packages/onnxruntime").is_dir()))))
    });
    String::from_utf8_lossy(&cached).contains("libonnxruntime.so") || python
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_readme_examples_build_outside_the_workspace_and_find_onnxruntime_where_users_install_it() {
    let readme = std::fs::read_to_string(crate_dir().join("../README.md")).unwrap();
    let examples = readme_examples(&readme);
    assert!(examples.len() >= 2, "the README's Rust examples: {}", examples.len());
    let app = tempfile::tempdir().unwrap();
    let app = app.path();
    write_application(app, &examples);
    // At the lowest priority: the tests running beside it measure time.
    let mut build = Command::new("nice");
    build.args(["-n", "19"]).arg(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    build.args(["build", "--offline", "--bins", "--manifest-path"]).arg(app.join("Cargo.toml"));
    build.env("CARGO_TARGET_DIR", target_dir());
    // Its binaries are run, never debugged: without debug info they take a sixth of the disk.
    build.env("CARGO_PROFILE_DEV_DEBUG", "0");
    let built = run_bounded(build, BUILD_LIMIT);
    assert!(built.status.success(), "the README's examples do not build:\n{}", text(&built.stderr));
    let binary = |i: usize| target_dir().join(format!("debug/readme_{i}"));
    let home = app.join("home");
    let run_dir = app.join("run");
    std::fs::create_dir_all(&home).unwrap();

    // Nothing installed: a clear error that names the fix an app has first, then every
    // place it looked.
    let bare = run_bounded(isolated(&binary(0), &home, &run_dir), RUN_LIMIT);
    if !system_has_onnxruntime() {
        let stderr = text(&bare.stderr);
        assert!(!bare.status.success(), "ran without ONNX Runtime anywhere: {}", text(&bare.stdout));
        let fix = stderr.lines().find(|l| l.contains("to fix")).unwrap_or_default();
        assert!(fix.contains("ORT_DYLIB_PATH") && fix.contains("with_library_path"), "{stderr}");
        for named in ["per-user directory", "Python environment", "dynamic loader"] {
            assert!(stderr.contains(named), "the error does not name `{named}`:\n{stderr}");
        }
    }

    // `pip install onnxruntime` in the active environment is enough.
    let venv = crate_dir().join("../.modelless/venv").canonicalize().unwrap();
    let mut in_venv = isolated(&binary(0), &home, &run_dir);
    in_venv.env("VIRTUAL_ENV", &venv);
    let ran = run_bounded(in_venv, RUN_LIMIT);
    assert!(ran.status.success(), "with a Python environment:\n{}", text(&ran.stderr));
    assert!(text(&ran.stdout).contains("in a batch of"), "{}", text(&ran.stdout));

    // `modelless setup` puts it in the per-user directory, where every example finds it.
    let mut setup = isolated(Path::new(env!("CARGO_BIN_EXE_modelless")), &home, &run_dir);
    setup.arg("setup").env("VIRTUAL_ENV", &venv);
    // The command line, built with the `tch` feature, needs libtorch on the loader's path.
    if let Some(path) = std::env::var_os("LD_LIBRARY_PATH") {
        setup.env("LD_LIBRARY_PATH", path);
    }
    let set_up = run_bounded(setup, RUN_LIMIT);
    assert!(set_up.status.success(), "modelless setup:\n{}{}", text(&set_up.stdout), text(&set_up.stderr));
    assert!(home.join(".local/share/modelless/onnxruntime/lib/libonnxruntime.so").is_file());
    for i in 0..examples.len() {
        let ran = run_bounded(isolated(&binary(i), &home, &run_dir), RUN_LIMIT);
        assert!(ran.status.success(), "README example {i} after modelless setup:\n{}", text(&ran.stderr));
        assert!(!ran.stdout.is_empty(), "README example {i} printed nothing");
    }
}

#[test]
fn rust_blocks_are_read_from_markdown_and_other_blocks_left_out() {
    let readme = "# x\n```rust\nfn main() {}\n```\n```sh\nmake\n```\n```rust\nfn a() {}\n```\n";
    assert_eq!(readme_examples(readme), ["fn main() {}\n", "fn a() {}\n"]);
}
