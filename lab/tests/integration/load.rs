//! Load generation against a runtime in this process: every scheduled request is
//! sent and recorded with how it ended, and refusals are told apart from answers.

use std::sync::Arc;
use std::time::Duration;

use modelless::backend::MakeBackend;
use modelless::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use modelless::{BatchingConfig, Runtime, TaskConfig, Tensor, VariantConfig, WarmupConfig};
use modelless_lab::load::{InProcess, LoadSpec, Outcome, Pattern, RequestMaker, TaskLoad, run};

/// A task of one fake variant that takes `per_batch` per batch of up to `max_batch`.
fn fake_task(name: &str, per_batch: Duration, batching: BatchingConfig) -> (TaskConfig, MakeBackend) {
    let variant = VariantConfig::new("v0", "fake", 60.0).with_batching(batching).with_warmup(WarmupConfig::disabled());
    let task = TaskConfig::new(name).with_variant(variant).with_latency_slo_ms(150.0);
    let fake = FakeConfig { per_batch, ..FakeConfig::default() };
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
    (task, make)
}

fn constant(task: &str, rate: f64, duration_s: u32) -> TaskLoad {
    TaskLoad {
        task: task.into(),
        pattern: Pattern::Constant { rate, duration_s },
        slo_ms: None,
        min_accuracy: None,
        start_s: 0,
    }
}

#[test]
fn every_scheduled_request_is_sent_and_recorded_with_how_it_ended() {
    let rt = Arc::new(Runtime::builder().build().unwrap());
    let roomy = BatchingConfig::default().with_max_batch_size(4);
    let (fast, make) = fake_task("fast", Duration::from_millis(20), roomy);
    rt.add_task_with(fast, make).unwrap();
    // One request at a time, 200 ms each, two may wait: most of 30/s are refused.
    let tight = BatchingConfig::default().with_max_batch_size(1).with_max_queue_size(2);
    let (slow, make) = fake_task("slow", Duration::from_millis(200), tight);
    rt.add_task_with(slow, make).unwrap();

    let spec = LoadSpec { seed: 9, tasks: vec![constant("fast", 40.0, 3), constant("slow", 30.0, 3)], rate_scale: 1.0 };
    let schedule = spec.schedule().unwrap().arrivals;
    let target = Arc::new(InProcess::new(rt.clone(), &spec).unwrap());
    let mut seconds = Vec::new();
    let tokio = tokio::runtime::Runtime::new().unwrap();
    let result = tokio.block_on(run(target, &spec, &mut |p| seconds.push(p.second))).unwrap();

    assert_eq!(seconds, vec![1, 2, 3], "progress once a second");
    assert_eq!(result.records.len(), schedule.len());
    for (record, arrival) in result.records.iter().zip(&schedule) {
        assert_eq!(record.sent_s, arrival.at_s);
        assert_eq!(record.task, spec.tasks[arrival.task].task);
    }
    let fast: Vec<_> = result.records.iter().filter(|r| r.task == "fast").collect();
    assert!(fast.iter().all(|r| r.status == Outcome::Served && r.variant.as_deref() == Some("v0")));
    // A lower bound that the fake's sleep sets, whatever the machine's speed.
    assert!(fast.iter().all(|r| r.latency_ms >= 20.0), "latency counts from sending, and a batch takes 20 ms");
    let slow: Vec<_> = result.records.iter().filter(|r| r.task == "slow").collect();
    let count = |status| slow.iter().filter(|r| r.status == status).count();
    // At most 5 a second are served and 2 wait; 30 a second arrive: some are refused
    // on any machine. Each is answered, refused, or expires waiting (its deadline is
    // the task's 150 ms); none fails.
    assert!(count(Outcome::Rejected) > 0 && count(Outcome::Served) > 0, "{} refused", count(Outcome::Rejected));
    let ended = count(Outcome::Served) + count(Outcome::Rejected) + count(Outcome::Expired);
    assert_eq!(ended, slow.len(), "nothing else happens to them");

    let summaries = result.summaries();
    assert_eq!(summaries.len(), 3, "each task and all");
    let late = fast.iter().filter(|r| r.latency_ms > 150.0).count();
    assert_eq!(summaries[0].slo_violations as usize, late, "the fast task's violations are its answers over 150 ms");
    assert_eq!(summaries[1].rejected as usize, count(Outcome::Rejected));
    assert_eq!(result.samples.iter().filter(|s| s.task == "fast" && s.active.as_deref() == Some("v0")).count(), 3);
    assert_eq!(result.timeline().len(), 6, "3 seconds of 2 tasks");
    assert!(result.samples.iter().all(|s| s.page_faults.is_some()), "the machine's page faults, each second");

    // What the sessions ran, second by second: the fast task's batches of 20 ms.
    let ran: Vec<_> = result.runs.iter().filter(|r| r.task == "fast").collect();
    assert!(ran.iter().all(|r| r.variant == "v0" && r.second < 3 && r.batches > 0), "{ran:?}");
    assert!(ran.iter().all(|r| r.run_ms >= 20.0 * r.batches as f64 * 0.99), "{ran:?}");
    let rows: u64 = ran.iter().map(|r| r.rows).sum();
    // Batches still running when the last second was sampled are not counted.
    assert!(rows as usize <= fast.len() && rows as usize + 8 >= fast.len(), "{rows} rows, {} answers", fast.len());

    // A second run on the same runtime counts only its own batches.
    let spec = LoadSpec { seed: 10, tasks: vec![constant("fast", 20.0, 1)], rate_scale: 1.0 };
    let again = tokio.block_on(run(Arc::new(InProcess::new(rt, &spec).unwrap()), &spec, &mut |_| {})).unwrap();
    let rows: u64 = again.runs.iter().map(|r| r.rows).sum();
    assert!(rows as usize <= again.records.len(), "{rows} rows for {} requests", again.records.len());
}

