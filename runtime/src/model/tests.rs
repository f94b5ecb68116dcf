//! A model's instances changed while requests flow.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::*;
use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use crate::request::{InferOptions, Inputs};
use crate::tensor::Tensor;

/// A request whose row is all `value` (never 0, which warm-up batches are).
fn request(value: f32) -> Inputs {
    Inputs::from(Tensor::new([1, 4], vec![value; 4]).unwrap())
}

/// Sends requests from `senders` threads until `stop`, each waiting for its answer;
/// every answer is checked to be its own request's rows. Returns how many were sent.
fn load(model: &Arc<Model>, senders: usize, stop: &Arc<AtomicBool>) -> Vec<std::thread::JoinHandle<usize>> {
    (0..senders)
        .map(|s| {
            let (model, stop) = (model.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut sent = 0;
                while !stop.load(Ordering::Relaxed) {
                    let value = (s * 100_000 + sent + 1) as f32;
                    let answer = model.infer_blocking(request(value));
                    let answer = answer.unwrap_or_else(|e| panic!("request {value} failed: {e}"));
                    assert_eq!(answer.first().unwrap().as_slice::<f32>().unwrap(), &[value; 4]);
                    sent += 1;
                }
                sent
            })
        })
        .collect()
}

impl Model {
    fn infer_blocking(&self, inputs: Inputs) -> Result<Output, Error> {
        self.submit(inputs, InferOptions::default().with_timeout(Duration::from_secs(60)))?.wait()
    }
}

/// Waits (a bounded number of rounds, not a time) for `done`.
fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..10_000 {
        if done() {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    panic!("never: {what}");
}

#[test]
fn instances_go_from_one_to_three_and_back_under_load_and_no_request_fails_or_meets_a_cold_one() {
    let log = BatchLog::default();
    let fake = FakeConfig { per_batch: Duration::from_micros(500), ..FakeConfig::default() };
    let warmup = WarmupConfig::default().with_batch_sizes([2, 1]);
    let options = StartOptions { warmup, ..StartOptions::default() };
    let batching = BatchingConfig::default().with_max_batch_size(2);
    let model =
        Arc::new(Model::start_with("scaled", FakeBackend::factory(fake, log.clone()), 1, batching, options).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let senders = load(&model, 6, &stop);
    eventually("the one instance serves", || log.leaders().iter().any(|&l| l != 0.0));

    model.set_instances(3).unwrap();
    assert_eq!((model.instances(), model.instances_starting()), (3, 0));
    let distinct = || {
        log.instances()
            .into_iter()
            .zip(log.leaders())
            .filter(|&(_, l)| l != 0.0)
            .map(|(i, _)| i)
            .collect::<BTreeSet<_>>()
    };
    eventually("the added instances take batches", || distinct().len() == 3);
    // Each added instance ran its warm-up (rows of zeros) before any request.
    for added in [1, 2] {
        let first = log.instances().iter().position(|&i| i == added).unwrap();
        assert_eq!(log.leaders()[first], 0.0, "instance {added} served before it was warm");
    }

    model.set_instances(1).unwrap();
    assert_eq!(model.instances(), 1);
    // The retiring ones finish the batch they ran; from then on one instance serves.
    let before = log.instances().len();
    eventually("requests keep being answered", || log.instances().len() > before + 40);
    let last: BTreeSet<usize> = log.instances()[log.instances().len() - 20..].iter().copied().collect();
    assert_eq!(last.len(), 1, "one instance serves after the others retired: {last:?}");

    stop.store(true, Ordering::Relaxed);
    let sent: usize = senders.into_iter().map(|s| s.join().unwrap()).sum();
    assert!(sent > 40, "{sent} requests");
    assert!(model.set_instances(0).is_err(), "a model keeps one instance at least");
}

#[test]
fn an_instance_that_fails_to_load_adds_none_and_the_others_keep_serving() {
    let log = BatchLog::default();
    let loads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let factory: BackendFactory = {
        let (inner, loads) = (FakeBackend::factory(FakeConfig::default(), log.clone()), loads.clone());
        Arc::new(move || {
            // The first loads; the third fails.
            if loads.fetch_add(1, Ordering::Relaxed) == 2 {
                return Err(BackendError::Injected("no room for a third".into()));
            }
            inner()
        })
    };
    let model = Model::start("failing", factory, 1, BatchingConfig::default()).unwrap();
    let error = model.set_instances(3).unwrap_err();
    assert!(error.to_string().contains("no room for a third"), "{error}");
    assert_eq!(model.instances(), 1);
    assert!(model.infer_blocking(request(7.0)).is_ok());
}
