//! Deadline-aware admission through a model's real queue and instance threads, on a
//! fake backend whose batch cost is known exactly.

use std::time::{Duration, Instant};

use modelless_policy_abi::LatencyFit;

use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use crate::batching::BatchingConfig;
use crate::error::Error;
use crate::model::{Admission, Model, StartOptions, Ticket};
use crate::request::Priority;
use crate::request::{InferOptions, Inputs};
use crate::tensor::Tensor;

/// Every batch of the fake takes this long, whatever its rows.
const BATCH_MS: u64 = 40;

/// One instance, one request per batch, batches of [`BATCH_MS`]; profiled (the line
/// the fake follows) or not.
fn model(name: &str, profiled: bool) -> (Model, BatchLog) {
    let log = BatchLog::default();
    let fake = FakeConfig { per_batch: Duration::from_millis(BATCH_MS), ..FakeConfig::default() };
    let options = StartOptions {
        latency_fit: profiled.then_some(LatencyFit { a_ms: 0.0, c_ms: BATCH_MS as f64, r2: 1.0 }),
        ..StartOptions::default()
    };
    let batching = BatchingConfig::default().with_max_batch_size(1);
    let model = Model::start_with(name, FakeBackend::factory(fake, log.clone()), 1, batching, options).unwrap();
    (model, log)
}

fn request(id: f32) -> Inputs {
    Inputs::from(Tensor::new([1, 4], vec![id; 4]).unwrap())
}

fn due_in(ms: u64) -> InferOptions {
    InferOptions::default().with_timeout(Duration::from_millis(ms))
}

/// Starts one batch and queues three more behind it: a request queued now rides in
/// the fifth batch, answered [`BATCH_MS`] × 5 after the first started.
fn four_ahead(model: &Model, log: &BatchLog) -> Vec<Ticket> {
    let mut tickets = vec![model.submit(request(0.0), InferOptions::default()).unwrap()];
    let waiting = Instant::now();
    while log.sizes().is_empty() {
        assert!(waiting.elapsed() < Duration::from_secs(10), "the first batch never started");
        std::thread::sleep(Duration::from_micros(200));
    }
    tickets.extend((1..4).map(|i| model.submit(request(i as f32), InferOptions::default()).unwrap()));
    tickets
}

/// When admission predicts a request of one row and `priority` queued now would be
/// answered.
fn predicted_answer(model: &Model, priority: Priority) -> Instant {
    let far = Instant::now() + Duration::from_secs(60);
    match model.judge_prepared(1, priority, far, Duration::ZERO) {
        Ok(Some(prediction)) => prediction.answer,
        other => panic!("a profiled model predicts: {other:?}"),
    }
}

#[test]
fn a_request_that_can_make_its_deadline_is_admitted_and_one_that_cannot_is_refused_at_once() {
    let (model, log) = model("admission-boundary", true);
    assert!(matches!(model.admission(), Admission::Predictive { .. }));
    let ahead = four_ahead(&model, &log);
    // The answer predicted for the next request is anchored to when the running batch
    // started, not to the clock: deadlines just before and after it fall on either
    // side however long the test's own steps take.
    let answer = predicted_answer(&model, Priority::Normal);
    let just_before = InferOptions::default().with_deadline(answer - Duration::from_millis(10));
    let after = InferOptions::default().with_deadline(answer + Duration::from_millis(15));
    // Refused by `submit` itself, not answered later at its deadline.
    let refused = model.submit(request(10.0), just_before);
    let admitted = model.submit(request(11.0), after).unwrap();
    match refused {
        Err(Error::WouldMissDeadline { predicted, left, retry_after, .. }) => {
            assert!(predicted > left, "{predicted:?} against {left:?}");
            assert_eq!(retry_after, predicted - left);
        }
        other => panic!("expected WouldMissDeadline, got {:?}", other.map(|_| ())),
    }
    assert_eq!(admitted.wait().unwrap().first().map(|t| t.as_slice::<f32>().unwrap()[0]), Some(11.0));
    for ticket in ahead {
        ticket.wait().unwrap();
    }
    assert!(!log.leaders().contains(&10.0), "the refused request never ran: {:?}", log.leaders());
    assert_eq!(log.sizes().len(), 5);
    assert_eq!(model.counters().failed_of("would_miss_deadline"), 1);
}

