//! `modelless tune` end to end on the tiny generated model: a search measured through
//! the runtime in child processes, its table, plot and TOML; the same search reused
//! from the store on a second run; `--write` putting the best setting into the config;
//! the same search paired with the default's slices.

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use modelless::RuntimeConfig;

use crate::common::models_dir;

/// A whole run: load, a few one-second measurements, the remeasurement rounds.
const RUN_LIMIT: Duration = Duration::from_secs(240);

const CONFIG: &str = r#"# Tuned by the test.
[[tasks]]
name = "tiny"

[[tasks.variants]]
name = "tiny"
path = "tiny.onnx"
accuracy = 50.0
batching = { max_batch_size = 4, max_queue_delay_us = 0 }
"#;

fn tune(config: &Path, out: &Path, extra: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_modelless"));
    command
        .args(["tune", "--task", "tiny", "--objective", "mean", "--concurrency", "2"])
        .args(["--budget", "3", "--initial", "2", "--confirm", "1", "--seeds", "1", "--rounds", "1"])
        .args(["--seconds", "1", "--warmup-seconds", "0"])
        .arg("--config")
        .arg(config)
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap_or_else(|e| panic!("modelless tune does not start: {e}"));
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            panic!("modelless tune ran past {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "modelless tune failed:\n{}", String::from_utf8_lossy(&output.stderr));
    output
}

#[test]
fn a_search_is_measured_reported_reused_from_the_store_and_written_into_the_config() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(models_dir().join("tiny.onnx"), dir.path().join("tiny.onnx")).unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(&config, CONFIG).unwrap();

    let first = tune(&config, &dir.path().join("first"), &[]);
    let log = String::from_utf8_lossy(&first.stderr);
    assert!(!log.contains("stored search reused"), "nothing was stored yet:\n{log}");
    // Without a terminal, every evaluation is a line: 3 per search, 2 searches.
    assert_eq!(log.matches("] tiny / mean latency at concurrency 2: ").count(), 6, "{log}");
    let results = std::fs::read_to_string(dir.path().join("first/results.md")).unwrap();
    for row in [
        "| bayes |",
        "| random |",
        "| default |",
        "| model alone, no serving (reference) | – | ",
        "Remeasured, bayes ÷ random",
        "default ÷ model alone",
        "max_batch_size = ",
    ] {
        assert!(results.contains(row), "`{row}` missing:\n{results}");
    }
    let plot = std::fs::read_to_string(dir.path().join("first/tiny-mean-c2-convergence.svg")).unwrap();
    assert!(plot.contains("bayes (mean of 1 seeds)") && plot.contains("random (mean of 1 seeds)"));
    let store = dir.path().join("tiny.tune.json");
    let stored = std::fs::read(&store).unwrap_or_else(|e| panic!("the searches are stored beside the model: {e}"));
    let searches: serde_json::Value = serde_json::from_slice(&stored).unwrap();
    assert_eq!(searches.as_array().map(Vec::len), Some(2), "one search per strategy");
    for search in searches.as_array().unwrap() {
        let key = search["key"]["settings"].as_str().unwrap();
        assert!(!key.contains("paired_with"), "measured alone unless --paired: {key}");
        let evaluations = search["trace"]["evaluations"].as_array().unwrap();
        assert_eq!(evaluations.len(), 3);
        assert!(evaluations.iter().all(|e| e["cost"].as_f64().is_some_and(|ms| ms > 0.0)), "{evaluations:?}");
        // The last evaluation (`--confirm 1`) measures the best of the first two again.
        let cost = |e: &serde_json::Value| e["cost"].as_f64().unwrap();
        let best = evaluations[..2].iter().min_by(|a, b| cost(a).total_cmp(&cost(b))).unwrap();
        assert_eq!(evaluations[2]["setting"], best["setting"], "{evaluations:?}");
    }

    // The same searches again: taken from the store, not measured; the best setting
    // is written into the config.
    let second = tune(&config, &dir.path().join("second"), &["--write"]);
    let log = String::from_utf8_lossy(&second.stderr);
    assert_eq!(log.matches("stored search reused").count(), 2, "{log}");
    assert_eq!(log.matches("] tiny / mean latency at concurrency 2: ").count(), 0, "{log}");
    assert_eq!(std::fs::read(&store).unwrap(), stored, "the store is unchanged");
    let written = std::fs::read_to_string(&config).unwrap();
    assert!(written.starts_with("# Tuned by the test."), "comments are kept:\n{written}");
    assert_ne!(written, CONFIG, "the best setting was written");
    let tuned = RuntimeConfig::from_file(&config).unwrap();
    let variant = &tuned.tasks[0].variants[0];
    let snippet = std::fs::read_to_string(dir.path().join("second/results.md")).unwrap();
    assert!(
        snippet.contains(&format!("batching.max_batch_size = {}", variant.batching.max_batch_size)),
        "the config holds the best remeasured setting:\n{written}\n{snippet}"
    );

    // Paired with the (now written) default: measured again, slice by slice, and
    // stored under keys of their own.
    let paired = tune(&config, &dir.path().join("paired"), &["--paired"]);
    let log = String::from_utf8_lossy(&paired.stderr);
    assert_eq!(log.matches("stored search reused").count(), 0, "{log}");
    assert_eq!(log.matches("] tiny / mean latency at concurrency 2: ").count(), 6, "{log}");
    let results = std::fs::read_to_string(dir.path().join("paired/results.md")).unwrap();
    assert!(results.contains("Per round, bayes ÷ default: median "), "{results}");
    let searches: serde_json::Value = serde_json::from_slice(&std::fs::read(&store).unwrap()).unwrap();
    let keys: Vec<&str> = searches.as_array().unwrap().iter().map(|s| s["key"]["settings"].as_str().unwrap()).collect();
    assert_eq!(keys.iter().filter(|k| k.contains("paired_with")).count(), 2, "{keys:?}");

    // Replayed against what was measured alone (two searches of three evaluations),
    // measuring nothing.
    let before = std::fs::read(&store).unwrap();
    let replayed = tune(&config, &dir.path().join("replay"), &["--replay", "4"]);
    let log = String::from_utf8_lossy(&replayed.stderr);
    assert_eq!(log.matches("] tiny / mean latency at concurrency 2: ").count(), 0, "nothing measured:\n{log}");
    assert_eq!(std::fs::read(&store).unwrap(), before, "the store is unchanged");
    let results = std::fs::read_to_string(dir.path().join("replay/results.md")).unwrap();
    assert!(results.contains("against a surrogate of 6 stored measurements"), "{results}");
    assert!(
        results.contains("Bayesian optimisation's was the cheaper in ") && results.contains(" of 4 seeds."),
        "{results}"
    );
    assert!(dir.path().join("replay/tiny-mean-c2-replay-convergence.svg").exists());
}
