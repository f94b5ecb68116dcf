//! Pipelines: one endpoint whose requests run through several tasks. Each model stage is
//! a task of its own (batching, variants, profiles, admission and policies work per
//! stage as for any task); between the stages stands glue, written in Rust, that turns
//! one stage's answers into zero or more items of the next (fan-out) and joins their
//! answers into the pipeline's.
//!
//! The glue sees a request's stages through [`Stages`]: `run(task, items)` submits every
//! item at once under what is left of the request's deadline and at its priority, so
//! that items of one request, and of all requests in flight, share the stage's batches,
//! and waits for their answers. The glue runs on the caller's thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Task;
use crate::error::Error;
use crate::request::{Inputs, Output, Slo};
use crate::tensor::Tensor;

/// Finds a stage's task by name.
pub type FindTask = Arc<dyn Fn(&str) -> Result<Arc<Task>, Error> + Send + Sync>;

/// What a pipeline does with one request, calling its stages through `stages`.
pub trait PipelineGlue: Send + Sync {
    /// The tasks it runs, in the order it runs them (for status and metrics).
    fn stages(&self) -> Vec<String>;

    /// The answer to `request`: named values, in the pipeline's output order.
    fn answer(&self, request: Inputs, stages: &mut Stages<'_>) -> Result<Vec<(String, PipelineValue)>, Error>;
}

/// One output of a pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum PipelineValue {
    /// Numbers.
    Tensor(Tensor),
    /// Strings, one per item (KServe's BYTES).
    Texts(Vec<String>),
}

impl PipelineValue {
    /// The tensor, if it is one.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            PipelineValue::Tensor(tensor) => Some(tensor),
            PipelineValue::Texts(_) => None,
        }
    }

    /// The strings, if it is some.
    pub fn texts(&self) -> Option<&[String]> {
        match self {
            PipelineValue::Texts(texts) => Some(texts),
            PipelineValue::Tensor(_) => None,
        }
    }
}

/// One stage's share of a request: how many items it ran and how long they took, from
/// the first submitted to the last answered.
#[derive(Clone, Debug, PartialEq)]
pub struct StageTime {
    /// The stage's task.
    pub task: String,
    /// Items run (the fan-out, past the first stage).
    pub items: usize,
    /// Wall time the stage took for this request.
    pub elapsed: Duration,
    /// The variants that served its items, each once, in order of first use.
    pub variants: Vec<String>,
}

/// A pipeline's answer.
#[derive(Clone, Debug)]
pub struct PipelineAnswer {
    /// The outputs, by name.
    pub outputs: Vec<(String, PipelineValue)>,
    /// Each stage's time, in the order the glue ran them (a stage run twice appears twice).
    pub stages: Vec<StageTime>,
    /// Time from the request's arrival to its answer.
    pub total: Duration,
}

impl PipelineAnswer {
    /// The output called `name`.
    pub fn get(&self, name: &str) -> Option<&PipelineValue> {
        self.outputs.iter().find(|(n, _)| n == name).map(|(_, v)| v)
    }
}

/// A request's way through the stages.
pub struct Stages<'a> {
    find: &'a FindTask,
    deadline: Option<Instant>,
    slo: Slo,
    pipeline: &'a str,
    times: Vec<StageTime>,
}

impl std::fmt::Debug for Stages<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stages").field("pipeline", &self.pipeline).field("deadline", &self.deadline).finish()
    }
}

impl Stages<'_> {
    /// The pipeline's name.
    pub fn pipeline(&self) -> &str {
        self.pipeline
    }

    /// What is left of the request's time, `None` without a deadline.
    pub fn time_left(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }

    /// Runs `items` through `task`, all submitted before any is waited for, and returns
    /// their answers in the items' order. Each item inherits the request's deadline
    /// (what is left of it) and priority. No items, no work: an empty answer.
    pub fn run(&mut self, task: &str, items: Vec<Inputs>) -> Result<Vec<Output>, Error> {
        let started = Instant::now();
        let count = items.len();
        let mut answers = Vec::with_capacity(count);
        if count > 0 {
            let stage = (self.find)(task)?;
            let slo = match self.time_left() {
                Some(left) if left.is_zero() => {
                    return Err(Error::DeadlineExceeded { model: self.pipeline.to_string() });
                }
                Some(left) => Slo { latency: Some(left), min_accuracy: None, ..self.slo },
                None => Slo { min_accuracy: None, ..self.slo },
            };
            let tickets = items.into_iter().map(|item| stage.submit(item, &slo)).collect::<Result<Vec<_>, _>>()?;
            for ticket in tickets {
                answers.push(ticket.wait()?);
            }
        }
        let mut variants: Vec<String> = Vec::new();
        for answer in &answers {
            if !variants.iter().any(|v| **v == *answer.model) {
                variants.push(answer.model.to_string());
            }
        }
        self.times.push(StageTime { task: task.to_string(), items: count, elapsed: started.elapsed(), variants });
        Ok(answers)
    }
}

/// A named pipeline: its glue and how to find its stages.
pub struct Pipeline {
    name: String,
    glue: Arc<dyn PipelineGlue>,
    find: FindTask,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").field("name", &self.name).field("stages", &self.glue.stages()).finish()
    }
}

impl Pipeline {
    /// The pipeline `name`, whose glue finds its stages with `find`.
    pub fn new(name: impl Into<String>, glue: Arc<dyn PipelineGlue>, find: FindTask) -> Self {
        Pipeline { name: name.into(), glue, find }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tasks it runs.
    pub fn stages(&self) -> Vec<String> {
        self.glue.stages()
    }

    /// Answers `request` under `slo` (its latency the whole pipeline's deadline), on
    /// this thread.
    pub fn answer(&self, request: Inputs, slo: &Slo) -> Result<PipelineAnswer, Error> {
        let arrived = Instant::now();
        let deadline = if slo.no_deadline { None } else { slo.latency.map(|l| arrived + l) };
        let mut stages = Stages { find: &self.find, deadline, slo: *slo, pipeline: &self.name, times: Vec::new() };
        let outputs = self.glue.answer(request, &mut stages)?;
        Ok(PipelineAnswer { outputs, stages: stages.times, total: arrived.elapsed() })
    }
}

#[cfg(test)]
mod tests {
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
        let variant =
            VariantConfig::new("v", "fake", 50.0).with_batching(batching).with_warmup(WarmupConfig::disabled());
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
}