#[test]
fn high_priority_requests_are_admitted_ahead_of_the_normal_queue() {
    let (model, log) = model("admission-priority", true);
    let ahead = four_ahead(&model, &log);
    // Behind three normal requests a normal one rides in the fifth batch; a high one,
    // in the second, three batches sooner. A deadline a batch and a half before the
    // normal one's answer admits only the high one.
    let normal_answer = predicted_answer(&model, Priority::Normal);
    let deadline = normal_answer - Duration::from_millis(3 * BATCH_MS / 2);
    let high = InferOptions { priority: Priority::High, ..InferOptions::default().with_deadline(deadline) };
    let normal = InferOptions::default().with_deadline(deadline);
    assert!(matches!(model.submit(request(20.0), normal), Err(Error::WouldMissDeadline { .. })));
    let high = model.submit(request(21.0), high).unwrap();
    assert!(high.wait().is_ok());
    ahead.into_iter().for_each(|t| drop(t.wait().unwrap()));
    assert_eq!(log.leaders()[1], 21.0, "the high-priority request ran next: {:?}", log.leaders());
}

#[test]
fn without_a_profile_a_request_is_queued_and_expires_at_its_deadline() {
    let (model, log) = model("admission-unprofiled", false);
    assert_eq!(model.admission(), Admission::QueueRoom);
    let ahead = four_ahead(&model, &log);
    // Admitted though it cannot be answered in time: with no cost to predict by, the
    // queue gives it up once its deadline passes.
    let late = model.submit(request(30.0), due_in(5 * BATCH_MS - 60)).unwrap();
    assert!(matches!(late.wait(), Err(Error::DeadlineExceeded { .. })));
    assert_eq!(model.counters().failed_of("would_miss_deadline"), 0);
    ahead.into_iter().for_each(|t| drop(t.wait().unwrap()));
    assert!(!log.leaders().contains(&30.0));
}

#[test]
fn measured_batches_correct_the_profile() {
    let (model, _) = model("admission-correction", true);
    // The profile says 40 ms; the fake sleeps 40 ms and wakes a little later: the
    // correction never falls below 1 by much (how far above it goes is the machine's).
    for i in 0..5 {
        model.submit(request(i as f32), InferOptions::default()).unwrap().wait().unwrap();
    }
    let Admission::Predictive { correction, .. } = model.admission() else { panic!("not predictive") };
    assert!(correction >= 0.95, "{correction}");
}

#[test]
fn rows_being_prepared_count_ahead_of_a_request_judged_before_its_own_are() {
    let (model, _) = model("admission-preparing", true);
    // Idle: one batch of 40 ms, due in 3 batches' time.
    let due = || Instant::now() + Duration::from_millis(3 * BATCH_MS);
    let judge = |model: &Model| model.judge_prepared(1, Priority::Normal, due(), Duration::ZERO);
    assert!(judge(&model).is_ok());
    // Three rows still decoding will be queued first: it would ride in the fourth batch.
    let on_their_way = model.preparing(3);
    match judge(&model) {
        Err(Error::WouldMissDeadline { predicted, .. }) => {
            assert!(predicted >= Duration::from_millis(4 * BATCH_MS), "{predicted:?}")
        }
        other => panic!("expected WouldMissDeadline, got {other:?}"),
    }
    drop(on_their_way);
    assert!(judge(&model).is_ok(), "queued or given up, they count no more");
}

