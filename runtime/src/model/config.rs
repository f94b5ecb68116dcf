//! How to load and serve one model on its own (not as a task's variant).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::backend::onnx::OrtSessionConfig;
use crate::batching::BatchingConfig;
use crate::error::Error;
use crate::warmup::WarmupConfig;

/// How to load and serve one ONNX model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Name requests use.
    pub name: String,
    /// The `.onnx` file.
    pub path: PathBuf,
    /// Sessions serving it, each on its own thread; batches are spread across them.
    #[serde(default = "one")]
    pub instances: usize,
    /// Dynamic batching knobs.
    #[serde(default)]
    pub batching: BatchingConfig,
    /// ONNX Runtime session settings.
    #[serde(default)]
    pub onnx: OrtSessionConfig,
    /// Warm-up before the model takes requests.
    #[serde(default)]
    pub warmup: WarmupConfig,
}

fn one() -> usize {
    1
}

impl ModelConfig {
    /// A model called `name` loaded from `path`, with default settings.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        ModelConfig {
            name: name.into(),
            path: path.into(),
            instances: 1,
            batching: BatchingConfig::default(),
            onnx: OrtSessionConfig::default(),
            warmup: WarmupConfig::default(),
        }
    }

    /// Sets the warm-up.
    pub fn with_warmup(mut self, warmup: WarmupConfig) -> Self {
        self.warmup = warmup;
        self
    }

    /// Sets the number of instances.
    pub fn with_instances(mut self, instances: usize) -> Self {
        self.instances = instances;
        self
    }

    /// Checks the instances and the batching knobs.
    pub fn validate(&self) -> Result<(), Error> {
        check_instances(&self.name, self.instances)?;
        self.batching.validate()
    }

    /// Sets the batching knobs.
    pub fn with_batching(mut self, batching: BatchingConfig) -> Self {
        self.batching = batching;
        self
    }

    /// Sets the session settings.
    pub fn with_onnx(mut self, onnx: OrtSessionConfig) -> Self {
        self.onnx = onnx;
        self
    }
}

/// The most sessions one model runs: each is a thread and a copy of the weights,
/// and more than this is a mistake in a config, not a way to serve faster.
pub const MAX_INSTANCES: usize = 256;

/// Refuses 0 instances and more than [`MAX_INSTANCES`].
pub(crate) fn check_instances(name: &str, instances: usize) -> Result<(), Error> {
    if !(1..=MAX_INSTANCES).contains(&instances) {
        return Err(Error::Config(format!("`{name}`: instances {instances} is outside 1..={MAX_INSTANCES}")));
    }
    Ok(())
}
