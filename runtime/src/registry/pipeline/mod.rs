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

mod price;
mod stages;

use std::sync::Arc;
use std::time::{Duration, Instant};

use self::price::StagePrices;
pub use self::stages::Stages;
use super::Task;
use crate::backend::TensorSpec;
use crate::error::Error;
use crate::metrics::serving_metrics;
use crate::request::{Inputs, Slo};
use crate::tensor::Tensor;

/// Finds a stage's task by name.
pub type FindTask = Arc<dyn Fn(&str) -> Result<Arc<Task>, Error> + Send + Sync>;

/// What a pipeline does with one request, calling its stages through `stages`.
pub trait PipelineGlue: Send + Sync {
    /// The tasks it runs, in the order it runs them (for status and metrics).
    fn stages(&self) -> Vec<String>;

    /// What it takes and gives, for the protocols' metadata and checks.
    fn signature(&self) -> PipelineSignature;

    /// The answer to `request`: named values, in the pipeline's output order.
    fn answer(&self, request: Inputs, stages: &mut Stages<'_>) -> Result<Vec<(String, PipelineValue)>, Error>;
}

/// What a pipeline takes and gives.
#[derive(Clone, Debug, PartialEq)]
pub struct PipelineSignature {
    /// The input that takes the request's one image (encoded, or pixels).
    pub image_input: String,
    /// Its outputs, in order.
    pub outputs: Vec<PipelineOutput>,
}

/// One output a pipeline gives.
#[derive(Clone, Debug, PartialEq)]
pub enum PipelineOutput {
    /// Numbers of this type and shape.
    Tensor(TensorSpec),
    /// Strings or bytes, one per item (KServe's BYTES), by this name.
    Texts(String),
}

impl PipelineOutput {
    /// Its name.
    pub fn name(&self) -> &str {
        match self {
            PipelineOutput::Tensor(spec) => &spec.name,
            PipelineOutput::Texts(name) => name,
        }
    }
}

/// One output of a pipeline.
#[derive(Clone, Debug, PartialEq)]
pub enum PipelineValue {
    /// Numbers.
    Tensor(Tensor),
    /// Strings, one per item (KServe's BYTES).
    Texts(Vec<String>),
    /// Bytes, one run per item (KServe's BYTES): encoded images, say.
    Bytes(Vec<Vec<u8>>),
}

impl PipelineValue {
    /// The tensor, if it is one.
    pub fn tensor(&self) -> Option<&Tensor> {
        match self {
            PipelineValue::Tensor(tensor) => Some(tensor),
            PipelineValue::Texts(_) | PipelineValue::Bytes(_) => None,
        }
    }

    /// The strings, if it is some.
    pub fn texts(&self) -> Option<&[String]> {
        match self {
            PipelineValue::Texts(texts) => Some(texts),
            PipelineValue::Tensor(_) | PipelineValue::Bytes(_) => None,
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

/// A named pipeline: its glue and how to find its stages.
pub struct Pipeline {
    name: String,
    glue: Arc<dyn PipelineGlue>,
    find: FindTask,
    prices: StagePrices,
}

impl std::fmt::Debug for Pipeline {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pipeline").field("name", &self.name).field("stages", &self.glue.stages()).finish()
    }
}

impl Pipeline {
    /// The pipeline `name`, whose glue finds its stages with `find`.
    pub fn new(name: impl Into<String>, glue: Arc<dyn PipelineGlue>, find: FindTask) -> Self {
        Pipeline { name: name.into(), glue, find, prices: StagePrices::default() }
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The tasks it runs.
    pub fn stages(&self) -> Vec<String> {
        self.glue.stages()
    }

    /// What it takes and gives.
    pub fn signature(&self) -> PipelineSignature {
        self.glue.signature()
    }

    /// Answers `request` under `slo` (its latency the whole pipeline's deadline), on
    /// this thread, and counts the answer, its stages' times and fan-out in the
    /// metrics.
    pub fn answer(&self, request: Inputs, slo: &Slo) -> Result<PipelineAnswer, Error> {
        let arrived = Instant::now();
        let deadline = if slo.no_deadline { None } else { slo.latency.map(|l| arrived + l) };
        let mut stages = Stages {
            find: &self.find,
            prices: &self.prices,
            deadline,
            slo: *slo,
            pipeline: &self.name,
            times: Vec::new(),
        };
        let outputs = self.glue.answer(request, &mut stages);
        let (total, metrics) = (arrived.elapsed(), serving_metrics());
        for stage in &stages.times {
            metrics.pipeline_stage_ran(&self.name, &stage.task, stage.items, stage.elapsed);
        }
        metrics.pipeline_answered(&self.name, total, outputs.as_ref().err().map(|e| e.kind().as_str()));
        Ok(PipelineAnswer { outputs: outputs?, stages: stages.times, total })
    }
}

#[cfg(test)]
mod tests;
