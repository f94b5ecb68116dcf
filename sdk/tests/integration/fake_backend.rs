//! Batching, concurrency and failure handling, isolated with fake backends.

use std::sync::Arc;
use std::time::Duration;

use modelless::backend::BackendError;
use modelless::{BatchingConfig, Error, InferOptions, Runtime, Tensor, Ticket};
use modelless_runtime::backend::fake::{BatchLog, FAIL_ROW, FakeBackend, FakeConfig, PANIC_ROW};

use crate::common::wait_for;

fn runtime(config: FakeConfig, batching: BatchingConfig, instances: usize) -> (Arc<Runtime>, BatchLog) {
    let log = BatchLog::default();
    let runtime = Runtime::builder()
        .with_backend("fake", FakeBackend::factory(config, log.clone()), instances, batching)
        .build()
        .unwrap();
    (Arc::new(runtime), log)
}

fn slow(ms: u64) -> FakeConfig {
    FakeConfig { per_batch: Duration::from_millis(ms), ..FakeConfig::default() }
}

fn row(first: f32, rows: usize) -> Tensor {
    let values: Vec<f32> = (0..rows * 4).map(|i| first + i as f32).collect();
    Tensor::new([rows, 4], values).unwrap()
}

/// Queues a request without waiting for it.
fn submit(rt: &Runtime, input: Tensor, options: InferOptions) -> Result<Ticket, Error> {
    rt.submit("fake", input, options)
}

