//! How long a policy decision takes through the Wasm host, against the same policy
//! called natively on the same JSON: for `static` (decoding the snapshot is nearly all
//! its work) and for `slo-predictive` (which predicts every variant of every task).
//!
//! Run: `make bench-policy` (or `cargo bench -p modelless --bench policy_round_trip`).
//! The snapshot has 8 tasks of 6 variants each, every variant with its profile. Both
//! sides do the same work per tick, from the snapshot's JSON: decode it in the policy,
//! decide, encode the decision, decode it in the host. Through the host that also
//! crosses into the sandbox (copying in and out, under the epoch deadline and the
//! memory cap). Encoding the snapshot, done once per tick whoever reads it, is timed
//! apart. Rounds alternate between the two, so a machine whose speed drifts
//! slows both alike. Results go to stdout and `<target>/modelless-bench/policy.md`.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
#[path = "common/policy_snapshot.rs"]
mod policy_snapshot;

use anyhow::Result;
use common::{output_dir, setup_file};
use modelless::policy_abi::{Decision, PolicyOutput, Snapshot};
use modelless_policy_abi::guest::{Hosted, Policy};
use modelless_policy_slo_predictive::SloPredictive;
use modelless_policy_static::Static;
use modelless_runtime::policy::{
    ControlConfig, ControlLoop, GuardedPolicy, HostConfig, KeepConfigured, ListTasks, PolicyEngine,
};
use modelless_runtime::stats::percentile;
use policy_snapshot::busy_snapshot;

const TASKS: usize = 8;
const VARIANTS: usize = 6;
const ROUNDS: usize = 20;
const CALLS_PER_ROUND: usize = 250;

fn main() -> Result<()> {
    let snapshot = busy_snapshot(TASKS, VARIANTS);
    let json = serde_json::to_vec(&snapshot)?;
    let engine = PolicyEngine::new(HostConfig::default())?;
    let module = setup_file("policies/static.wasm")?;
    let reload = reload_times(&engine, &module, &snapshot)?;
    let watched = watched_reload(&engine, &module)?;
    let rows = [
        round_trips::<Static>(&engine, "static", &json)?,
        round_trips::<SloPredictive>(&engine, "slo-predictive", &json)?,
    ];
    let mut encode_us: Vec<f64> = (0..ROUNDS * CALLS_PER_ROUND)
        .map(|_| {
            let t = Instant::now();
            std::hint::black_box(serde_json::to_vec(&snapshot).map(|j| j.len()).unwrap_or(0));
            t.elapsed().as_secs_f64() * 1e6
        })
        .collect();
    let (e50, e99) = (percentile(&mut encode_us, 0.5), percentile(&mut encode_us, 0.99));
    let mut report = format!(
        "## Policy decision round trip\n\nSnapshot of {TASKS} tasks × {VARIANTS} variants with their profiles, {} \
         bytes of JSON; {} calls each way per policy, alternating.\n\n\
         | policy | Wasm host p50 µs | p99 µs | native p50 µs | p99 µs | ratio p50 | ratio p99 |\n\
         |---|---:|---:|---:|---:|---:|---:|\n",
        json.len(),
        ROUNDS * CALLS_PER_ROUND,
    );
    for (name, [h50, h99, n50, n99]) in &rows {
        report.push_str(&format!(
            "| {name} | {h50:.1} | {h99:.1} | {n50:.1} | {n99:.1} | {:.2} | {:.2} |\n",
            h50 / n50,
            h99 / n99
        ));
    }
    report.push_str(&format!(
        "\nThe control loop encodes a tick's snapshot once, for the policy, a shadow and the recording alike; \
         encoding it took p50 {e50:.1} µs, p99 {e99:.1} µs more.\n\n\
         Replacing the module (`static`, as a hot reload does, file already read), median of 5: {reload}. \
         Through the file watch (checked every 100 ms), from writing the file to the new module deciding: \
         {watched:.0} ms.\n"
    ));
    println!("{report}");
    let out = output_dir();
    std::fs::create_dir_all(&out)?;
    std::fs::write(out.join("policy.md"), &report)?;
    eprintln!("written to {}", out.display());
    Ok(())
}

