//! Policies and model versions followed by tag from a real OCI registry (Debian's
//! `docker-registry`, CNCF distribution, on 127.0.0.1 with a temporary storage
//! folder): pushed with `modelless policy push` and `modelless variants push`, and
//! followed by the three replicas of the nginx fleet (`scripts/fleet/run.sh`) while
//! gRPC load flows through it. A hostile module pushed past the check, a blob whose
//! content does not match its digest, and the registry stopped mid-run change nothing
//! that serves; a restart with the registry down serves from the cache.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use modelless_lab::load::Outcome;
use modelless_runtime::source::{self, Artifact, Fetcher, OciReference, SourcesConfig};

use crate::common::{crate_dir, models_dir, policy_module};
use crate::fleet::{Fleet, free_ports, one_fleet_at_a_time, records, require_nginx, start_load, wait_until};

/// How long the fleet's load lasts: through every push of the fleet test.
const LOAD_S: u32 = 90;
/// The longest a push may take to be live on every replica (poll, fetch, compile,
/// dry-run; an 18 MB Python component compiled by three replicas on two cores).
const LIVE_LIMIT: Duration = Duration::from_secs(120);
/// Seconds between polls of a followed tag.
const POLL_S: f64 = 0.5;

/// A registry on 127.0.0.1, stopped when dropped.
struct Registry {
    child: Option<Child>,
    config: PathBuf,
    address: String,
}

impl Registry {
    /// Serves a registry storing under `dir`/data on a free port.
    fn start(dir: &Path) -> Registry {
        let available = Command::new("docker-registry").arg("--version").output();
        assert!(
            available.is_ok_and(|o| o.status.success()),
            "docker-registry is not installed: run scripts/setup/test_deps.sh as root (make test does)"
        );
        let address = format!("127.0.0.1:{}", free_ports(1));
        std::fs::create_dir_all(dir).unwrap();
        let config = dir.join("registry.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    \
                 enabled: true\nhttp:\n  addr: {address}\n",
                dir.join("data").display()
            ),
        )
        .unwrap();
        let mut registry = Registry { child: None, config, address };
        registry.resume();
        registry
    }

    /// Starts it (again, on the same storage and port) and waits until it answers.
    fn resume(&mut self) {
        let log = std::fs::File::create(self.config.with_extension("log")).unwrap();
        let child = Command::new("docker-registry")
            .arg("serve")
            .arg(&self.config)
            .stdout(Stdio::null())
            .stderr(Stdio::from(log))
            .spawn()
            .unwrap();
        self.child = Some(child);
        let address = self.address.clone();
        wait_until(Duration::from_secs(30), "the registry answering", || {
            get(&address, "/v2/").is_some_and(|(status, _)| status == 200)
        });
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn reference(&self, repository_and_tag: &str) -> String {
        format!("oci://{}/{repository_and_tag}", self.address)
    }

    /// The file the registry keeps the blob `digest` in.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = source::hex_of(digest);
        let data = self.config.parent().unwrap().join("data");
        data.join(format!("docker/registry/v2/blobs/sha256/{}/{hex}/data", &hex[..2]))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A GET on `address` (HTTP/1.1, one request): its status and body.
fn get(address: &str, path: &str) -> Option<(u16, String)> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(stream, "GET {path} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n").ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, text.split_once("\r\n\r\n").map(|(_, body)| body.to_string()).unwrap_or_default()))
}