/// A runtime whose single instance (one request per batch, `ms` per batch) is busy
/// with a first request, so the next ones queue; returns that request's ticket too.
fn busy(ms: u64) -> (Arc<Runtime>, BatchLog, Ticket) {
    let (rt, log) = runtime(slow(ms), BatchingConfig::default().with_max_batch_size(1), 1);
    let running = submit(&rt, row(0.0, 1), InferOptions::default()).unwrap();
    wait_for(|| log.sizes().len() == 1);
    (rt, log, running)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_are_batched_and_each_gets_its_own_rows() {
    let (rt, log) = runtime(slow(5), BatchingConfig::default().with_max_batch_size(8), 1);
    let mut tasks = Vec::new();
    for client in 0..16 {
        let rt = rt.clone();
        tasks.push(tokio::spawn(async move {
            let mut rows_sent = 0;
            for i in 0..8 {
                let rows = 1 + (client + i) % 2;
                let input = row((client * 1000 + i * 10) as f32, rows);
                let output = rt.infer("fake", input.clone()).await.unwrap();
                assert_eq!(output.first(), Some(&input), "each caller gets back its own rows");
                assert!(output.batch_size >= rows && output.batch_size <= 8);
                rows_sent += rows;
            }
            rows_sent
        }));
    }
    let mut rows_sent = 0;
    for task in tasks {
        rows_sent += task.await.unwrap();
    }
    let sizes = log.sizes();
    assert_eq!(sizes.iter().sum::<usize>(), rows_sent, "every row ran exactly once");
    assert!(sizes.iter().all(|&s| s <= 8), "no batch above max_batch_size: {sizes:?}");
    assert!(sizes.iter().any(|&s| s > 2), "concurrent requests were batched: {sizes:?}");
}

#[test]
fn a_full_queue_refuses_with_overloaded_and_keeps_what_it_accepted() {
    let (rt, log, running) = busy(200);
    rt.configure_batching("fake", BatchingConfig::default().with_max_batch_size(1).with_max_queue_size(2)).unwrap();
    let tickets: Vec<_> = (1..6).map(|i| submit(&rt, row(i as f32, 1), InferOptions::default())).collect();
    let results: Vec<_> = tickets.into_iter().map(|t| t.and_then(|t| t.wait())).collect();
    let overloaded = results.iter().filter(|r| matches!(r, Err(Error::Overloaded { max_queue_size: 2, .. }))).count();
    let served = results.iter().filter(|r| r.is_ok()).count();
    assert_eq!((served, overloaded), (2, 3), "{results:?}");
    assert!(running.wait().is_ok());
    assert_eq!(log.sizes().len(), 3, "refused requests never ran");
}

#[test]
fn an_expired_request_is_answered_deadline_exceeded_without_running() {
    let (rt, log, running) = busy(150);
    let late = submit(&rt, row(1.0, 1), InferOptions::default().with_timeout(Duration::from_millis(10))).unwrap();
    let after = submit(&rt, row(2.0, 1), InferOptions::default()).unwrap();
    assert!(matches!(late.wait(), Err(Error::DeadlineExceeded { .. })));
    assert!(running.wait().is_ok());
    assert_eq!(after.wait().unwrap().first(), Some(&row(2.0, 1)));
    assert_eq!(log.sizes().len(), 2, "the expired request never ran");
}

#[test]
fn requests_of_callers_that_went_away_never_run() {
    let (rt, log, running) = busy(150);
    for i in 1..4 {
        drop(submit(&rt, row(i as f32, 1), InferOptions::default()).unwrap());
    }
    let kept = submit(&rt, row(9.0, 1), InferOptions::default()).unwrap();
    assert!(running.wait().is_ok());
    assert_eq!(kept.wait().unwrap().first(), Some(&row(9.0, 1)));
    assert_eq!(log.sizes().len(), 2, "abandoned requests were dropped: {:?}", log.sizes());
}

#[test]
fn a_failing_or_panicking_batch_fails_its_requests_and_the_backend_keeps_serving() {
    let (rt, _log) = runtime(FakeConfig::default(), BatchingConfig::default().with_max_batch_size(1), 1);
    let failed = rt.infer_blocking("fake", row(FAIL_ROW, 1));
    assert!(matches!(&failed, Err(Error::Backend { source, .. }) if matches!(**source, BackendError::Injected(_))));
    let panicked = rt.infer_blocking("fake", row(PANIC_ROW, 1));
    assert!(matches!(&panicked, Err(Error::Backend { source, .. }) if matches!(**source, BackendError::Panicked(_))));
    for i in 0..3 {
        assert_eq!(rt.infer_blocking("fake", row(i as f32, 1)).unwrap().first(), Some(&row(i as f32, 1)));
    }
}

#[test]
fn a_model_with_a_fixed_batch_dimension_runs_one_request_at_a_time() {
    let fixed = FakeConfig { dynamic_batch: false, per_batch: Duration::from_millis(2), ..FakeConfig::default() };
    let (rt, log) = runtime(fixed, BatchingConfig::default().with_max_batch_size(8), 1);
    assert_eq!(rt.model_info("fake").unwrap().batching.max_batch_size, 1);
    let tickets: Vec<_> =
        (0..10).map(|i| rt.submit("fake", row(i as f32, 1), InferOptions::default()).unwrap()).collect();
    for (i, t) in tickets.into_iter().enumerate() {
        let output = t.wait().unwrap();
        assert_eq!((output.batch_size, output.first()), (1, Some(&row(i as f32, 1))));
    }
    assert_eq!(log.sizes(), vec![1; 10]);
}

#[test]
fn batches_are_spread_across_instances() {
    let (rt, log) = runtime(slow(100), BatchingConfig::default().with_max_batch_size(1), 2);
    let tickets: Vec<_> =
        (0..2).map(|i| rt.submit("fake", row(i as f32, 1), InferOptions::default()).unwrap()).collect();
    tickets.into_iter().for_each(|t| assert!(t.wait().is_ok()));
    let mut instances = log.instances();
    instances.sort();
    assert_eq!(instances, vec![0, 1], "the second request ran on the idle instance");
}

#[test]
fn oversized_requests_and_unknown_models_are_refused_with_typed_errors() {
    let (rt, log) = runtime(FakeConfig::default(), BatchingConfig::default().with_max_batch_size(4), 1);
    assert!(matches!(
        rt.infer_blocking("fake", row(0.0, 5)),
        Err(Error::RequestTooLarge { rows: 5, max_batch_size: 4, .. })
    ));
    assert!(matches!(rt.infer_blocking("nope", row(0.0, 1)), Err(Error::UnknownModel(name)) if name == "nope"));
    assert!(log.sizes().is_empty());
}

#[test]
fn a_model_that_fails_to_load_leaves_the_others_serving() {
    let (rt, _log) = runtime(FakeConfig::default(), BatchingConfig::default(), 1);
    let broken = FakeConfig { fail_load: true, ..FakeConfig::default() };
    let err =
        rt.load_backend("broken", FakeBackend::factory(broken, BatchLog::default()), 2, BatchingConfig::default());
    assert!(matches!(err, Err(Error::Load { ref model, .. }) if model == "broken"), "{:?}", err.err());
    assert_eq!(rt.models(), vec!["fake".to_string()]);
    assert!(rt.infer_blocking("fake", row(0.0, 1)).is_ok());
}

#[test]
fn unloading_drains_what_was_queued() {
    let (rt, log) = runtime(slow(30), BatchingConfig::default().with_max_batch_size(1), 1);
    let tickets: Vec<_> =
        (0..4).map(|i| rt.submit("fake", row(i as f32, 1), InferOptions::default()).unwrap()).collect();
    rt.unload_model("fake").unwrap();
    for (i, t) in tickets.into_iter().enumerate() {
        assert_eq!(t.wait().unwrap().first(), Some(&row(i as f32, 1)));
    }
    assert_eq!(log.sizes().len(), 4);
    assert!(matches!(rt.infer_blocking("fake", row(0.0, 1)), Err(Error::UnknownModel(_))));
}

#[test]
fn new_batching_knobs_apply_while_serving() {
    let (rt, log) = runtime(slow(20), BatchingConfig::default().with_max_batch_size(8), 1);
    rt.configure_batching("fake", BatchingConfig::default().with_max_batch_size(2)).unwrap();
    let tickets: Vec<_> =
        (0..9).map(|i| rt.submit("fake", row(i as f32, 1), InferOptions::default()).unwrap()).collect();
    tickets.into_iter().for_each(|t| assert!(t.wait().is_ok()));
    assert!(log.sizes().iter().all(|&s| s <= 2), "{:?}", log.sizes());
    assert!(matches!(
        rt.configure_batching("fake", BatchingConfig::default().with_max_batch_size(0)),
        Err(Error::Config(_))
    ));
}
