//! Tasks and variants: routing by accuracy and priority, switches and new versions
//! under load, states, and the config file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use modelless::backend::MakeBackend;
use modelless::profile::ProfileMode;
use modelless::status::VariantState;
use modelless::{
    BatchingConfig, Error, Priority, Runtime, RuntimeConfig, Slo, TaskConfig, Tensor, VariantConfig, WarmupConfig,
};
use modelless_runtime::backend::fake::{BatchLog, FakeBackend, FakeConfig};

use crate::common::{models_dir, wait_for};

/// A task of fake variants (accuracies as given), all sharing `log`.
fn fake_task(accuracies: &[f64], fake: FakeConfig, log: &BatchLog) -> (TaskConfig, MakeBackend) {
    let mut task = TaskConfig::new("classify");
    for (i, &accuracy) in accuracies.iter().enumerate() {
        let batching = BatchingConfig::default().with_max_batch_size(1);
        // No warm-up: the log holds only the batches the tests send.
        let variant = VariantConfig::new(format!("v{i}"), "fake", accuracy)
            .with_batching(batching)
            .with_warmup(WarmupConfig::disabled());
        task = task.with_variant(variant);
    }
    let log = log.clone();
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), log.clone()));
    (task, make)
}

fn row(first: f32) -> Tensor {
    Tensor::new([1, 4], vec![first, 0.0, 0.0, 0.0]).unwrap()
}

#[test]
fn requests_needing_more_accuracy_go_to_the_cheapest_ready_variant_that_has_it() {
    let log = BatchLog::default();
    let (task, make) = fake_task(&[60.0, 70.0, 80.0], FakeConfig::default(), &log);
    let mut task = task;
    task.variants[1].preload = true;
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task, make).unwrap();
    let served = |slo: Slo| rt.infer_task_blocking("classify", row(1.0), slo).map(|o| o.model.to_string());
    assert_eq!(served(Slo::default()).unwrap(), "v0");
    assert_eq!(served(Slo::default().with_min_accuracy(65.0)).unwrap(), "v1");
    match served(Slo::default().with_min_accuracy(75.0)) {
        Err(Error::NoVariantMeetsSlo { available, .. }) => {
            assert_eq!(available, vec![("v0".to_string(), 60.0), ("v1".to_string(), 70.0)]);
        }
        other => panic!("expected NoVariantMeetsSlo, got {other:?}"),
    }
    rt.load_variant("classify", "v2").unwrap();
    assert_eq!(served(Slo::default().with_min_accuracy(75.0)).unwrap(), "v2");
    assert_eq!(served(Slo::default().with_min_accuracy(55.0)).unwrap(), "v0", "the active variant is enough");
}

#[test]
fn the_latency_target_is_the_deadline_unless_the_caller_says_otherwise() {
    let log = BatchLog::default();
    let slow = FakeConfig { per_batch: Duration::from_millis(150), ..FakeConfig::default() };
    let (task, make) = fake_task(&[60.0], slow, &log);
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task, make).unwrap();
    let busy = rt.submit_task("classify", row(0.0), Slo::default()).unwrap();
    wait_for(|| log.sizes().len() == 1);
    let target = Slo::default().with_latency(Duration::from_millis(10));
    let late = rt.submit_task("classify", row(1.0), target).unwrap();
    let patient = rt.submit_task("classify", row(2.0), target.without_deadline()).unwrap();
    assert!(matches!(late.wait(), Err(Error::DeadlineExceeded { .. })));
    assert!(busy.wait().is_ok());
    assert_eq!(patient.wait().unwrap().first(), Some(&row(2.0)));
    assert_eq!(log.leaders(), vec![0.0, 2.0], "the expired request never ran");
}

/// The value of `metric` labelled `labels` (in the order Prometheus writes them) in
/// `text`, 0 when absent.
fn metric_value(text: &str, metric: &str, labels: &str) -> f64 {
    let prefix = format!("{metric}{{{labels}}} ");
    text.lines().find_map(|l| l.strip_prefix(&prefix)).map_or(0.0, |v| v.parse().unwrap())
}