/// What a replica's `GET /v2/policy` says.
fn provenance(http: &str) -> serde_json::Value {
    let (status, body) = get(http, "/v2/policy").unwrap_or_else(|| panic!("{http} does not answer"));
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn modelless() -> Command {
    Command::new(env!("CARGO_BIN_EXE_modelless"))
}

/// Runs a `modelless … push`; returns the manifest digest it printed.
fn push(args: &[&str], file: &Path, reference: &str) -> String {
    let pushed = modelless().args(args).arg(file).arg(reference).arg("--plain-http").output().unwrap();
    let said = String::from_utf8_lossy(&pushed.stdout).to_string() + &String::from_utf8_lossy(&pushed.stderr);
    assert!(pushed.status.success(), "{args:?} {}: {said}", file.display());
    let digest = said.lines().find_map(|l| l.strip_prefix("digest: ")).unwrap_or_else(|| panic!("{said}"));
    digest.to_string()
}

fn push_policy(module: &Path, reference: &str) -> String {
    push(&["policy", "push", "--deadline-ms", "200"], module, reference)
}

fn file_digest(path: &Path) -> String {
    source::sha256_digest(&std::fs::read(path).unwrap())
}

/// Pushes `bytes` as a policy module with the runtime's client, past the check
/// `modelless policy push` makes; returns the manifest digest.
fn push_unchecked(registry: &Registry, tag: &str, bytes: Vec<u8>) -> String {
    let config = SourcesConfig::default()
        .with_cache(std::env::temp_dir().join("modelless-push"))
        .with_insecure_registry(registry.address.clone());
    let Ok(source::Source::Oci(reference)) = source::Source::parse(&registry.reference(tag)) else { panic!() };
    push_artifact(&Fetcher::new(&config).unwrap(), &reference, bytes)
}

fn push_artifact(fetcher: &Fetcher, reference: &OciReference, bytes: Vec<u8>) -> String {
    let digest = source::sha256_digest(&bytes);
    let artifact = Artifact {
        bytes,
        layer_media_type: source::WASM_LAYER_MEDIA_TYPE.into(),
        layer_annotations: Default::default(),
        config_media_type: source::WASM_CONFIG_MEDIA_TYPE.into(),
        config: serde_json::to_vec(&serde_json::json!({ "architecture": "wasm", "layerDigests": [digest] })).unwrap(),
        annotations: Default::default(),
    };
    fetcher.push(reference, artifact).unwrap()
}

/// A core module that passes the ABI's checks and spins in `decide` forever.
const SPINNING: &str = r#"(module
    (memory (export "memory") 1)
    (func (export "modelless_policy_abi_v1"))
    (func (export "alloc") (param i32) (result i32) (i32.const 4096))
    (func (export "dealloc") (param i32 i32))
    (func (export "decide") (param i32 i32) (result i64) (loop $spin (br $spin)) (i64.const 0)))"#;

