//! Policies in each language through the Wasm host: `decide` on a 4 KB and a 40 KB
//! snapshot, instantiating, the first load (compiling) and a cached load (the
//! compiled artefact from disk), the memory an instance holds; and how late the
//! control loop's ticks come while a Python policy is hot-reloaded under load.
//!
//! Run: `make bench-policy` (or `cargo bench -p modelless --bench policy_languages`).
//! The modules are those `scripts/policies/build_languages.sh` built; a language it
//! skipped is listed as such. Calls alternate between the modules round by round, so
//! a machine whose speed drifts slows all alike. Results go to stdout and
//! `<target>/modelless-bench/policy-languages.md`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;
#[path = "common/policy_snapshot.rs"]
mod policy_snapshot;

use anyhow::{Context, Result};
use common::{output_dir, setup_file};
use modelless::backend::MakeBackend;
use modelless::{PolicyConfig, Runtime, Slo, TaskConfig, Tensor, VariantConfig, WarmupConfig};
use modelless_runtime::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use modelless_runtime::policy::{HostConfig, PolicyEngine, PolicyInstance, read_ticks};
use modelless_runtime::stats::percentile;
use policy_snapshot::busy_snapshot;

const ROUNDS: usize = 10;
const CALLS_PER_ROUND: usize = 20;

/// (language, module, parameters).
const MODULES: [(&str, &str, &str); 7] = [
    ("Rust", "cpu-threshold", "null"),
    ("C", "queue-guard", "null"),
    ("Python", "cpu-threshold-py", "null"),
    ("TypeScript", "cheapest-meeting-slo-ts", "null"),
    ("Go", "replica-only-go", "null"),
    ("Zig", "static-zig", "null"),
    ("AssemblyScript", "schedule-as", r#"{"variants":["task0-variant0"],"period_ms":1000}"#),
];

struct Measured {
    language: &'static str,
    module: &'static str,
    bytes: usize,
    first_load_ms: f64,
    cached_load_ms: f64,
    instantiate_ms: f64,
    memory_mib: f64,
    decide_us: [Vec<f64>; 2],
}

fn main() -> Result<()> {
    // About 4 KB and 40 KB: one task of 7 variants, 8 tasks of 9.
    let snapshots = [busy_snapshot(1, 7), busy_snapshot(8, 9)];
    let json: Vec<Vec<u8>> = snapshots.iter().map(serde_json::to_vec).collect::<Result<_, _>>()?;
    let cache = tempfile::tempdir()?;
    let host = HostConfig::default().with_compiled_cache(cache.path());
    let cached_engine = PolicyEngine::new(host)?;
    let mut measured = Vec::new();
    let mut instances: Vec<PolicyInstance> = Vec::new();
    for (language, module, parameters) in MODULES {
        let Ok(path) = setup_file(&format!("policies/{module}.wasm")) else {
            println!("{language}: {module}.wasm not built (see .modelless/policies/languages.txt)");
            continue;
        };
        let bytes = std::fs::read(&path)?;
        let parameters: serde_json::Value = serde_json::from_str(parameters)?;
        let parameters = (!parameters.is_null()).then_some(parameters);
        let t = Instant::now();
        PolicyEngine::new(HostConfig::default())?.compile(module, &bytes)?;
        let first_load_ms = ms(t);
        cached_engine.compile(module, &bytes)?;
        let mut cached = (0..5)
            .map(|_| {
                let t = Instant::now();
                cached_engine.compile(module, &bytes).map(|m| (ms(t), m.loaded().from_cache))
            })
            .collect::<Result<Vec<_>, _>>()?;
        anyhow::ensure!(cached.iter().all(|c| c.1), "{module}: the cached load compiled");
        let compiled = cached_engine.compile(module, &bytes)?;
        let mut instantiate: Vec<f64> = (0..10)
            .map(|_| {
                let t = Instant::now();
                compiled.instantiate(parameters.as_ref()).map(|_| ms(t))
            })
            .collect::<Result<_, _>>()?;
        let mut instance = compiled.instantiate(parameters.as_ref())?;
        instance.decide_json(&json[1]).with_context(|| format!("{module} on the 40 KB snapshot"))?;
        measured.push(Measured {
            language,
            module,
            bytes: bytes.len(),
            first_load_ms,
            cached_load_ms: percentile(&mut cached.iter_mut().map(|c| c.0).collect::<Vec<_>>(), 0.5),
            instantiate_ms: percentile(&mut instantiate, 0.5),
            memory_mib: instance.memory_bytes() as f64 / f64::from(1 << 20),
            decide_us: [Vec::new(), Vec::new()],
        });
        instances.push(instance);
        cached.clear();
    }
    for _ in 0..ROUNDS {
        for (m, instance) in measured.iter_mut().zip(&mut instances) {
            for (size, json) in json.iter().enumerate() {
                for _ in 0..CALLS_PER_ROUND {
                    let t = Instant::now();
                    instance.decide_json(json)?;
                    m.decide_us[size].push(t.elapsed().as_secs_f64() * 1e6);
                }
            }
        }
    }
    let late = reload_lateness()?;
    let mut report = format!(
        "## Policies by language\n\nSnapshots of {} and {} bytes; {} calls each per module, alternating. Cached \
         load: the compiled artefact read from disk (median of 5); instantiate: median of 10; memory: what an \
         instance holds after a call on the larger snapshot.\n\n\
         | language | module | size | decide 4 KB p50 | decide 40 KB p50 | 40 KB p99 | instantiate | first load | cached load | memory |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n",
        json[0].len(),
        json[1].len(),
        ROUNDS * CALLS_PER_ROUND
    );
    for m in &mut measured {
        let (small, large, large99) = (
            percentile(&mut m.decide_us[0], 0.5),
            percentile(&mut m.decide_us[1], 0.5),
            percentile(&mut m.decide_us[1], 0.99),
        );
        report += &format!(
            "| {} | `{}` | {:.2} MB | {:.3} ms | {:.3} ms | {:.3} ms | {:.2} ms | {:.0} ms | {:.1} ms | {:.1} MiB |\n",
            m.language,
            m.module,
            m.bytes as f64 / 1e6,
            small / 1e3,
            large / 1e3,
            large99 / 1e3,
            m.instantiate_ms,
            m.first_load_ms,
            m.cached_load_ms,
            m.memory_mib
        );
    }
    report += &match late {
        Some((ticks, late_ms, reload_ms)) => format!(
            "\nA Python policy hot-reloaded (watched file, not yet compiled) under load: the control loop ticked \
             {ticks} times every 100 ms across it; the latest tick came {late_ms:.1} ms late; the reload took \
             {reload_ms:.0} ms from the write to the new policy deciding.\n"
        ),
        None => "\nNo Python policy built: the reload under load was not measured.\n".into(),
    };
    println!("{report}");
    let dir = output_dir();
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("policy-languages.md"), report)?;
    Ok(())
}