#[test]
fn failed_requests_show_in_the_metrics_under_their_own_reason() {
    let log = BatchLog::default();
    let slow = FakeConfig { per_batch: Duration::from_millis(150), ..FakeConfig::default() };
    let (mut task, make) = fake_task(&[60.0], slow, &log);
    // Metrics live as long as the process: a name of its own keeps other tests' out.
    task.name = "failure-reasons".into();
    task.variants[0].batching = task.variants[0].batching.clone().with_max_queue_size(1);
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task, make).unwrap();
    let busy = rt.submit_task("failure-reasons", row(0.0), Slo::default()).unwrap();
    wait_for(|| log.sizes().len() == 1);
    let late = rt.submit_task("failure-reasons", row(1.0), Slo::default().with_latency(Duration::from_millis(10)));
    let full = rt.submit_task("failure-reasons", row(2.0), Slo::default()).err();
    assert!(matches!(full, Some(Error::Overloaded { .. })), "{full:?}");
    assert!(matches!(late.unwrap().wait(), Err(Error::DeadlineExceeded { .. })));
    assert!(busy.wait().is_ok());
    let wrong_shape = Tensor::new([1, 3], vec![0.0; 3]).unwrap();
    let invalid = rt.submit_task("failure-reasons", wrong_shape, Slo::default()).err();
    assert!(matches!(invalid, Some(Error::InvalidInput { .. })), "{invalid:?}");
    let broken =
        rt.infer_task_blocking("failure-reasons", row(modelless_runtime::backend::fake::FAIL_ROW), Slo::default());
    assert!(matches!(broken, Err(Error::Backend { .. })), "{broken:?}");
    let unmet = rt.submit_task("failure-reasons", row(3.0), Slo::default().with_min_accuracy(99.0)).err();
    assert!(matches!(unmet, Some(Error::NoVariantMeetsSlo { .. })), "{unmet:?}");

    let text = rt.metrics_text();
    let failures = |variant: &str, reason: &str| {
        let labels = format!(r#"reason="{reason}",task="failure-reasons",variant="{variant}""#);
        metric_value(&text, "modelless_inference_request_failure", &labels)
    };
    for reason in ["queue_full", "expired", "invalid_input", "backend_failed"] {
        assert_eq!(failures("v0", reason), 1.0, "{reason} in\n{text}");
    }
    assert_eq!(failures("v0", "canceled"), 0.0, "bound in advance, at zero");
    assert_eq!(failures("v0", "would_miss_deadline"), 0.0, "without a profile, nothing is predicted");
    assert!(text.contains(r#"reason="canceled",task="failure-reasons",variant="v0""#), "{text}");
    assert_eq!(failures("", "no_variant_meets_slo"), 1.0, "the task's own refusal has no variant: {text}");
}

#[test]
fn high_priority_requests_are_batched_first() {
    let log = BatchLog::default();
    // Long enough for the three requests below to queue behind the first.
    let slow = FakeConfig { per_batch: Duration::from_millis(200), ..FakeConfig::default() };
    let (task, make) = fake_task(&[60.0], slow, &log);
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task, make).unwrap();
    let busy = rt.submit_task("classify", row(0.0), Slo::default()).unwrap();
    wait_for(|| log.sizes().len() == 1);
    let tickets: Vec<_> = [(1.0, Priority::Normal), (2.0, Priority::Normal), (3.0, Priority::High)]
        .into_iter()
        .map(|(v, p)| rt.submit_task("classify", row(v), Slo::default().with_priority(p)).unwrap())
        .collect();
    assert!(busy.wait().is_ok());
    tickets.into_iter().for_each(|t| assert!(t.wait().is_ok()));
    assert_eq!(log.leaders(), vec![0.0, 3.0, 1.0, 2.0]);
}

#[test]
fn switching_reports_states_and_unloads_beyond_the_keep_warm_memory() {
    let log = BatchLog::default();
    let (task, make) = fake_task(&[60.0, 70.0], FakeConfig::default(), &log);
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task.with_keep_warm_mib(0), make).unwrap();
    let status = rt.task_status("classify").unwrap();
    assert_eq!((status.active.as_str(), status.active_version), ("v0", 1));
    assert_eq!(status.variant("v1").unwrap().state(), VariantState::Unloaded);
    let report = rt.switch_variant("classify", "v1").unwrap();
    assert!(report.loaded);
    assert_eq!(rt.infer_task_blocking("classify", row(1.0), Slo::default()).unwrap().model.as_ref(), "v1");
    // Nothing may stay warm: v0's version drains, then unloads.
    wait_for(|| {
        let v0 = rt.task_status("classify").unwrap().variant("v0").unwrap().versions[0].state;
        v0 == VariantState::Unloaded
    });
    assert!(matches!(rt.switch_variant("classify", "nope"), Err(Error::UnknownVariant { .. })));
    let refused = rt.unload_variant("classify", "v1");
    assert!(matches!(&refused, Err(Error::Precondition(m)) if m.contains("is active")), "the active one stays");
    assert!(matches!(rt.task_status("other"), Err(Error::UnknownTask(_))));
}