/// A config of `body` (tasks and policy) for replicas that fetch from `registry`.
fn write_config(dir: &Path, name: &str, registry: &Registry, body: &str) -> PathBuf {
    let text = format!(
        "[onnxruntime]\nintra_op_threads = 1\nspinning = false\n\n{body}\n[sources]\ncache = \"{cache}\"\n\
         insecure_registries = [\"{address}\"]\npoll_interval_s = {POLL_S}\ntimeout_s = 5\n\n[server]\n\
         drain_timeout_s = 10\n",
        cache = dir.join("cache").display(),
        address = registry.address,
    );
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

fn config(dir: &Path, registry: &Registry) -> PathBuf {
    let body = format!(
        r#"[[tasks]]
name = "classify-image"
latency_slo_ms = 2000

[[tasks.variants]]
name = "mobilenetv2"
path = "{model}"
accuracy = 60.3
batching = {{ max_batch_size = 4, max_queue_delay_us = 0 }}

[policy]
module = "{policy}"
tick_ms = 200
# An interpreter's first call (the Python policy's) takes longer than the default 10 ms.
deadline_ms = 200
"#,
        model = registry.reference("models/classify:live"),
        policy = registry.reference("policies/steer:live"),
    );
    write_config(dir, "oci.toml", registry, &body)
}

/// The replicas' HTTP addresses: each one's gRPC port plus one.
fn http_addresses(fleet: &Fleet) -> Vec<String> {
    let http = |grpc: &String| {
        let (host, port) = grpc.rsplit_once(':').unwrap();
        format!("{host}:{}", port.parse::<u16>().unwrap() + 1)
    };
    fleet.upstreams.iter().map(http).collect()
}

/// Waits until every replica's status satisfies `done`; returns how long it took.
fn on_every_replica(replicas: &[String], what: &str, done: impl Fn(&serde_json::Value) -> bool) -> Duration {
    let started = Instant::now();
    loop {
        let statuses: Vec<serde_json::Value> = replicas.iter().map(|r| provenance(r)).collect();
        if statuses.iter().all(&done) {
            return started.elapsed();
        }
        assert!(started.elapsed() < LIVE_LIMIT, "{what}: not within {LIVE_LIMIT:?}; the replicas say {statuses:#?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn policy_digest(status: &serde_json::Value) -> &str {
    status["policy"]["digest"].as_str().unwrap_or_default()
}

fn model_blob(status: &serde_json::Value) -> &str {
    status["variants"][0]["source"]["blob"].as_str().unwrap_or_default()
}

fn refused_manifest(status: &serde_json::Value) -> &str {
    status["policy"]["source"]["last_refused"]["manifest"].as_str().unwrap_or_default()
}

#[test]
fn a_fleet_follows_policy_and_model_tags_through_pushes_a_hostile_module_and_a_registry_outage() {
    require_nginx();
    let _one = one_fleet_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::start(&dir.path().join("registry"));
    let policies = |name: &str| policy_module(name);
    let live = registry.reference("policies/steer:live");
    push(
        &["variants", "push"],
        &models_dir().join("mobilenetv2_0.35.onnx"),
        &registry.reference("models/classify:live"),
    );
    push_policy(&policies("static"), &live);
    let config = config(dir.path(), &registry);

    let fleet = Fleet::start(dir.path(), &config, "oci", 3, 3);
    let replicas = http_addresses(&fleet);
    let (mut loadgen, out) = start_load(dir.path(), &config, &fleet, "oci", LOAD_S);
    let v1 = file_digest(&policies("static"));
    on_every_replica(&replicas, "v1 live", |s| policy_digest(s) == v1);

    // v2, pushed: live on all three within a poll and a reload.
    push_policy(&policies("cheapest-meeting-slo"), &live);
    let v2 = file_digest(&policies("cheapest-meeting-slo"));
    let took = on_every_replica(&replicas, "v2 live", |s| policy_digest(s) == v2);
    eprintln!("v2 (core module, Rust): pushed to live on 3 replicas in {:.2} s", took.as_secs_f64());

    // A module that spins, pushed past the check: each replica refuses it at its dry
    // run, says why, counts it, and keeps v2.
    let spinning = push_unchecked(&registry, "policies/steer:live", SPINNING.as_bytes().to_vec());
    on_every_replica(&replicas, "the spinning module refused", |s| refused_manifest(s) == spinning);
    for replica in &replicas {
        let status = provenance(replica);
        assert_eq!(policy_digest(&status), v2, "{replica} went live with the spinning module");
        let reason = status["policy"]["source"]["last_refused"]["reason"].as_str().unwrap().to_string();
        assert!(reason.contains("deadline"), "{replica}: {reason}");
        let (_, metrics) = get(replica, "/metrics").unwrap();
        let refused = format!("modelless_source_updates{{reference=\"{live}\",result=\"refused\"}}");
        assert!(metrics.lines().any(|l| l.starts_with(&refused)), "{replica}: no {refused}");
        eprintln!("{replica} refused {spinning}: {reason}");
    }

    // A model version pushed under the followed tag: loaded on all three as version 2.
    let model = models_dir().join("mobilenetv2_0.5.onnx");
    push(&["variants", "push"], &model, &registry.reference("models/classify:live"));
    let blob = file_digest(&model);
    let took = on_every_replica(&replicas, "the new model version live", |s| model_blob(s) == blob);
    eprintln!("model version 2: pushed to serving on 3 replicas in {:.2} s", took.as_secs_f64());

    // A blob that does not hash to its digest: a module pushed to another tag, its
    // stored bytes then altered, and its manifest put under the followed tag.
    let tampered_module = std::fs::read(policies("static-peak")).unwrap();
    let staged = push_unchecked(&registry, "policies/steer:staging", tampered_module.clone());
    let stored = registry.blob_file(&source::sha256_digest(&tampered_module));
    let mut altered = tampered_module;
    let middle = altered.len() / 2;
    altered[middle] ^= 0xff;
    std::fs::write(&stored, altered).unwrap();
    let manifest = registry_get(&registry, &format!("/v2/policies/steer/manifests/{staged}"));
    registry_put_manifest(&registry, "policies/steer", "live", &manifest);
    on_every_replica(&replicas, "the altered blob refused", |s| refused_manifest(s) == staged);
    for replica in &replicas {
        let status = provenance(replica);
        assert_eq!(policy_digest(&status), v2, "{replica} went live with the altered blob");
        let reason = status["policy"]["source"]["last_refused"]["reason"].as_str().unwrap();
        assert!(reason.contains("digest"), "{replica}: {reason}");
    }

    // The registry stopped: the replicas keep serving v2 and count failed polls; once
    // it is back, a push made then is picked up.
    registry.stop();
    on_every_replica(&replicas, "failed polls reported", |s| {
        s["policy"]["source"]["failed_polls"].as_u64().unwrap_or(0) >= 2
            && s["policy"]["source"]["last_poll_error"].is_string()
    });
    assert!(replicas.iter().all(|r| policy_digest(&provenance(r)) == v2));
    registry.resume();
    push_policy(&policies("autoscale"), &live);
    let v3 = file_digest(&policies("autoscale"));
    on_every_replica(&replicas, "v3 live after the outage", |s| policy_digest(s) == v3);

    // The Python policy (a component of some 18 MB): pushed, and live on all three.
    // The replicas share the machine's compile cache with `policy push`, whose check
    // compiled it: they load it compiled (a debug build compiles a component for
    // minutes; the release build's first compile is measured apart, docs/deploy.md).
    let python = policies("cpu-threshold-py");
    let megabytes = std::fs::metadata(&python).unwrap().len() as f64 / 1e6;
    push_policy(&python, &live);
    let v4 = file_digest(&python);
    let took = on_every_replica(&replicas, "the Python policy live", |s| policy_digest(s) == v4);
    eprintln!(
        "Python cpu-threshold ({megabytes:.1} MB): push to live on 3 replicas in {:.2} s, compiled module cached",
        took.as_secs_f64()
    );

    // `modelless status` tells what each replica runs.
    let told = modelless().arg("status").args(replicas.iter().map(|r| format!("http://{r}"))).output().unwrap();
    let table = String::from_utf8_lossy(&told.stdout);
    assert!(told.status.success(), "{table}{}", String::from_utf8_lossy(&told.stderr));
    let short_v4: String = v4.chars().take(19).collect();
    assert_eq!(table.matches(&format!("policy {short_v4}")).count(), 3, "{table}");
    assert_eq!(table.matches(&format!("follows {live}")).count(), 3, "{table}");
    eprintln!("{table}");

    wait_until(Duration::from_secs(LOAD_S as u64 + 60), "the load generator done", || {
        loadgen.try_wait().unwrap().is_some()
    });
    assert!(loadgen.wait().unwrap().success(), "loadgen failed: see {}", dir.path().display());
    let records = records(&out);
    let failed: Vec<_> = records.iter().filter(|r| r.status != Outcome::Served).collect();
    eprintln!("load: {} sent, {} failed", records.len(), failed.len());
    assert!(records.len() > 100, "only {} requests sent", records.len());
    assert!(failed.is_empty(), "{failed:?}");
    fleet.stop();
}

/// The body of a GET to the registry, with the manifest media type accepted.
fn registry_get(registry: &Registry, path: &str) -> Vec<u8> {
    let url = format!("http://{}{path}", registry.address);
    let got = Command::new("curl")
        .args(["-sf", "-H", "Accept: application/vnd.oci.image.manifest.v1+json", &url])
        .output()
        .unwrap();
    assert!(got.status.success(), "GET {url}");
    got.stdout
}

fn registry_put_manifest(registry: &Registry, repository: &str, tag: &str, manifest: &[u8]) {
    let url = format!("http://{}/v2/{repository}/manifests/{tag}", registry.address);
    let mut put = Command::new("curl")
        .args(["-sf", "-X", "PUT", "-H", "Content-Type: application/vnd.oci.image.manifest.v1+json"])
        .args(["--data-binary", "@-", &url])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    put.stdin.take().unwrap().write_all(manifest).unwrap();
    assert!(put.wait().unwrap().success(), "PUT {url}");
}

/// One `modelless serve`, stopped when dropped, and its HTTP address.
struct Replica {
    child: Child,
    http: String,
}

impl Replica {
    fn start(config: &Path, log: &Path) -> Replica {
        let ports = free_ports(2);
        let http = format!("127.0.0.1:{}", ports + 1);
        let child = modelless()
            .args(["serve", "--grpc", &format!("127.0.0.1:{ports}"), "--http", &http])
            .arg("--config")
            .arg(config)
            .env("ORT_DYLIB_PATH", crate_dir().join("../.modelless/onnxruntime/lib/libonnxruntime.so"))
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(log).unwrap()))
            .spawn()
            .unwrap();
        let replica = Replica { child, http };
        wait_until(Duration::from_secs(120), "the replica ready", || {
            get(&replica.http, "/v2/health/ready").is_some_and(|(status, _)| status == 200)
        });
        replica
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_replica_restarted_with_the_registry_down_serves_what_its_tag_last_gave_from_the_cache() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = Registry::start(&dir.path().join("registry"));
    let live = registry.reference("policies/steer:live");
    push(
        &["variants", "push"],
        &models_dir().join("mobilenetv2_0.35.onnx"),
        &registry.reference("models/classify:live"),
    );
    push_policy(&policy_module("static"), &live);
    let config = config(dir.path(), &registry);
    let replica = Replica::start(&config, &dir.path().join("first.log"));
    // The tag moves while it runs: the restart must serve the move, not the start.
    push_policy(&policy_module("cheapest-meeting-slo"), &live);
    let v2 = file_digest(&policy_module("cheapest-meeting-slo"));
    on_every_replica(std::slice::from_ref(&replica.http), "v2 live", |s| policy_digest(s) == v2);
    drop(replica);

    registry.stop();
    let replica = Replica::start(&config, &dir.path().join("second.log"));
    let status = provenance(&replica.http);
    assert_eq!(policy_digest(&status), v2, "{status}");
    assert_eq!(model_blob(&status), file_digest(&models_dir().join("mobilenetv2_0.35.onnx")), "{status}");
    let error = status["policy"]["source"]["last_poll_error"].as_str().unwrap_or_default();
    assert!(error.contains("registry could not be asked") || error.contains("cannot fetch"), "{status}");
    let (code, body) = get(&replica.http, "/v2/models/classify-image/ready").unwrap();
    assert_eq!(code, 200, "{body}");

    // With nothing cached, the registry down is a start that fails, saying why.
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let text = std::fs::read_to_string(&config)
        .unwrap()
        .replace(&dir.path().join("cache").display().to_string(), &empty.join("cache").display().to_string());
    let uncached = empty.join("oci.toml");
    std::fs::write(&uncached, text).unwrap();
    let refused = modelless()
        .args(["serve", "--grpc", "127.0.0.1:0", "--http", "127.0.0.1:0", "--config"])
        .arg(&uncached)
        .stdout(Stdio::null())
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success(), "it started: {said}");
    assert!(said.contains("cannot fetch") && said.contains("cache holds no digest"), "{said}");
}

/// Two variants under a 25 ms SLO that MobileNetV2-0.35 meets and 1.4 (16 ms an
/// image, profiled) does not under the fleet's load; the static policy keeps 0.35, and a watch of 6 s.
fn steering_config(dir: &Path, registry: &Registry) -> PathBuf {
    let models = models_dir();
    let variant = |name: &str, file: &str, accuracy: f64| {
        format!(
            "[[tasks.variants]]\nname = \"{name}\"\npath = \"{}\"\naccuracy = {accuracy}\npreload = true\n\
             batching = {{ max_batch_size = 4, max_queue_delay_us = 0 }}\n\n",
            models.join(file).display()
        )
    };
    let body = format!(
        "[[tasks]]\nname = \"classify-image\"\nactive = \"mobilenetv2-0.35\"\nlatency_slo_ms = 25\n\n{}{}\
         [policy]\nmodule = \"{}\"\ntick_ms = 250\n\n[policy.rollback]\nwindow_s = 6\n",
        variant("mobilenetv2-0.35", "mobilenetv2_0.35.onnx", 60.3),
        variant("mobilenetv2-1.4", "mobilenetv2_1.4.onnx", 75.0),
        registry.reference("policies/steer:live"),
    );
    write_config(dir, "steering.toml", registry, &body)
}

#[test]
fn a_policy_that_keeps_the_most_accurate_variant_through_load_is_rolled_back_on_every_replica() {
    require_nginx();
    let _one = one_fleet_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let registry = Registry::start(&dir.path().join("registry"));
    let live = registry.reference("policies/steer:live");
    push_policy(&policy_module("static"), &live);
    let config = steering_config(dir.path(), &registry);
    let fleet = Fleet::start(dir.path(), &config, "steering", 3, 3);
    let replicas = http_addresses(&fleet);
    let (mut loadgen, out) = start_load(dir.path(), &config, &fleet, "steering", 45);
    let kept = file_digest(&policy_module("static"));
    on_every_replica(&replicas, "static live", |s| policy_digest(s) == kept);
    // The static policy's ticks under load, for the watch to compare with.
    std::thread::sleep(Duration::from_secs(8));

    // Valid, and checked: it only ever switches to the most accurate variant.
    let accurate = modelless_runtime::policy::test_modules::answering(
        r#"{"tasks":[{"task":"classify-image","variant":"mobilenetv2-1.4"}]}"#,
    );
    let module = dir.path().join("most-accurate.wat");
    std::fs::write(&module, accurate.as_bytes()).unwrap();
    push_policy(&module, &live);
    let worse = source::sha256_digest(accurate.as_bytes());
    on_every_replica(&replicas, "the accurate-only policy live", |s| {
        policy_digest(s) == worse || s["policy"]["rollbacks"].as_u64() >= Some(1)
    });
    on_every_replica(&replicas, "the rollback", |s| s["policy"]["watch"]["outcome"] == "rolled back");
    for replica in &replicas {
        let status = provenance(replica);
        assert_eq!(policy_digest(&status), kept, "{replica} runs the policy put back");
        let watch = &status["policy"]["watch"];
        assert_eq!(watch["live"], worse.as_str());
        let (live, before) = (&watch["live_served"], &watch["previous_served"]);
        eprintln!(
            "{replica}: rolled back: {} (live {:.2} % within the SLO over {} ticks at {:.1}/s, effective accuracy \
             {:.1}; before {:.2} % over {} ticks at {:.1}/s, {:.1}; similar load: {})",
            watch["regression"].as_str().unwrap_or_default(),
            100.0 * live["share_within_slo"].as_f64().unwrap(),
            live["ticks"],
            live["demand_per_s"].as_f64().unwrap(),
            live["effective_accuracy"].as_f64().unwrap(),
            100.0 * before["share_within_slo"].as_f64().unwrap(),
            before["ticks"],
            before["demand_per_s"].as_f64().unwrap(),
            before["effective_accuracy"].as_f64().unwrap(),
            watch["similar_load"],
        );
        let (_, metrics) = get(replica, "/metrics").unwrap();
        assert!(metrics.lines().any(|l| l.starts_with("modelless_policy_rollbacks{")), "{replica}: not counted");
    }

    wait_until(Duration::from_secs(120), "the load generator done", || loadgen.try_wait().unwrap().is_some());
    assert!(loadgen.wait().unwrap().success(), "loadgen failed: see {}", dir.path().display());
    let records = records(&out);
    let count = |outcome: Outcome| records.iter().filter(|r| r.status == outcome).count();
    eprintln!(
        "load: {} sent, {} answered, {} refused, {} expired, {} failed",
        records.len(),
        count(Outcome::Served),
        count(Outcome::Rejected),
        count(Outcome::Expired),
        count(Outcome::Failed)
    );
    assert_eq!(count(Outcome::Failed), 0, "no request fails with an error");
    fleet.stop();
}
