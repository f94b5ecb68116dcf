//! The image of `deploy/Containerfile`, built with podman by `deploy/build-image.sh`
//! from the release CLI (`make test` builds it; the test binaries link libtorch, which
//! an image has no room for) and MobileNetV2-0.35, then run: ready on its health
//! endpoint through the mapped port, answering V2 inferences over gRPC, and stopping
//! gracefully (exit 0 after the drain) on `podman stop`.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use modelless_lab::load::{Outcome, RequestRecord};

use crate::common::{crate_dir, models_dir};

const READY_LIMIT: Duration = Duration::from_secs(90);

/// podman, told to run containers with runc where it is installed (crun refuses
/// hybrid cgroup hierarchies) and without default rlimits (some sandboxes refuse
/// setrlimit inside containers).
fn podman(args: &[&str]) -> Output {
    let mut command = Command::new("podman");
    command.env("CONTAINERS_CONF", crate_dir().join("../deploy/containers.conf"));
    if Path::new("/usr/bin/runc").exists() || Path::new("/usr/sbin/runc").exists() {
        command.args(["--runtime", "runc"]);
    }
    command.args(args).stdin(Stdio::null()).output().unwrap_or_else(|e| panic!("podman does not run: {e}"))
}

fn ok(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "{what} failed ({}):\n{}{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).trim().to_string()
}

/// What the container wrote, both streams.
fn logs(name: &str) -> String {
    let output = podman(&["logs", name]);
    format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr))
}

/// Removes the container and the image, however the test ends.
struct Cleanup {
    container: String,
    image: String,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = podman(&["rm", "-f", &self.container]);
        let _ = podman(&["rmi", "-f", &self.image]);
    }
}

/// The release build of the CLI beside this test's debug one.
fn release_cli() -> PathBuf {
    let debug = PathBuf::from(env!("CARGO_BIN_EXE_modelless"));
    let release = debug.parent().and_then(Path::parent).map(|target| target.join("release/modelless")).unwrap();
    assert!(release.is_file(), "no release CLI at {}: make test builds it", release.display());
    release
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

fn models(dir: &Path) -> PathBuf {
    let models = dir.join("models");
    std::fs::create_dir_all(&models).unwrap();
    std::fs::copy(models_dir().join("mobilenetv2_0.35.onnx"), models.join("mobilenetv2_0.35.onnx")).unwrap();
    std::fs::write(
        models.join("config.toml"),
        r#"[[tasks]]
name = "classify-image"
latency_slo_ms = 5000

[[tasks.variants]]
name = "mobilenetv2-0.35"
path = "mobilenetv2_0.35.onnx"
accuracy = 60.3
preload = true
batching = { max_batch_size = 4, max_queue_delay_us = 0 }

[server]
drain_timeout_s = 10
"#,
    )
    .unwrap();
    models
}

#[test]
fn the_image_builds_runs_answers_over_v2_and_stops_gracefully() {
    let version = Command::new("podman").arg("--version").output();
    assert!(
        version.is_ok_and(|o| o.status.success()),
        "podman is not installed: run scripts/setup/test_deps.sh as root (make test does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let models = models(dir.path());
    let tag = format!("localhost/modelless:test-{}", std::process::id());
    let name = format!("modelless-test-{}", std::process::id());
    let _cleanup = Cleanup { container: name.clone(), image: tag.clone() };

    let build = Command::new("bash")
        .arg(crate_dir().join("../deploy/build-image.sh"))
        .arg(&models)
        .arg(&tag)
        .env("MODELLESS", release_cli())
        .env("ROOTFS", dir.path().join("rootfs"))
        .env("CONTAINERS_CONF", crate_dir().join("../deploy/containers.conf"))
        .output()
        .unwrap();
    ok(build, "deploy/build-image.sh");

    let (http, grpc) = (free_port(), free_port());
    let (http_map, grpc_map) = (format!("127.0.0.1:{http}:8080"), format!("127.0.0.1:{grpc}:9000"));
    ok(podman(&["run", "-d", "--name", &name, "-p", &http_map, "-p", &grpc_map, &tag]), "podman run");
    let started = Instant::now();
    let ready = format!("http://127.0.0.1:{http}/v2/health/ready");
    while !Command::new("curl").args(["-sf", "-o", "/dev/null", &ready]).status().unwrap().success() {
        assert!(started.elapsed() < READY_LIMIT, "not ready within {READY_LIMIT:?}:\n{}", logs(&name));
        std::thread::sleep(Duration::from_millis(250));
    }

    let load = dir.path().join("load.toml");
    std::fs::write(&load, "seed = 1\n[[tasks]]\ntask = \"classify-image\"\npattern = { kind = \"constant\", rate = 20, duration_s = 3 }\n")
        .unwrap();
    let out = dir.path().join("load");
    let loadgen = Command::new(env!("CARGO_BIN_EXE_modelless"))
        .args(["loadgen", "--grpc", &format!("http://127.0.0.1:{grpc}")])
        .arg("--config")
        .arg(models.join("config.toml"))
        .arg("--load")
        .arg(&load)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    ok(loadgen, "modelless loadgen");
    let records: Vec<RequestRecord> = std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(records.len() >= 40, "{} requests sent", records.len());
    assert!(
        records.iter().all(|r| r.status == Outcome::Served),
        "{:?}",
        records.iter().find(|r| r.status != Outcome::Served)
    );
    assert!(records.iter().all(|r| r.variant.as_deref() == Some("mobilenetv2-0.35")));

    ok(podman(&["stop", "-t", "30", &name]), "podman stop");
    let exit = ok(podman(&["inspect", "--format", "{{.State.ExitCode}}", &name]), "podman inspect");
    let logs = logs(&name);
    assert_eq!(exit, "0", "SIGTERM ends the server cleanly:\n{logs}");
    assert!(logs.trim_end().ends_with("stopped"), "it drained and stopped:\n{logs}");
}