/// A task of two MobileNetV2 variants on ONNX Runtime, warmed up at small batches.
fn mobilenet_task() -> TaskConfig {
    let variant = |name: &str, file: &str, accuracy| {
        VariantConfig::new(name, models_dir().join(file), accuracy)
            .with_batching(BatchingConfig::default().with_max_batch_size(4))
            .with_warmup(WarmupConfig::default().with_batch_sizes([1, 2, 4]))
    };
    TaskConfig::new("classify").with_variant(variant("small", "mobilenetv2_0.35.onnx", 60.3)).with_variant(variant(
        "large",
        "mobilenetv2_0.5.onnx",
        65.4,
    ))
}

/// Client threads sending requests to the task `classify` in a loop.
struct Clients {
    stop: Arc<AtomicBool>,
    threads: Vec<std::thread::JoinHandle<Collected>>,
}

/// What clients got: every answer's (variant, version), and every error.
#[derive(Default)]
struct Collected {
    served: Vec<(String, u64)>,
    errors: Vec<Error>,
}

impl Clients {
    fn start(rt: &Arc<Runtime>, clients: usize) -> Clients {
        let stop = Arc::new(AtomicBool::new(false));
        let threads = (0..clients)
            .map(|i| {
                let (rt, stop) = (rt.clone(), stop.clone());
                std::thread::spawn(move || {
                    let image = Tensor::full([1, 3, 224, 224], i as f32 / 10.0);
                    let mut got = Collected::default();
                    while !stop.load(Ordering::Relaxed) {
                        match rt.infer_task_blocking("classify", image.clone(), Slo::default()) {
                            Ok(out) => got.served.push((out.model.to_string(), out.version)),
                            Err(e) => got.errors.push(e),
                        }
                    }
                    got
                })
            })
            .collect();
        Clients { stop, threads }
    }

    fn stop(self) -> Collected {
        self.stop.store(true, Ordering::Relaxed);
        let mut all = Collected::default();
        for thread in self.threads {
            let got = thread.join().unwrap();
            all.served.extend(got.served);
            all.errors.extend(got.errors);
        }
        all
    }
}

fn copy_to(dir: &Path, file: &str, name: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::copy(models_dir().join(file), &path).unwrap();
    path
}