#[test]
fn an_unknown_task_or_a_task_without_an_slo_is_refused_before_anything_is_sent() {
    let rt = Arc::new(Runtime::builder().build().unwrap());
    let spec = LoadSpec { seed: 1, tasks: vec![constant("nowhere", 1.0, 1)], rate_scale: 1.0 };
    assert!(matches!(InProcess::new(rt.clone(), &spec), Err(modelless_lab::load::LoadError::Target(_))));
    let (task, make) = fake_task("quiet", Duration::from_millis(1), BatchingConfig::default());
    let task = TaskConfig { latency_slo_ms: None, ..task };
    rt.add_task_with(task, make).unwrap();
    let spec = LoadSpec { seed: 1, tasks: vec![constant("quiet", 1.0, 1)], rate_scale: 1.0 };
    assert!(
        matches!(InProcess::new(rt, &spec), Err(modelless_lab::load::LoadError::Invalid(m)) if m.contains("slo_ms"))
    );
}

#[test]
fn a_request_maker_sends_its_own_inputs_to_the_variant_it_names() {
    let rt = Arc::new(Runtime::builder().build().unwrap());
    let log = BatchLog::default();
    let mut task = TaskConfig::new("made").with_latency_slo_ms(1000.0);
    for name in ["v0", "v1"] {
        let variant = VariantConfig::new(name, "fake", 60.0).with_warmup(WarmupConfig::disabled()).with_preload(true);
        task = task.with_variant(variant);
    }
    let fake = FakeConfig::default();
    let batches = log.clone();
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), batches.clone()));
    rt.add_task_with(task, make).unwrap();
    let spec = LoadSpec { seed: 3, tasks: vec![constant("made", 20.0, 1)], rate_scale: 1.0 };
    let maker: RequestMaker = Arc::new(|_: &Runtime| {
        let row = Tensor::new([1, 4], vec![7.0f32, 0.0, 0.0, 0.0]).unwrap();
        (Some("v1".to_string()), row.into())
    });
    let target = InProcess::new(rt.clone(), &spec).unwrap().with_requests("made", maker.clone()).unwrap();
    let result = tokio::runtime::Runtime::new().unwrap().block_on(run(Arc::new(target), &spec, &mut |_| {})).unwrap();
    assert!(!result.records.is_empty());
    assert!(result.records.iter().all(|r| r.status == Outcome::Served && r.variant.as_deref() == Some("v1")));
    assert!(log.leaders().iter().all(|&first| first == 7.0), "the maker's rows ran: {:?}", log.leaders());
    let unknown = InProcess::new(rt, &spec).unwrap().with_requests("other", maker);
    assert!(matches!(unknown, Err(modelless_lab::load::LoadError::Target(_))));
}
