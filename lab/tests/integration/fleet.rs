//! A fleet on loopback (`scripts/fleet/run.sh`): `modelless serve` replicas of
//! MobileNetV2-0.35 behind nginx and closed-loop gRPC load through nginx. Of three
//! replicas, one is stopped mid-run, once with SIGTERM and once with SIGKILL; and a
//! fleet of one is scaled to two and back to one while the load runs
//! (`scripts/fleet/scale.sh`). nginx's access log says which replica each request
//! went to; the load generator's log says how each ended.

use std::collections::HashMap;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use modelless_lab::load::{Outcome, RequestRecord};

use crate::common::{crate_dir, models_dir};

/// From starting the script to every replica ready behind nginx.
const START_LIMIT: Duration = Duration::from_secs(180);
/// Clients of the closed loop: two per replica in flight.
const CLIENTS: usize = 6;
/// How long the load lasts.
const LOAD_S: u32 = 10;
/// nginx's `fail_timeout`: how long a failed replica is left out before it is tried again.
const FAIL_TIMEOUT_S: f64 = 2.0;
/// How far nginx's log stamps may stray from this test's clock, s.
const NGINX_CLOCK_SLACK_S: f64 = 0.01;
/// How long the load lasts while a fleet scales 1 → 2 → 1: long enough for a replica
/// to start, warm up and take load, and for another to leave, with load to spare.
const SCALE_LOAD_S: u32 = 45;

/// One fleet at a time: two would share the cores and nginx's ports would not clash,
/// but each would measure the other.
pub(crate) fn one_fleet_at_a_time() -> MutexGuard<'static, ()> {
    static FLEETS: Mutex<()> = Mutex::new(());
    FLEETS.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

pub(crate) fn require_nginx() {
    let nginx = Command::new("nginx").arg("-v").stderr(Stdio::null()).status();
    assert!(
        nginx.is_ok_and(|s| s.success()),
        "nginx is not installed: run scripts/setup/test_deps.sh as root (make test does)"
    );
}

fn config(dir: &Path) -> PathBuf {
    let model = models_dir().join("mobilenetv2_0.35.onnx");
    let text = format!(
        r#"[onnxruntime]
intra_op_threads = 1
spinning = false

[[tasks]]
name = "classify-image"
latency_slo_ms = 2000

[[tasks.variants]]
name = "mobilenetv2-0.35"
path = "{}"
accuracy = 60.3
batching = {{ max_batch_size = 4, max_queue_delay_us = 0 }}

[server]
drain_timeout_s = 10
"#,
        model.display()
    );
    let path = dir.join("fleet.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// A base port with `count` free ports from it on 127.0.0.1.
pub(crate) fn free_ports(count: u16) -> u16 {
    for _ in 0..50 {
        let base = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        if base < 60_000 && (0..count).all(|i| TcpListener::bind(("127.0.0.1", base + i)).is_ok()) {
            return base;
        }
    }
    panic!("no {count} free ports in a row on 127.0.0.1");
}

fn now_s() -> f64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs_f64()
}

/// Whether `pid` still runs (a zombie waiting for its parent does not).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| stat.rsplit(')').next().is_some_and(|rest| !rest.trim_start().starts_with('Z')))
        .unwrap_or(false)
}

fn signal(pid: u32, name: &str) {
    let status = Command::new("kill").args([&format!("-{name}"), &pid.to_string()]).status().unwrap();
    assert!(status.success(), "kill -{name} {pid}");
}

