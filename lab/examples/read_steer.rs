//! Pages read through `read-text` (examples/read_text.toml) at a rate that rises past
//! what the most accurate detection variant can serve, each with the pipeline's
//! latency target, while a policy steers the detection task, or with one detection
//! variant throughout. Prints one JSON line: the share of pages answered within the
//! target, the effective accuracy (the detection variant's accuracy averaged over the
//! pages answered in time), the switches and the variants' shares of pages.
//!
//! ```text
//! cargo run --release -p modelless-lab --example read_steer -- \
//!     (--policy FILE.wasm | --variant det-640) --slo-ms 2000 --detect-slo-ms 1000 \
//!     --from 1 --to 6 --seconds 60 [--out PAGES.jsonl] PAGE...
//! ```
//!
//! With `--out`, every page's record goes there, one JSON line each: `sent_s`,
//! `latency_ms` or `failure`, `variant` (detection's). `scripts/bench/steer_ocr.sh` runs it
//! with a policy and with each variant alone, and tabulates and plots the runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use modelless::profile::ProfileMode;
use modelless::{Inputs, PolicyConfig, Runtime, RuntimeConfig, Slo};
use modelless_lab::pages::{flag, page_files};
use rand::{Rng, SeedableRng};

const DETECT: &str = "detect-text";

/// One page: sent at (s), latency (ms) or the failure's kind, detection variant.
type Record = (f64, Result<f64, String>, Option<String>);

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| flag(&args, name);
    let number = |name: &str, default: f64| flag(name).map_or(Ok(default), |v| v.parse::<f64>());
    let (slo_ms, detect_slo_ms) = (number("--slo-ms", 2000.0)?, number("--detect-slo-ms", 1000.0)?);
    let (from, to, seconds) = (number("--from", 1.0)?, number("--to", 6.0)?, number("--seconds", 60.0)?);
    let pages = page_files(&args)?;

    let mut config = RuntimeConfig::from_file(root.join("examples/read_text.toml"))?;
    let detect = config.tasks.iter_mut().find(|t| t.name == DETECT).context("no detection task")?;
    detect.latency_slo_ms = Some(detect_slo_ms);
    for variant in &mut detect.variants {
        variant.preload = true;
        variant.profile = ProfileMode::Measure;
    }
    let accuracy: BTreeMap<String, f64> =
        detect.variants.iter().map(|v| (v.name.clone(), v.variant_accuracy())).collect();
    if let Some(variant) = flag("--variant") {
        detect.active = Some(variant);
    } else {
        let module = PathBuf::from(flag("--policy").context("--policy or --variant")?);
        config.policy = Some(PolicyConfig { tick_ms: 500, ..PolicyConfig::new(module) });
    }
    let runtime = Arc::new(Runtime::builder().with_config(config).build()?);
    // One page first: the sessions' first runs are slow.
    runtime.infer_pipeline_blocking("read-text", Inputs::image(pages[0].clone()), Slo::default())?;

    let records: Arc<Mutex<Vec<Record>>> = Arc::default();
    let mut rng = rand::rngs::StdRng::seed_from_u64(4);
    let start = Instant::now();
    let mut at = 0.0f64;
    let mut waiting = Vec::new();
    let mut sent = 0usize;
    loop {
        // Poisson arrivals at the rate of the moment.
        let rate = from + (to - from) * (at / seconds).min(1.0);
        at += -(1.0 - rng.random::<f64>()).ln() / rate;
        if at >= seconds {
            break;
        }
        let due = start + Duration::from_secs_f64(at);
        std::thread::sleep(due.saturating_duration_since(Instant::now()));
        let (caller, records, page) = (runtime.clone(), records.clone(), pages[sent % pages.len()].clone());
        sent += 1;
        waiting.push(std::thread::spawn(move || {
            let slo = Slo::default().with_latency(Duration::from_secs_f64(slo_ms / 1e3));
            let sent = Instant::now();
            let answer = caller.infer_pipeline_blocking("read-text", Inputs::image(page), slo);
            let took = sent.elapsed().as_secs_f64() * 1e3;
            let record = match answer {
                Ok(answer) => (at, Ok(took), answer.stages.first().and_then(|s| s.variants.first().cloned())),
                Err(e) => (at, Err(e.kind().as_str().to_string()), None),
            };
            if let Ok(mut records) = records.lock() {
                records.push(record);
            }
        }));
        if sent.is_multiple_of(20) {
            eprint!("\r  {at:.0} s, {rate:.1} pages/s, serving {}    ", runtime.task_status(DETECT)?.active);
        }
    }
    for thread in waiting {
        thread.join().map_err(|_| anyhow::anyhow!("a request thread panicked"))?;
    }
    eprintln!();
    let records = records.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let in_time: Vec<&Record> = records.iter().filter(|(_, r, _)| r.as_ref().is_ok_and(|ms| *ms <= slo_ms)).collect();
    let effective =
        in_time.iter().filter_map(|(_, _, v)| accuracy.get(v.as_deref()?)).sum::<f64>() / in_time.len().max(1) as f64;
    let mut shares: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures: BTreeMap<String, usize> = BTreeMap::new();
    for (_, result, variant) in records.iter() {
        if let Some(v) = variant {
            *shares.entry(v.clone()).or_default() += 1;
        }
        if let Err(kind) = result {
            *failures.entry(kind.clone()).or_default() += 1;
        }
    }
    if let Some(out) = flag("--out") {
        let mut lines = String::new();
        for (sent, result, variant) in records.iter() {
            let record = match result {
                Ok(ms) => serde_json::json!({ "sent_s": sent, "latency_ms": ms, "variant": variant }),
                Err(kind) => serde_json::json!({ "sent_s": sent, "failure": kind }),
            };
            lines.push_str(&format!("{record}\n"));
        }
        std::fs::write(&out, lines).with_context(|| format!("writing {out}"))?;
    }
    let mut timeline: Vec<(f64, String)> = records.iter().filter_map(|(t, _, v)| Some((*t, v.clone()?))).collect();
    timeline.sort_by(|a, b| a.0.total_cmp(&b.0));
    let switches = timeline.windows(2).filter(|w| w[0].1 != w[1].1).count();
    println!(
        "{}",
        serde_json::json!({
            "steering": flag("--variant").unwrap_or_else(|| "policy".into()),
            "pages": records.len(),
            "within_slo_percent": 100.0 * in_time.len() as f64 / records.len().max(1) as f64,
            "effective_accuracy": effective,
            "variant_pages": shares,
            "failures": failures,
            "variant_changes": switches,
        })
    );
    Ok(())
}
