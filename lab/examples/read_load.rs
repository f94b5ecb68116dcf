//! A closed loop of callers reading pages through the `read-text` pipeline in process
//! (examples/read_text.toml): each of `--callers` threads sends the next page as soon
//! as its last is answered, for `--seconds` after one warm-up page. Prints one
//! JSON line: pages answered, throughput, latency percentiles, the recognition
//! batches' mean size; `scripts/bench/ocr.sh` runs it beside RapidOCR.
//!
//! ```text
//! cargo run --release -p modelless-lab --example read_load -- \
//!     --callers N --seconds S [--detect det-736] [--recognize rec-v4] [--config FILE] PAGE...
//! ```

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use modelless::{Inputs, Runtime, RuntimeConfig, Slo};
use modelless_lab::pages::{flag, page_files};

/// The pipeline's stages in the order they run, as RapidOCR names them.
const STAGES: [(&str, usize); 3] = [("detect", 0), ("direction", 1), ("recognize", 2)];

fn main() -> anyhow::Result<()> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..").canonicalize()?;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| flag(&args, name);
    let callers: usize = flag("--callers").unwrap_or_else(|| "1".into()).parse()?;
    let seconds: f64 = flag("--seconds").unwrap_or_else(|| "10".into()).parse()?;
    let detect = flag("--detect").unwrap_or_else(|| "det-736".into());
    let pages = page_files(&args)?;

    let config = flag("--config").map_or_else(|| root.join("examples/read_text.toml"), Into::into);
    let config = RuntimeConfig::from_file(config)?;
    let runtime = Arc::new(Runtime::builder().with_config(config).build()?);
    runtime.switch_variant("detect-text", &detect)?;
    if let Some(recognize) = flag("--recognize") {
        runtime.switch_variant("recognize-text", &recognize)?;
    }

    // One page first: the sessions' first runs are slow.
    runtime.infer_pipeline_blocking("read-text", Inputs::image(pages[0].clone()), Slo::default())?;
    let pages = Arc::new(pages);
    let next = Arc::new(AtomicUsize::new(0));
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let lines = Arc::new(AtomicUsize::new(0));
    let stage_s = Arc::new(Mutex::new([0.0f64; 3]));
    let start = Arc::new(Barrier::new(callers));
    // From when every caller is warm to the last answer.
    let began: Arc<Mutex<Option<Instant>>> = Arc::default();
    let threads: Vec<_> = (0..callers)
        .map(|_| {
            let (runtime, pages, next, latencies) = (runtime.clone(), pages.clone(), next.clone(), latencies.clone());
            let (start, lines, began, stage_s) = (start.clone(), lines.clone(), began.clone(), stage_s.clone());
            let read = move |page: &bytes::Bytes| {
                runtime.infer_pipeline_blocking("read-text", Inputs::image(page.clone()), Slo::default())
            };
            std::thread::spawn(move || -> anyhow::Result<()> {
                if start.wait().is_leader() {
                    began.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.replace(Instant::now());
                }
                let end = Instant::now() + Duration::from_secs_f64(seconds);
                while Instant::now() < end {
                    let page = &pages[next.fetch_add(1, Ordering::Relaxed) % pages.len()];
                    let sent = Instant::now();
                    let answer = read(page)?;
                    let took = sent.elapsed();
                    let read_lines = answer.stages.last().map_or(0, |s| s.items);
                    lines.fetch_add(read_lines, Ordering::Relaxed);
                    let mut stages = stage_s.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
                    for (stage, ran) in STAGES.iter().zip(&answer.stages) {
                        stages[stage.1] += ran.elapsed.as_secs_f64();
                    }
                    latencies.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.push((sent, took));
                }
                Ok(())
            })
        })
        .collect();
    for thread in threads {
        thread.join().map_err(|_| anyhow::anyhow!("a caller panicked"))??;
    }
    let latencies = latencies.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let began = began.lock().map_err(|_| anyhow::anyhow!("poisoned"))?.context("no caller started")?;
    let finished = latencies.iter().map(|(sent, took)| *sent + *took).max().unwrap_or(began);
    let elapsed = (finished - began).as_secs_f64();
    let mut took: Vec<f64> = latencies.iter().map(|(_, t)| t.as_secs_f64()).collect();
    took.sort_by(f64::total_cmp);
    let quantile = |q: f64| took.get(((took.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or(f64::NAN);
    let stage_s = *stage_s.lock().map_err(|_| anyhow::anyhow!("poisoned"))?;
    let stage_ms: serde_json::Map<String, serde_json::Value> = STAGES
        .iter()
        .map(|(name, i)| (name.to_string(), (stage_s[*i] * 1e3 / took.len().max(1) as f64).into()))
        .collect();
    let metrics = runtime.metrics_text();
    let batches = series(&metrics, "modelless_inference_exec_count", "recognize-text");
    let rows = series(&metrics, "modelless_inference_count", "recognize-text");
    println!(
        "{}",
        serde_json::json!({
            "system": "modelless",
            "callers": callers,
            "pages": took.len(),
            "lines": lines.load(Ordering::Relaxed),
            "seconds": elapsed,
            "pages_per_s": took.len() as f64 / elapsed,
            "p50_ms": quantile(0.5) * 1e3,
            "p99_ms": quantile(0.99) * 1e3,
            "recognition_batch_mean": if batches > 0.0 { rows / batches } else { 0.0 },
            "stage_ms_per_page": stage_ms,
        })
    );
    Ok(())
}

/// The sum of the Prometheus counter `name` over the series of `task`.
fn series(metrics: &str, name: &str, task: &str) -> f64 {
    let label = format!("task=\"{task}\"");
    metrics
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{') && l.contains(&label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}