#[test]
fn switching_variants_and_loading_versions_under_load_fails_no_request() {
    let versions = tempfile::tempdir().unwrap();
    let rt = Arc::new(Runtime::builder().with_task(mobilenet_task()).build().unwrap());
    let clients = Clients::start(&rt, 8);
    let ready_versions = Mutex::new(vec![("small".to_string(), 1)]);
    for i in 0..50 {
        let variant = if i % 2 == 0 { "large" } else { "small" };
        rt.switch_variant("classify", variant).unwrap();
        let status = rt.task_status("classify").unwrap();
        assert_eq!(status.active, variant);
        assert_eq!(status.variant(variant).unwrap().state(), VariantState::Ready);
        ready_versions.lock().unwrap().push((variant.to_string(), status.active_version));
        if i == 15 || i == 35 {
            let path = copy_to(versions.path(), "mobilenetv2_0.35.onnx", &format!("small-{i}.onnx"));
            let version = rt.load_version("classify", "small", &path).unwrap();
            ready_versions.lock().unwrap().push(("small".to_string(), version));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
    let Collected { served, errors } = clients.stop();
    assert!(errors.is_empty(), "{} requests failed, first: {:?}", errors.len(), errors.first());
    let ready = ready_versions.into_inner().unwrap();
    assert!(served.iter().all(|s| ready.contains(s)), "an answer came from a version never ready");
    for expected in [("small", 3), ("large", 1)] {
        assert!(served.iter().any(|(v, n)| (v.as_str(), *n) == expected), "no answer from {expected:?}");
    }
    let status = rt.task_status("classify").unwrap();
    assert_eq!(status.variant("small").unwrap().current, Some(3));
    assert!(status.variant("small").unwrap().versions.iter().all(|v| v.warmup.is_some()));
}

#[test]
fn a_corrupt_version_loaded_under_load_leaves_the_old_one_serving() {
    let dir = tempfile::tempdir().unwrap();
    let rt = Arc::new(Runtime::builder().with_task(mobilenet_task()).build().unwrap());
    let clients = Clients::start(&rt, 8);
    let corrupt = dir.path().join("corrupt-version.onnx");
    std::fs::write(&corrupt, b"\x08\x07not a graph at all").unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let result = rt.load_version("classify", "small", &corrupt);
    std::thread::sleep(Duration::from_millis(100));
    let Collected { served, errors } = clients.stop();
    assert!(matches!(result, Err(Error::Load { .. })), "{result:?}");
    assert!(errors.is_empty(), "{} requests failed", errors.len());
    assert!(!served.is_empty() && served.iter().all(|s| *s == ("small".to_string(), 1)));
    let small = rt.task_status("classify").unwrap().variant("small").unwrap().clone();
    assert_eq!(small.current, Some(1));
    assert_eq!(small.versions[1].state, VariantState::Failed);
    assert!(small.versions[1].error.as_deref().unwrap_or_default().contains("corrupt-version"));
}

#[test]
fn the_config_file_describes_tasks_and_unknown_keys_are_named() {
    let text = r#"
        [[tasks]]
        name = "classify"
        active = "large"
        keep_warm_mib = 64

        [[tasks.variants]]
        name = "small"
        path = "mobilenetv2_0.35.onnx"
        accuracy = 60.3
        batching = { max_batch_size = 4 }

        [[tasks.variants]]
        name = "large"
        path = "mobilenetv2_0.5.onnx"
        accuracy = 65.4
        warmup = { batch_sizes = [1, 2] }
    "#;
    let base = models_dir();
    let config = RuntimeConfig::from_toml(text, &base).unwrap();
    let task = &config.tasks[0];
    assert_eq!(task.variants[0].path, base.join("mobilenetv2_0.35.onnx"));
    assert_eq!(task.variants[0].batching.max_batch_size, 4);
    let rt = Runtime::builder().with_config(config).build().unwrap();
    let output = rt.infer_task_blocking("classify", Tensor::full([1, 3, 224, 224], 0.1f32), Slo::default()).unwrap();
    assert_eq!((output.model.as_ref(), output.version, output.task.as_deref()), ("large", 1, Some("classify")));

    let typo = text.replace("keep_warm_mib", "keep_warm_mb");
    let err = RuntimeConfig::from_toml(&typo, Path::new(".")).unwrap_err().to_string();
    assert!(err.contains("keep_warm_mb"), "{err}");
    let nested = text.replace("max_batch_size = 4", "max_batch = 4");
    let err = RuntimeConfig::from_toml(&nested, Path::new(".")).unwrap_err().to_string();
    assert!(err.contains("max_batch"), "{err}");
}

/// A file of `mib` MiB in `dir`, so a variant's memory estimate (twice its file) is known.
fn sized_file(dir: &Path, name: &str, mib: usize) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, vec![0u8; mib << 20]).unwrap();
    path
}