fn ms(since: Instant) -> f64 {
    since.elapsed().as_secs_f64() * 1e3
}

/// A runtime serving a fake task under a steady stream of requests, steered by the
/// Rust `static` every 100 ms and recorded; the Python policy written to its watched
/// file mid-run, uncompiled. The ticks recorded, how late the latest came past its
/// 100 ms, and how long the reload took from the write.
fn reload_lateness() -> Result<Option<(usize, f64, f64)>> {
    let Ok(python) = setup_file("policies/cpu-threshold-py.wasm") else { return Ok(None) };
    let dir = tempfile::tempdir()?;
    let watched = dir.path().join("policy.wasm");
    std::fs::copy(setup_file("policies/static.wasm")?, &watched)?;
    let fake = FakeConfig { per_batch: Duration::from_millis(2), ..FakeConfig::default() };
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
    let variant = VariantConfig::new("v0", "fake", 70.0).with_warmup(WarmupConfig::disabled());
    let rt = Arc::new(Runtime::builder().build()?);
    rt.add_task_with(TaskConfig::new("classify").with_variant(variant), make)?;
    let record = dir.path().join("ticks.jsonl");
    let mut config = PolicyConfig::new(&watched).with_tick(Duration::from_millis(100)).with_watch(true);
    config.record = Some(record.clone());
    // A fresh cache: the Python module is compiled while the loop ticks.
    config.compiled_cache = Some(dir.path().join("cache"));
    rt.start_policy(config)?;
    let stop = Arc::new(AtomicBool::new(false));
    let load = {
        let (rt, stop) = (rt.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok(row) = Tensor::new([1, 4], vec![1.0; 4]) else { return };
                let _ = rt.infer_task_blocking("classify", row, Slo::default());
            }
        })
    };
    std::thread::sleep(Duration::from_secs(1));
    let written = Instant::now();
    std::fs::write(&watched, std::fs::read(&python)?)?;
    while rt.policy_status().is_some_and(|s| s.reloads == 0) {
        anyhow::ensure!(written.elapsed() < Duration::from_secs(120), "no reload within 2 minutes");
        std::thread::sleep(Duration::from_millis(5));
    }
    let reload_ms = ms(written);
    std::thread::sleep(Duration::from_secs(1));
    rt.stop_policy();
    stop.store(true, Ordering::Relaxed);
    let _ = load.join();
    let ticks = read_ticks(&record)?;
    let late_ms = ticks.windows(2).map(|w| w[1].0.now_ms as f64 - w[0].0.now_ms as f64 - 100.0).fold(0.0, f64::max);
    Ok(Some((ticks.len(), late_ms, reload_ms)))
}
