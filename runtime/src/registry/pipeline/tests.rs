use std::sync::Barrier;

use super::*;
use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
use crate::batching::BatchingConfig;
use crate::registry::{MakeBackend, TaskConfig, VariantConfig};
use crate::warmup::WarmupConfig;

/// A task `name` on an echoing fake; batches of up to 8 that wait up to `delay_ms`
/// to fill.
fn stage(name: &str, delay_ms: u64, log: &BatchLog) -> Arc<Task> {
    let log = log.clone();
    let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(FakeConfig::default(), log.clone()));
    let batching =
        BatchingConfig { max_batch_size: 8, max_queue_delay_us: delay_ms * 1000, ..BatchingConfig::default() };
    let variant = VariantConfig::new("v", "fake", 50.0).with_batching(batching).with_warmup(WarmupConfig::disabled());
    Arc::new(Task::start(TaskConfig::new(name).with_variant(variant), make).unwrap())
}

fn row(value: f32) -> Inputs {
    Inputs::from(Tensor::new([1, 4], vec![value; 4]).unwrap())
}

/// `find` answers the first stage's item, whose value says how many items the
/// second stage gets (value i for the i-th); the answer is their sum.
struct FanOut;

impl PipelineGlue for FanOut {
    fn stages(&self) -> Vec<String> {
        vec!["find".into(), "look".into()]
    }

    fn signature(&self) -> PipelineSignature {
        let sum = TensorSpec::new("sum", crate::tensor::DType::F32, [Some(1)]);
        PipelineSignature { image_input: "image".into(), outputs: vec![PipelineOutput::Tensor(sum)] }
    }

    fn answer(&self, request: Inputs, stages: &mut Stages<'_>) -> Result<Vec<(String, PipelineValue)>, Error> {
        let found = stages.run("find", vec![request])?;
        let count = found[0].first().and_then(|t| t.as_slice::<f32>()).map_or(0.0, |v| v[0]) as usize;
        let looked = stages.run("look", (0..count).map(|i| row(i as f32)).collect())?;
        let sum: f32 = looked.iter().filter_map(|o| o.first()?.as_slice::<f32>().map(|v| v[0])).sum();
        Ok(vec![("sum".into(), PipelineValue::Tensor(Tensor::new([1], vec![sum]).unwrap()))])
    }
}

fn sum(answer: &PipelineAnswer) -> Vec<f32> {
    answer.get("sum").and_then(PipelineValue::tensor).and_then(|t| t.as_slice::<f32>()).unwrap().to_vec()
}

fn pipeline(find: Arc<Task>, look: Arc<Task>) -> Pipeline {
    let lookup: FindTask = Arc::new(move |name: &str| match name {
        "find" => Ok(find.clone()),
        "look" => Ok(look.clone()),
        other => Err(Error::UnknownTask(other.to_string())),
    });
    Pipeline::new("fan-out", Arc::new(FanOut), lookup)
}

#[test]
fn items_fan_out_to_the_next_stage_and_their_answers_are_joined() {
    let log = BatchLog::default();
    let pipeline = pipeline(stage("find", 0, &BatchLog::default()), stage("look", 0, &log));
    let answer = pipeline.answer(row(4.0), &Slo::default()).unwrap();
    assert_eq!(sum(&answer), [6.0], "0 + 1 + 2 + 3");
    let items: Vec<(&str, usize)> = answer.stages.iter().map(|s| (s.task.as_str(), s.items)).collect();
    assert_eq!(items, [("find", 1), ("look", 4)]);
    assert_eq!(answer.stages[1].variants, ["v"]);
    // Fan-out 0: the second stage runs nothing.
    let before = log.sizes().len();
    let answer = pipeline.answer(row(0.0), &Slo::default()).unwrap();
    assert_eq!(sum(&answer), [0.0]);
    assert_eq!((answer.stages[1].items, log.sizes().len()), (0, before));
}

#[test]
fn items_of_two_requests_share_a_batch() {
    let log = BatchLog::default();
    let pipeline = Arc::new(pipeline(stage("find", 0, &BatchLog::default()), stage("look", 200, &log)));
    let start = Arc::new(Barrier::new(2));
    let requests: Vec<_> = (0..2)
        .map(|_| {
            let (pipeline, start) = (pipeline.clone(), start.clone());
            std::thread::spawn(move || {
                start.wait();
                pipeline.answer(row(3.0), &Slo::default()).unwrap()
            })
        })
        .collect();
    for request in requests {
        assert_eq!(sum(&request.join().unwrap()), [3.0]);
    }
    // Each request's three items wait up to 200 ms for more: the other's join them.
    assert!(log.sizes().contains(&6), "batches of the second stage: {:?}", log.sizes());
}

#[test]
fn a_request_past_its_deadline_runs_no_further_stage() {
    let log = BatchLog::default();
    let slow = {
        let fake = FakeConfig { per_batch: Duration::from_millis(30), ..FakeConfig::default() };
        let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
        let variant = VariantConfig::new("v", "fake", 50.0).with_warmup(WarmupConfig::disabled());
        Arc::new(Task::start(TaskConfig::new("find").with_variant(variant), make).unwrap())
    };
    let pipeline = pipeline(slow, stage("look", 0, &log));
    let slo = Slo::default().with_latency(Duration::from_millis(10));
    let error = pipeline.answer(row(2.0), &slo).unwrap_err();
    assert!(matches!(error, Error::DeadlineExceeded { .. }), "{error}");
    assert!(log.sizes().is_empty(), "the second stage ran nothing");
}

#[test]
fn a_deadline_shorter_than_the_priced_work_is_refused_before_the_stage_runs() {
    let log = BatchLog::default();
    let slow = {
        let fake = FakeConfig { per_batch: Duration::from_millis(40), ..FakeConfig::default() };
        let log = log.clone();
        let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), log.clone()));
        let variant = VariantConfig::new("v", "fake", 50.0).with_warmup(WarmupConfig::disabled());
        Arc::new(Task::start(TaskConfig::new("find").with_variant(variant), make).unwrap())
    };
    let pipeline = pipeline(slow, stage("look", 0, &BatchLog::default()));
    // The first answer prices the stage: 40 ms for 4 elements.
    pipeline.answer(row(0.0), &Slo::default()).unwrap();
    let ran = log.sizes().len();
    let slo = Slo::default().with_latency(Duration::from_millis(20));
    let error = pipeline.answer(row(0.0), &slo).unwrap_err();
    match &error {
        Error::WouldMissDeadline { model, predicted, left, .. } => {
            assert_eq!(model, "fan-out/find");
            assert!(*predicted >= Duration::from_millis(30) && *left <= Duration::from_millis(20), "{error}");
        }
        other => panic!("refused as {other}"),
    }
    assert_eq!(log.sizes().len(), ran, "the refused request ran nothing");
    // One with time enough still runs.
    let slo = Slo::default().with_latency(Duration::from_secs(5));
    assert_eq!(sum(&pipeline.answer(row(2.0), &slo).unwrap()), [1.0]);
}