/// p50 and p99 of the round trip through the host and natively, in µs, alternating.
fn round_trips<P: Policy>(
    engine: &Arc<PolicyEngine>,
    name: &'static str,
    json: &[u8],
) -> Result<(&'static str, [f64; 4])> {
    let mut native = Hosted::<P>::default();
    let mut wasm = engine.compile_file(&setup_file(&format!("policies/{name}.wasm"))?)?.instantiate(None)?;
    let mut through_host = |json: &[u8]| -> Result<Decision> { Ok(wasm.decide_json(json)?) };
    let mut natively = |json: &[u8]| -> Result<Decision> {
        match serde_json::from_slice(&native.decide_json(json))? {
            PolicyOutput::Decision(decision) => Ok(decision),
            PolicyOutput::Error { error } => anyhow::bail!(error),
        }
    };
    anyhow::ensure!(through_host(json)? == natively(json)?, "{name}: the module and the native policy disagree");
    let (mut host_us, mut native_us) = (Vec::new(), Vec::new());
    for round in 0..ROUNDS {
        for _ in 0..CALLS_PER_ROUND {
            let t = Instant::now();
            std::hint::black_box(through_host(json)?);
            host_us.push(t.elapsed().as_secs_f64() * 1e6);
            let t = Instant::now();
            std::hint::black_box(natively(json)?);
            native_us.push(t.elapsed().as_secs_f64() * 1e6);
        }
        eprint!("\r{name}: round {}/{ROUNDS}", round + 1);
    }
    eprintln!();
    let (h50, h99) = (percentile(&mut host_us, 0.5), percentile(&mut host_us, 0.99));
    let (n50, n99) = (percentile(&mut native_us, 0.5), percentile(&mut native_us, 0.99));
    Ok((name, [h50, h99, n50, n99]))
}

/// How long a replacement takes: compiling the module, then instantiating it and
/// dry-running it on the last snapshot before the swap.
fn reload_times(engine: &Arc<PolicyEngine>, module: &Path, snapshot: &Snapshot) -> Result<String> {
    let fallback = KeepConfigured::default();
    let mut guarded = GuardedPolicy::new(engine.compile_file(module)?, None, fallback);
    let bytes = std::fs::read(module)?;
    let (mut compile, mut swap) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        let t = Instant::now();
        let compiled = engine.compile("static", &bytes)?;
        compile.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        guarded.replace(compiled, None, Some(snapshot))?;
        swap.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (c, s) = (percentile(&mut compile, 0.5), percentile(&mut swap, 0.5));
    Ok(format!("compile {c:.0} ms, instantiate and dry run {s:.2} ms, {:.0} ms in all", c + s))
}

/// From writing a watched module file to the control loop deciding with it, in ms.
fn watched_reload(engine: &Arc<PolicyEngine>, module: &Path) -> Result<f64> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("policy.wasm");
    std::fs::copy(module, &path)?;
    let tasks: ListTasks = Arc::new(Vec::new);
    let control = ControlLoop::start(
        tasks,
        engine.compile_file(&path)?,
        None,
        KeepConfigured::default(),
        ControlConfig::default().with_tick(Duration::from_millis(100)),
    )?;
    control.watch(path.clone(), engine.clone(), Duration::from_millis(100))?;
    std::thread::sleep(Duration::from_millis(300));
    let written = Instant::now();
    std::fs::write(&path, std::fs::read(module)?)?;
    while control.status().reloads == 0 {
        anyhow::ensure!(written.elapsed() < Duration::from_secs(30), "no reload");
        std::thread::sleep(Duration::from_millis(1));
    }
    dir.close()?;
    Ok(written.elapsed().as_secs_f64() * 1e3)
}
