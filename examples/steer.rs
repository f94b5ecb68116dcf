//! A policy steers a task under changing load: the `cpu-threshold` module steps the
//! MobileNetV2 variants down when the CPU is busy and back up when it is idle; with
//! `--reload`, it is replaced by `slo-predictive` half-way through, while requests flow.
//!
//! The task `classify-image` has three variants (widths 0.5, 1.0 and 1.4, a chain in
//! which each is at least 40 % cheaper than the next); all three are loaded at start and
//! profiled first if no stored profile matches (about half a minute, once: profiles are
//! stored beside the models). Requests arrive at a fixed rate that changes: light,
//! heavy (more than the 1.4 variant can answer), light again. The policy decides every
//! half second; `cpu-threshold` runs with the thesis's thresholds (70 % / 50 % / 65 %)
//! over windows shortened for a short run. Every second prints the offered and
//! answered rates, the p99 latency, the CPU and the variant serving; every switch
//! prints as it happens. At the end: failed requests (the example exits non-zero if
//! there are any), and a plot of latency over time with the variant serving,
//! `target/steer.svg`.
//!
//! ```text
//! # after `bash scripts/setup/base.sh` (or `make setup`):
//! cargo run --release -p modelless-examples --example steer
//! cargo run --release -p modelless-examples --example steer -- --reload
//! ```

use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use modelless::profile::ProfileMode;
use modelless::{BatchingConfig, PolicyConfig, Runtime, Slo, TaskConfig, Tensor, Ticket, VariantConfig};

const TASK: &str = "classify-image";
/// (width, file, published top-1).
const VARIANTS: [(&str, &str, f64); 3] = [
    ("mobilenetv2-0.5", "mobilenetv2_0.5.onnx", 65.4),
    ("mobilenetv2-1.0", "mobilenetv2_1.0.onnx", 71.8),
    ("mobilenetv2-1.4", "mobilenetv2_1.4.onnx", 75.0),
];
/// (seconds, requests per second): light, heavy, light.
const PHASES: [(u64, f64); 3] = [(8, 15.0), (20, 170.0), (24, 15.0)];
const WAITERS: usize = 64;

/// One request: when it was sent (s from the start), its latency (ms) and the variant
/// that answered, or the error.
type Answer = (f64, Result<(f64, Arc<str>), String>);