#[test]
fn least_recently_active_variants_unload_first_beyond_the_keep_warm_memory() {
    let log = BatchLog::default();
    let (mut task, make) = fake_task(&[60.0, 70.0, 80.0], FakeConfig::default(), &log);
    let dir = tempfile::tempdir().unwrap();
    for (i, v) in task.variants.iter_mut().enumerate() {
        v.path = sized_file(dir.path(), &format!("lru-{i}"), 1); // 2 MiB each while loaded
    }
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task.with_keep_warm_mib(3), make).unwrap();
    let state = |v: &str| rt.task_status("classify").unwrap().variant(v).unwrap().state();
    rt.switch_variant("classify", "v1").unwrap();
    assert_eq!(state("v0"), VariantState::Ready, "one inactive variant fits in 3 MiB");
    rt.switch_variant("classify", "v2").unwrap();
    assert_eq!((state("v0"), state("v1")), (VariantState::Unloaded, VariantState::Ready));
    let back = rt.switch_variant("classify", "v0").unwrap();
    assert!(back.loaded);
    assert_eq!((state("v1"), state("v2")), (VariantState::Unloaded, VariantState::Ready));
}

#[test]
fn a_variant_unloaded_and_loaded_again_comes_back_at_its_newest_version() {
    let dir = tempfile::tempdir().unwrap();
    let log = BatchLog::default();
    let (task, make) = fake_task(&[60.0, 70.0], FakeConfig::default(), &log);
    let rt = Runtime::builder().build().unwrap();
    rt.add_task_with(task.with_keep_warm_mib(0), make).unwrap();
    let newer = sized_file(dir.path(), "newer", 0);
    assert_eq!(rt.load_version("classify", "v0", &newer).unwrap(), 2);
    rt.switch_variant("classify", "v1").unwrap();
    rt.switch_variant("classify", "v0").unwrap();
    let status = rt.task_status("classify").unwrap();
    assert_eq!(status.active_version, 2);
    assert_eq!(status.variant("v0").unwrap().versions.len(), 2, "no third version");
    assert_eq!(status.variant("v0").unwrap().versions[1].path, newer);
    assert_eq!(rt.infer_task_blocking("classify", row(1.0), Slo::default()).unwrap().version, 2);
}

#[test]
fn a_variant_without_a_stored_profile_is_profiled_at_load_when_asked_and_the_profile_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny.onnx");
    std::fs::copy(models_dir().join("tiny.onnx"), &path).unwrap();
    let task = |mode: ProfileMode| {
        let variant = VariantConfig::new("tiny", &path, 50.0)
            .with_batching(BatchingConfig::default().with_max_batch_size(4))
            .with_profile(mode);
        TaskConfig::new("classify").with_variant(variant)
    };
    let throughput = |rt: &Runtime| rt.task_status("classify").unwrap().variants[0].versions[0].max_throughput_per_s;

    let stored_only = Runtime::builder().with_task(task(ProfileMode::Stored)).build().unwrap();
    assert_eq!(throughput(&stored_only), None, "nothing stored yet");
    let measured = Runtime::builder().with_task(task(ProfileMode::Measure)).build().unwrap();
    let profile = measured.variant_profile("classify", "tiny").unwrap().unwrap(); // profiled at load
    assert!(throughput(&measured).is_some_and(|t| t > 0.0));
    assert_eq!(profile.points.iter().map(|p| p.batch_size).collect::<Vec<_>>(), vec![1, 2, 4]);
    let stored = dir.path().join("tiny.profile.json");
    let written = std::fs::metadata(&stored).unwrap().modified().unwrap();

    let reused = Runtime::builder().with_task(task(ProfileMode::Stored)).build().unwrap();
    assert_eq!(reused.variant_profile("classify", "tiny").unwrap().as_deref(), Some(profile.as_ref()));
    let off = Runtime::builder().with_task(task(ProfileMode::Off)).build().unwrap();
    assert_eq!(off.variant_profile("classify", "tiny").unwrap(), None);
    assert_eq!(std::fs::metadata(&stored).unwrap().modified().unwrap(), written, "not measured again");
}