pub(crate) fn wait_until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    let started = Instant::now();
    while !done() {
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The running script and what it said once the fleet was ready.
pub(crate) struct Fleet {
    script: Child,
    dir: PathBuf,
    replicas: Vec<u32>,
    pub(crate) upstreams: Vec<String>,
    nginx: u32,
    /// The nginx in front of `nginx` that holds the clients' connections while that one
    /// reloads, in a fleet that may scale.
    front: Option<u32>,
    grpc: String,
}

impl Fleet {
    /// Starts `replicas` replicas, with ports for up to `most` of them; a fleet that
    /// may scale (`most` above `replicas`) gets the front nginx that scaling needs.
    pub(crate) fn start(dir: &Path, config: &Path, name: &str, replicas: usize, most: usize) -> Fleet {
        let base = free_ports(2 + 2 * most as u16);
        let fleet_dir = dir.join(format!("fleet-{name}"));
        let script = Command::new("bash")
            .arg(crate_dir().join("../scripts/fleet/run.sh"))
            .args(["--", "sleep", "600"])
            .env("MODELLESS", env!("CARGO_BIN_EXE_modelless"))
            .env("REPLICAS", replicas.to_string())
            .env("SCALABLE", if most > replicas { "1" } else { "0" })
            .env("CONFIG", config)
            .env("FLEET_DIR", &fleet_dir)
            .env("GRPC_PORT", base.to_string())
            .env("HTTP_PORT", (base + 1).to_string())
            .env("BASE_PORT", (base + 2).to_string())
            .env("LIMIT_S", "300")
            // A group of its own, with nginx and the replicas it starts: a test that
            // fails can end them all at once (killing nginx's master alone would
            // leave its workers serving).
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::from(std::fs::File::create(dir.join(format!("fleet-{name}.log"))).unwrap()))
            .spawn()
            .unwrap_or_else(|e| panic!("bash does not run scripts/fleet/run.sh: {e}"));
        let env_file = fleet_dir.join("fleet.env");
        let mut fleet = Fleet {
            script,
            dir: fleet_dir,
            replicas: vec![],
            upstreams: vec![],
            nginx: 0,
            front: None,
            grpc: String::new(),
        };
        wait_until(START_LIMIT, "the fleet ready", || {
            if let Ok(Some(status)) = fleet.script.try_wait() {
                let log = std::fs::read_to_string(dir.join(format!("fleet-{name}.log"))).unwrap_or_default();
                panic!("scripts/fleet/run.sh ended ({status}) before the fleet was ready:\n{log}");
            }
            env_file.is_file()
        });
        let vars = fleet.env();
        fleet.replicas = vars["FLEET_PIDS"].split_whitespace().map(|p| p.parse().unwrap()).collect();
        fleet.upstreams = vars["FLEET_GRPC_UPSTREAMS"].split_whitespace().map(str::to_string).collect();
        fleet.nginx = vars["NGINX_PID"].parse().unwrap();
        fleet.front = vars.get("FRONT_NGINX_PID").map(|p| p.parse().unwrap());
        assert_eq!(fleet.front.is_some(), most > replicas, "a front nginx where the fleet may scale");
        fleet.grpc = vars["FLEET_GRPC"].clone();
        assert_eq!(fleet.replicas.len(), replicas);
        fleet
    }

    /// What `fleet.env` says now (rewritten after every change of replicas).
    fn env(&self) -> HashMap<String, String> {
        std::fs::read_to_string(self.dir.join("fleet.env"))
            .unwrap()
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// Adds or removes a replica with scripts/fleet/scale.sh, which returns once the
    /// change is done (it waits a bounded time).
    fn scale(&mut self, args: &[&str]) -> Change {
        let output = Command::new("bash")
            .arg(crate_dir().join("../scripts/fleet/scale.sh"))
            .args(args)
            .env("FLEET_DIR", &self.dir)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let answer = String::from_utf8_lossy(&output.stdout).trim().to_string();
        assert!(
            output.status.success(),
            "scripts/fleet/scale.sh {args:?}: {answer} {}",
            String::from_utf8_lossy(&output.stderr)
        );
        // ok added|removed INDEX GRPC HTTP PID name=TIME...
        let fields: Vec<&str> = answer.split_whitespace().collect();
        let change = Change {
            index: fields[2].parse().unwrap(),
            upstream: fields[3].to_string(),
            pid: fields[5].parse().unwrap(),
            at: fields[6..]
                .iter()
                .filter_map(|f| f.split_once('='))
                .map(|(k, v)| (k.to_string(), v.parse().unwrap()))
                .collect(),
        };
        if fields[1] == "added" {
            self.replicas.push(change.pid);
            self.upstreams.push(change.upstream.clone());
        }
        change
    }

    fn access_log(&self) -> Vec<Access> {
        std::fs::read_to_string(self.dir.join("access.log"))
            .unwrap_or_default()
            .lines()
            .filter(|l| l.ends_with("/ModelInfer"))
            .map(Access::parse)
            .collect()
    }

    /// Stops the script, which stops the fleet; nothing it started may be left.
    pub(crate) fn stop(mut self) {
        signal(self.script.id(), "TERM");
        wait_until(Duration::from_secs(60), "scripts/fleet/run.sh stopped", || {
            self.script.try_wait().unwrap().is_some()
        });
        for &pid in self.replicas.iter().chain([&self.nginx]).chain(&self.front) {
            assert!(!alive(pid), "process {pid} outlived scripts/fleet/run.sh");
        }
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        if self.script.try_wait().ok().flatten().is_none() {
            let group = format!("-{}", self.script.id());
            let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
            let _ = self.script.wait();
        }
    }
}

/// A replica added or removed, as scripts/fleet/scale.sh tells it.
#[derive(Debug)]
struct Change {
    index: usize,
    upstream: String,
    pid: u32,
    /// When it joined nginx's upstreams (`joined`), or left them with nothing under
    /// way on it (`left`) and exited (`gone`): s since the epoch.
    at: HashMap<String, f64>,
}

/// One line of nginx's access log (`log_format fleet` in scripts/fleet/run.sh).
#[derive(Debug)]
struct Access {
    ended: f64,
    took: f64,
    /// Every replica tried, in order.
    upstreams: Vec<String>,
    status: String,
    grpc_status: String,
    uri: String,
}

impl Access {
    fn parse(line: &str) -> Access {
        // `$upstream_addr` and `$upstream_status` list their attempts as "a, b".
        let joined = line.replace(", ", ",");
        let fields: Vec<&str> = joined.split(' ').collect();
        Access {
            ended: fields[0].parse().unwrap(),
            upstreams: fields[1].split(',').map(str::to_string).collect(),
            status: fields[3].to_string(),
            took: fields[4].parse().unwrap(),
            grpc_status: fields[5].to_string(),
            uri: fields.get(6).map_or_else(String::new, |u| u.to_string()),
        }
    }

    /// A gRPC answer ends in a `grpc-status 0` trailer: a stream cut after its
    /// headers (the replica killed mid-answer) is logged 200 with none, and its
    /// client sees an error. An HTTP answer has no trailer.
    fn answered(&self) -> bool {
        let grpc = self.uri.starts_with("/inference.");
        self.status == "200" && (self.grpc_status == "0" || (!grpc && self.grpc_status == "-"))
    }

    fn went_to(&self, upstream: &str) -> bool {
        self.upstreams.iter().any(|u| u == upstream)
    }

    fn answered_by(&self, upstream: &str) -> bool {
        self.answered() && self.upstreams.last().is_some_and(|u| u == upstream)
    }
}

struct StopRun {
    sent: usize,
    failed: usize,
    held_at_kill: usize,
}

/// Closed-loop load of `CLIENTS` clients for `seconds` through the fleet's nginx,
/// recorded in `dir/load-NAME`.
pub(crate) fn start_load(dir: &Path, config: &Path, fleet: &Fleet, name: &str, seconds: u32) -> (Child, PathBuf) {
    let load = dir.join(format!("load-{name}.toml"));
    std::fs::write(
        &load,
        format!("seed = 3\n[[tasks]]\ntask = \"classify-image\"\npattern = {{ kind = \"constant\", rate = 1, duration_s = {seconds} }}\n"),
    )
    .unwrap();
    let out = dir.join(format!("load-{name}"));
    let loadgen = Command::new(env!("CARGO_BIN_EXE_modelless"))
        .args(["loadgen", "--grpc", &fleet.grpc, "--concurrency", &CLIENTS.to_string()])
        .arg("--config")
        .arg(config)
        .arg("--load")
        .arg(&load)
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(dir.join(format!("loadgen-{name}.log"))).unwrap()))
        .spawn()
        .unwrap();
    (loadgen, out)
}