fn main() -> ExitCode {
    match run() {
        Ok(0) => ExitCode::SUCCESS,
        Ok(failed) => {
            eprintln!("steer: {failed} requests failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("steer: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> anyhow::Result<usize> {
    let reload = std::env::args().any(|a| a == "--reload");
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let models = root.join(".modelless/models");
    let policies = root.join(".modelless/policies");
    anyhow::ensure!(policies.join("cpu-threshold.wasm").is_file(), "run scripts/setup/base.sh first");
    let mut task = TaskConfig::new(TASK).with_active("mobilenetv2-1.4").with_latency_slo_ms(250.0);
    for (name, file, accuracy) in VARIANTS {
        let variant = VariantConfig::new(name, models.join(file), accuracy)
            .with_batching(BatchingConfig::default().with_max_batch_size(8).with_max_queue_size(4096))
            .with_preload(true)
            .with_profile(ProfileMode::Measure);
        task = task.with_variant(variant);
    }
    eprintln!("loading three variants (each profiled first unless a stored profile matches)...");
    let rt = Arc::new(Runtime::builder().with_task(task).build()?);
    let status = rt.task_status(TASK)?;
    for v in &status.variants {
        let per_s = v.versions.last().and_then(|s| s.max_throughput_per_s).unwrap_or(f64::NAN);
        eprintln!("  {:<16} top-1 {:>4.1} %  profiled {:>6.1} requests/s", v.name, v.accuracy, per_s);
    }
    // The thesis's thresholds; its 10/15/30 s windows shortened for a one-minute run.
    let parameters = serde_json::json!({ "window_ms": 3000, "min_interval_ms": 4000, "step_up_after_ms": 8000 });
    let policy = PolicyConfig::new(policies.join("cpu-threshold.wasm"))
        .with_tick(Duration::from_millis(500))
        .with_parameters(parameters);
    rt.start_policy(policy)?;

    let start = Instant::now();
    let answers: Arc<Mutex<Vec<Answer>>> = Arc::default();
    let (tickets, waiting) = std::sync::mpsc::sync_channel::<(f64, Result<Ticket, modelless::Error>)>(8192);
    let waiting = Arc::new(Mutex::new(waiting));
    let waiters: Vec<_> = (0..WAITERS)
        .map(|_| {
            let (waiting, answers) = (waiting.clone(), answers.clone());
            std::thread::spawn(move || {
                loop {
                    let next = waiting.lock().map_err(|_| ()).and_then(|w| w.recv().map_err(|_| ()));
                    let Ok((sent, ticket)) = next else { return };
                    let answer = ticket.and_then(Ticket::wait).map(|out| {
                        let latency = (start.elapsed().as_secs_f64() - sent) * 1e3;
                        (latency, out.model.clone())
                    });
                    if let Ok(mut a) = answers.lock() {
                        a.push((sent, answer.map_err(|e| e.to_string())));
                    }
                }
            })
        })
        .collect();
    let image = Tensor::full([1, 3, 224, 224], 0.5f32);
    let total: u64 = PHASES.iter().map(|p| p.0).sum();
    let mut reported = 0;
    let mut switches: Vec<(f64, String)> = vec![(0.0, rt.task_status(TASK)?.active)];
    let mut phase_start = 0.0;
    for (seconds, rate) in PHASES {
        let phase_end = phase_start + seconds as f64;
        let mut sent = 0u64;
        while start.elapsed().as_secs_f64() < phase_end {
            let due = phase_start + sent as f64 / rate;
            let now = start.elapsed().as_secs_f64();
            if now < due {
                std::thread::sleep(Duration::from_secs_f64((due - now).min(0.05)));
            } else {
                let ticket = rt.submit_task(TASK, image.clone(), Slo::default());
                tickets.send((now, ticket)).context("waiters gone")?;
                sent += 1;
            }
            let second = start.elapsed().as_secs();
            if second > reported {
                reported = second;
                report(&rt, &answers, second, rate, &mut switches)?;
                if reload && second == total / 2 {
                    let took = rt.reload_policy_with(policies.join("slo-predictive.wasm"), serde_json::json!({}))?;
                    println!(
                        "{second:>4} s  policy reloaded: slo-predictive deciding after {:.0} ms",
                        took.as_secs_f64() * 1e3
                    );
                }
            }
        }
        phase_start = phase_end;
    }
    drop(tickets);
    for waiter in waiters {
        let _ = waiter.join();
    }
    let answers = std::mem::take(&mut *answers.lock().map_err(|_| anyhow::anyhow!("poisoned"))?);
    let failed = answers.iter().filter(|a| a.1.is_err()).count();
    let status = rt.policy_status().context("no policy")?;
    println!(
        "\n{} requests, {failed} failed; {} variant switches by the policy ({}); policy failures: {:?}",
        answers.len(),
        status.switches,
        status.policy,
        status.failures
    );
    let plot = root.join("target/steer.svg");
    std::fs::create_dir_all(root.join("target"))?;
    std::fs::write(&plot, svg(&answers, &switches, total as f64))?;
    println!("plot: {}", plot.display());
    Ok(failed)
}

/// One line for the second just ended (the answers completed in it), and a line per
/// switch seen.
fn report(
    rt: &Runtime,
    answers: &Mutex<Vec<Answer>>,
    second: u64,
    rate: f64,
    switches: &mut Vec<(f64, String)>,
) -> anyhow::Result<()> {
    let mut latencies: Vec<f64> = answers
        .lock()
        .map_err(|_| anyhow::anyhow!("poisoned"))?
        .iter()
        .filter_map(|a| a.1.as_ref().ok().map(|ok| (a.0 + ok.0 / 1e3, ok.0)))
        .filter(|(done, _)| *done >= (second - 1) as f64 && *done < second as f64)
        .map(|(_, latency)| latency)
        .collect();
    latencies.sort_by(f64::total_cmp);
    // The nearest rank: the smallest latency that 99 % of them do not exceed.
    let p99 = latencies.get((latencies.len() * 99).div_ceil(100).saturating_sub(1)).copied();
    let active = rt.task_status(TASK)?.active;
    if switches.last().is_none_or(|s| s.1 != active) {
        println!("{second:>4} s  switched to {active}");
        switches.push((second as f64, active.clone()));
    }
    let cpu = rt.policy_status().and_then(|s| s.cpu_host_percent).map_or("-".into(), |c| format!("{c:.0} %"));
    println!(
        "{second:>4} s  offered {rate:>5.0}/s  answered {:>4}  p99 {:>7}  CPU {cpu:>5}  {active}",
        latencies.len(),
        p99.map_or("-".into(), |p| format!("{p:.0} ms"))
    );
    Ok(())
}

/// Latency of every answer over time, on bands of the variant serving.
fn svg(answers: &[Answer], switches: &[(f64, String)], total_s: f64) -> String {
    use std::fmt::Write;
    let (w, h, pad) = (1000.0, 420.0, 50.0);
    let mut ok: Vec<f64> = answers.iter().filter_map(|a| a.1.as_ref().ok().map(|o| o.0)).collect();
    ok.sort_by(f64::total_cmp);
    let y_max = ok.get(ok.len() * 999 / 1000).copied().unwrap_or(1.0).max(1.0) * 1.1;
    let x = |t: f64| pad + t / total_s * (w - 2.0 * pad);
    let y = |ms: f64| h - pad - ms.min(y_max) / y_max * (h - 2.0 * pad);
    let colours = ["#cfe8ff", "#ffe2c6", "#d9f2d0"];
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(s, r#"<rect width="100%" height="100%" fill="white"/>"#);
    for (i, (at, variant)) in switches.iter().enumerate() {
        let until = switches.get(i + 1).map_or(total_s, |n| n.0);
        let colour = VARIANTS.iter().position(|v| v.0 == variant).map_or("#eeeeee", |k| colours[k]);
        let _ = writeln!(
            s,
            r#"<rect x="{:.1}" y="{pad}" width="{:.1}" height="{}" fill="{colour}"><title>{variant}</title></rect>"#,
            x(*at),
            x(until) - x(*at),
            h - 2.0 * pad
        );
        let _ = writeln!(s, r#"<text x="{:.1}" y="{}">{variant}</text>"#, x(*at) + 3.0, pad - 5.0);
    }
    for (sent, answer) in answers {
        if let Ok((ms, _)) = answer {
            let _ = writeln!(s, r#"<circle cx="{:.1}" cy="{:.1}" r="1.2" fill="black"/>"#, x(*sent), y(*ms));
        }
    }
    let _ = writeln!(s, r#"<line x1="{pad}" y1="{0}" x2="{1}" y2="{0}" stroke="black"/>"#, h - pad, w - pad);
    let _ = writeln!(
        s,
        r#"<text x="{}" y="{}" text-anchor="middle">time (s), 0 to {total_s:.0}; latency (ms), 0 to {y_max:.0}</text>"#,
        w / 2.0,
        h - 15.0
    );
    s.push_str("</svg>\n");
    s
}