#[test]
fn batches_late_against_their_predictions_widen_the_margin_for_the_next() {
    // The profile says 10 ms a batch; the fake takes 40.
    let fake = FakeConfig { per_batch: Duration::from_millis(BATCH_MS), ..FakeConfig::default() };
    let options =
        StartOptions { latency_fit: Some(LatencyFit { a_ms: 0.0, c_ms: 10.0, r2: 1.0 }), ..StartOptions::default() };
    let batching = BatchingConfig::default().with_max_batch_size(1);
    let factory = FakeBackend::factory(fake, BatchLog::default());
    let model = Model::start_with("admission-margin", factory, 1, batching, options).unwrap();
    let margin = |model: &Model| match model.admission() {
        Admission::Predictive { margin, .. } => margin,
        other => panic!("not predictive: {other:?}"),
    };
    assert_eq!(margin(&model), 1.0);
    // Predicted in 10 ms, due in 30: admitted, and answered late (the batch takes 40).
    // One such batch is a stall, which the margin lets pass; three of its last twenty
    // are an error that persists.
    for i in 0..3 {
        let late = model.submit(request(i as f32), due_in(30)).unwrap().wait();
        assert!(late.is_ok() || matches!(late, Err(Error::DeadlineExceeded { .. })), "{:?}", late.map(|_| ()));
    }
    // The worker answers before it takes its next batch, where it notes the overrun.
    let noted = Instant::now() + Duration::from_secs(5);
    while margin(&model) <= 2.0 && Instant::now() < noted {
        std::thread::sleep(Duration::from_millis(1));
    }
    // Each overran its prediction (10 ms, then 10 as corrected by the batches before)
    // by more than its own length.
    let stretch = margin(&model);
    assert!(stretch > 2.0, "three batches overran by more than their predictions: {stretch}");
    // The same request on the idle model waits for nothing: it is judged on its own
    // batch, as predicted, rather than refused for certain.
    let alone = model.submit(request(2.0), due_in(30));
    assert!(alone.is_ok(), "{:?}", alone.map(|_| ()));
    let _ = alone.unwrap().wait();
    // Behind two requests (one running, or both queued), predicted in two or three
    // batches of 10 ms as corrected of 90: admitted as predicted while the model
    // answers far under what its profile says it can (100 a second), refused as
    // stretched by the margin once it answers about all it can.
    let Admission::Predictive { correction, .. } = model.admission() else { unreachable!() };
    assert!(3.0 * 10.0 * correction + 5.0 < 90.0 && 2.0 * 10.0 * correction * stretch > 90.0, "{correction}");
    let behind_two = |model: &Model| {
        let ahead: Vec<Ticket> =
            (0..2).map(|i| model.submit(request(10.0 + i as f32), InferOptions::default()).unwrap()).collect();
        let judged = model.submit(request(3.0), due_in(90)).map(|ticket| {
            let _ = ticket.wait();
        });
        for ticket in ahead {
            ticket.wait().unwrap();
        }
        judged
    };
    assert!(behind_two(&model).is_ok(), "answering 4 of 100 a second: nothing queued for a stall to leave");
    // Its capacity is what it answers with photos, 20 a second: 20 answered back to
    // back make it busy.
    model.set_photo_capacity(Some(20.0));
    let busy: Vec<Ticket> =
        (0..20).map(|i| model.submit(request(i as f32), InferOptions::default()).unwrap()).collect();
    for ticket in busy {
        ticket.wait().unwrap();
    }
    let refused = behind_two(&model);
    assert!(matches!(refused, Err(Error::WouldMissDeadline { .. })), "{:?}", refused);
}

#[test]
fn a_request_moved_to_another_model_leaves_its_prediction_behind() {
    let stretch = |model: &Model| match model.admission() {
        Admission::Predictive { margin, .. } => margin,
        other => panic!("not predictive: {other:?}"),
    };
    // `from` runs one batch and admits a request behind it, predicted in about 80 ms
    // of the 95 it has; `to` is busier, with four batches ahead of anything it takes.
    let (from, from_log) = model("moved-from", true);
    let (to, to_log) = model("moved-to", true);
    let ahead = four_ahead(&to, &to_log);
    let first = from.submit(request(0.0), InferOptions::default()).unwrap();
    let waiting = Instant::now();
    while from_log.sizes().is_empty() {
        assert!(waiting.elapsed() < Duration::from_secs(10), "the first batch never started");
        std::thread::sleep(Duration::from_micros(200));
    }
    let moved = from.submit(request(1.0), due_in(95)).unwrap();
    assert_eq!(from.move_waiting_to(&to), 1);
    // Behind `to`'s batches it is answered late or given up: against a prediction
    // `to` never made, which must not stretch `to`'s margin.
    let answer = moved.wait();
    assert!(matches!(answer, Err(Error::DeadlineExceeded { .. })) || answer.is_ok(), "{:?}", answer.map(|_| ()));
    for ticket in ahead.into_iter().chain([first]) {
        ticket.wait().unwrap();
    }
    assert_eq!(stretch(&to), 1.0);
    assert_eq!(stretch(&from), 1.0);
}

#[test]
fn refusals_the_model_had_the_time_to_serve_are_counted_needless() {
    let (model, log) = model("needless-refusals", true);
    let needless = |model: &Model| model.counters().needless_refused();
    // Idle and its queue empty, a request due before one batch can run is refused:
    // needless, though it could not have been answered in time either.
    let refused = model.submit(request(0.0), due_in(BATCH_MS / 2));
    assert!(matches!(refused, Err(Error::WouldMissDeadline { .. })), "{:?}", refused.map(|_| ()));
    assert_eq!(needless(&model), 1);
    // With four ahead, a request due before they are done is refused with a queue:
    // not needless yet, for the second may still end busy.
    let ahead = four_ahead(&model, &log);
    let refused = model.submit(request(1.0), due_in(BATCH_MS * 2));
    assert!(matches!(refused, Err(Error::WouldMissDeadline { .. })), "{:?}", refused.map(|_| ()));
    assert_eq!(needless(&model), 1);
    for ticket in ahead {
        ticket.wait().unwrap();
    }
    // Five batches of 40 ms answered in that second, against the 25 a second its
    // profile says it can: the second ends idle and its refusal was needless. It is
    // judged at the first answer after the second.
    std::thread::sleep(Duration::from_millis(1_050));
    model.submit(request(2.0), InferOptions::default()).unwrap().wait().unwrap();
    assert_eq!(needless(&model), 2);
}