pub(crate) fn records(out: &Path) -> Vec<RequestRecord> {
    std::fs::read_to_string(out.join("requests.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn stop_one_replica_mid_run(dir: &Path, config: &Path, signal_name: &str) -> StopRun {
    let fleet = Fleet::start(dir, config, signal_name, 3, 3);
    let (mut loadgen, out) = start_load(dir, config, &fleet, signal_name, LOAD_S);
    let (victim, victim_pid) = (fleet.upstreams[1].clone(), fleet.replicas[1]);
    // The load has reached the victim for a while before it is stopped.
    wait_until(Duration::from_secs(60), "load on the second replica", || {
        fleet.access_log().iter().filter(|a| a.answered_by(&victim)).count() >= 100
    });
    let killed_at = now_s();
    signal(victim_pid, signal_name);
    wait_until(Duration::from_secs(30), "the stopped replica gone", || !alive(victim_pid));
    let gone_at = now_s();
    wait_until(Duration::from_secs(120), "the load generator done", || loadgen.try_wait().unwrap().is_some());
    assert!(loadgen.wait().unwrap().success(), "loadgen failed: see {}", dir.display());

    let records = records(&out);
    let failed: Vec<&RequestRecord> = records.iter().filter(|r| r.status != Outcome::Served).collect();
    let log = fleet.access_log();
    // What the stopped replica held: requests nginx had sent it that were still under
    // way at the signal, or that it sent on before the process was seen gone. nginx
    // stamps its log from a clock it refreshes once per event-loop turn, in whole
    // milliseconds, so the edges get a little slack.
    let held_at_kill = log
        .iter()
        .filter(|a| {
            a.went_to(&victim)
                && a.ended - a.took <= gone_at + NGINX_CLOCK_SLACK_S
                && a.ended >= killed_at - NGINX_CLOCK_SLACK_S
        })
        .count();
    let not_answered: Vec<&Access> = log.iter().filter(|a| !a.answered()).collect();
    let after_exit: Vec<&Access> = log.iter().filter(|a| a.ended - a.took > gone_at).collect();
    eprintln!(
        "SIG{signal_name}: {} sent, {} failed, {} held by the replica from the signal to its exit, {} answered by it after the signal, \
         {} after it was gone tried it first; reasons {:?}",
        records.len(),
        failed.len(),
        held_at_kill,
        log.iter().filter(|a| a.answered_by(&victim) && a.ended >= killed_at).count(),
        after_exit.iter().filter(|a| a.went_to(&victim)).count(),
        failed.iter().map(|r| r.reason.clone().unwrap_or_default()).collect::<Vec<_>>(),
    );

    // Every failure the client saw is one nginx saw, and each of those was on the
    // stopped replica.
    assert_eq!(failed.len(), not_answered.len(), "client failures {failed:?} against nginx's {not_answered:?}");
    assert!(not_answered.iter().all(|a| a.went_to(&victim)), "failures elsewhere: {not_answered:?}");
    assert!(failed.len() <= held_at_kill, "{} failed, but it held only {held_at_kill}", failed.len());
    // Once it was gone nothing was answered by it, and nginx tried it at most once
    // per fail_timeout (each time sending the request on to another replica).
    assert!(after_exit.iter().all(|a| !a.answered_by(&victim)));
    let remaining_s = after_exit.iter().map(|a| a.ended).fold(gone_at, f64::max) - gone_at;
    let tried = after_exit.iter().filter(|a| a.went_to(&victim)).count();
    assert!(tried as f64 <= remaining_s / FAIL_TIMEOUT_S + 2.0, "{tried} requests tried the stopped replica");
    // The other two took the load.
    for other in [&fleet.upstreams[0], &fleet.upstreams[2]] {
        assert!(after_exit.iter().filter(|a| a.answered_by(other)).count() >= 50, "{other} idle after the stop");
    }
    if signal_name == "TERM" {
        let replica_log = std::fs::read_to_string(fleet.dir.join("replica-1.log")).unwrap();
        assert!(replica_log.trim_end().ends_with("stopped"), "it drained and stopped:\n{replica_log}");
    }
    fleet.stop();
    StopRun { sent: records.len(), failed: failed.len(), held_at_kill }
}

#[test]
fn a_replica_stopped_mid_run_loses_nothing_on_sigterm_and_only_what_it_held_on_sigkill() {
    require_nginx();
    let _one = one_fleet_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let config = config(dir.path());

    let term = stop_one_replica_mid_run(dir.path(), &config, "TERM");
    assert!(term.sent > 500, "the load flowed: {} sent", term.sent);
    assert_eq!(term.failed, 0, "a drained replica answers everything it took");

    let kill = stop_one_replica_mid_run(dir.path(), &config, "KILL");
    assert!(kill.sent > 500, "the load flowed: {} sent", kill.sent);
    assert!(kill.failed <= kill.held_at_kill);
}

#[test]
fn a_fleet_scaled_from_one_replica_to_two_and_back_under_load_answers_every_request() {
    require_nginx();
    let _one = one_fleet_at_a_time();
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let config = config(dir);
    let mut fleet = Fleet::start(dir, &config, "scale", 1, 2);
    let (mut loadgen, out) = start_load(dir, &config, &fleet, "scale", SCALE_LOAD_S);
    let first = fleet.upstreams[0].clone();
    wait_until(Duration::from_secs(60), "load on the first replica", || {
        fleet.access_log().iter().filter(|a| a.answered_by(&first)).count() >= 100
    });

    // 1 → 2: the new replica joins once it is ready, and takes its share.
    let added = fleet.scale(&["add"]);
    assert_eq!(added.index, 1);
    let second = added.upstream.clone();
    wait_until(Duration::from_secs(60), "load on the added replica", || {
        fleet.access_log().iter().filter(|a| a.answered_by(&second)).count() >= 100
    });

    // 2 → 1: the first leaves nginx's upstreams, drains and exits.
    let removed = fleet.scale(&["remove", "0"]);
    assert_eq!((removed.index, removed.upstream.as_str()), (0, first.as_str()));
    let (left, gone) = (removed.at["left"], removed.at["gone"]);
    assert!(!alive(removed.pid), "the removed replica exited");
    wait_until(Duration::from_secs(60), "load on the remaining replica", || {
        fleet.access_log().iter().filter(|a| a.answered_by(&second) && a.ended - a.took > gone).count() >= 100
    });
    assert!(
        loadgen.try_wait().unwrap().is_none(),
        "the load ended before the fleet was back to one replica: lengthen SCALE_LOAD_S"
    );
    wait_until(Duration::from_secs(120), "the load generator done", || loadgen.try_wait().unwrap().is_some());
    assert!(loadgen.wait().unwrap().success(), "loadgen failed: see {}", dir.display());

    let records = records(&out);
    let failed: Vec<&RequestRecord> = records.iter().filter(|r| r.status != Outcome::Served).collect();
    let log = fleet.access_log();
    let by_first: Vec<&Access> = log.iter().filter(|a| a.went_to(&first)).collect();
    let both = |a: &Access| a.ended - a.took > added.at["joined"] && a.ended < left;
    eprintln!(
        "1 → 2 → 1: {} sent, {} failed, nginx logged {}; the first replica answered {} ({} while both served), \
         the added one {} ({} after the first was gone); reasons {:?}",
        records.len(),
        failed.len(),
        log.len(),
        by_first.iter().filter(|a| a.answered_by(&first)).count(),
        by_first.iter().filter(|a| a.answered_by(&first) && both(a)).count(),
        log.iter().filter(|a| a.answered_by(&second)).count(),
        log.iter().filter(|a| a.answered_by(&second) && a.ended - a.took > gone).count(),
        failed.iter().map(|r| r.reason.clone().unwrap_or_default()).collect::<Vec<_>>(),
    );

    // Every request answered: none failed, and each one the client sent reached nginx
    // and was answered there.
    assert!(failed.is_empty(), "{} requests failed: {failed:?}", failed.len());
    assert_eq!(records.len(), log.len(), "the client's requests against nginx's");
    let unanswered: Vec<&Access> = log.iter().filter(|a| !a.answered()).collect();
    assert!(unanswered.is_empty(), "unanswered: {unanswered:?}");
    // The removed replica served before it went, beside the added one too, and nothing
    // went to it once it had left the upstreams: every request nginx sent it had ended.
    assert!(by_first.iter().filter(|a| a.answered_by(&first) && both(a)).count() > 0, "both replicas served");
    let late: Vec<&&Access> = by_first.iter().filter(|a| a.ended > left + NGINX_CLOCK_SLACK_S).collect();
    assert!(late.is_empty(), "sent to the first replica after it left nginx's upstreams: {late:?}");
    let replica_log = std::fs::read_to_string(fleet.dir.join("replica-0.log")).unwrap();
    assert!(replica_log.trim_end().ends_with("stopped"), "it drained and stopped:\n{replica_log}");
    let env = fleet.env();
    assert_eq!(
        (env["FLEET_REPLICAS"].as_str(), env["FLEET_GRPC_UPSTREAMS"].as_str()),
        ("1", second.as_str()),
        "fleet.env names the replica serving"
    );
    fleet.stop();
}
