//! [`Runtime`]: the models an application serves, and the calls to reach them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use modelless_runtime::backend::onnx::{OrtBackend, OrtEnvironmentConfig};
use modelless_runtime::{
    BackendFactory, BatchingConfig, Error, Inputs, Model, ModelConfig, ModelMetadata, Output, Registry, Ticket,
};
use serde::{Deserialize, Serialize};

/// Everything a runtime is built from; deserialises from a config file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Process-wide ONNX Runtime settings.
    #[serde(default)]
    pub onnxruntime: OrtEnvironmentConfig,
    /// Models loaded at start.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
}

/// Builds a [`Runtime`].
#[derive(Default)]
pub struct RuntimeBuilder {
    config: RuntimeConfig,
    custom: Vec<(String, BackendFactory, usize, BatchingConfig)>,
}

impl RuntimeBuilder {
    /// Starts from a whole config.
    pub fn with_config(mut self, config: RuntimeConfig) -> Self {
        self.config = config;
        self
    }

    /// Sets the ONNX Runtime settings.
    pub fn with_onnxruntime(mut self, config: OrtEnvironmentConfig) -> Self {
        self.config.onnxruntime = config;
        self
    }

    /// Adds an ONNX model.
    pub fn with_model(mut self, model: ModelConfig) -> Self {
        self.config.models.push(model);
        self
    }

    /// Adds a model served by a backend of your own.
    pub fn with_backend(
        mut self,
        name: impl Into<String>,
        factory: BackendFactory,
        instances: usize,
        batching: BatchingConfig,
    ) -> Self {
        self.custom.push((name.into(), factory, instances, batching));
        self
    }

    /// Loads every model (blocking until all are ready) and returns the runtime. The
    /// first model that fails to load fails the build.
    pub fn build(self) -> Result<Runtime, Error> {
        let runtime = Runtime { onnxruntime: self.config.onnxruntime, registry: Registry::new() };
        for model in self.config.models {
            runtime.load_model(model)?;
        }
        for (name, factory, instances, batching) in self.custom {
            runtime.load_backend(&name, factory, instances, batching)?;
        }
        Ok(runtime)
    }
}

/// Per-request options.
#[derive(Clone, Copy, Debug, Default)]
pub struct InferOptions {
    /// Past this instant the request is answered `DeadlineExceeded` instead of run.
    pub deadline: Option<Instant>,
}

impl InferOptions {
    /// Gives up on the request if it has not started within `timeout` from now.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.deadline = Some(Instant::now() + timeout);
        self
    }

    /// Gives up on the request if it has not started by `deadline`.
    pub fn with_deadline(mut self, deadline: Instant) -> Self {
        self.deadline = Some(deadline);
        self
    }
}

/// What a loaded model takes and how it is served.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// Its name.
    pub name: String,
    /// Inputs and outputs.
    pub metadata: ModelMetadata,
    /// Batching knobs in force.
    pub batching: BatchingConfig,
    /// Instances serving it.
    pub instances: usize,
}

impl ModelInfo {
    fn of(model: &Model) -> Self {
        ModelInfo {
            name: model.name().to_string(),
            metadata: model.metadata().clone(),
            batching: model.batching(),
            instances: model.instances(),
        }
    }
}

/// The models an application serves. Share it (`Arc<Runtime>`) between threads and
/// tasks; every call takes `&self`.
pub struct Runtime {
    onnxruntime: OrtEnvironmentConfig,
    registry: Registry,
}

impl Runtime {
    /// A builder with no models.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// Loads an ONNX model and starts serving it; blocks until its instances are
    /// ready. A model that fails to load leaves the others serving.
    pub fn load_model(&self, config: ModelConfig) -> Result<ModelInfo, Error> {
        let factory = OrtBackend::factory(self.onnxruntime.clone(), config.path.clone(), config.onnx.clone());
        self.load_backend(&config.name, factory, config.instances, config.batching)
    }

    /// Starts serving a model of your own backend; blocks until its instances are ready.
    pub fn load_backend(
        &self,
        name: &str,
        factory: BackendFactory,
        instances: usize,
        batching: BatchingConfig,
    ) -> Result<ModelInfo, Error> {
        if self.registry.get(name).is_ok() {
            return Err(Error::AlreadyLoaded(name.to_string()));
        }
        let model = Model::start(name, factory, instances, batching)?;
        let model = self.registry.insert(model)?;
        Ok(ModelInfo::of(&model))
    }

    /// Stops taking requests for a model; what it has queued still runs.
    pub fn unload_model(&self, name: &str) -> Result<(), Error> {
        self.registry.remove(name).map(drop)
    }

    /// Names of the loaded models, sorted.
    pub fn models(&self) -> Vec<String> {
        self.registry.names()
    }

    /// What a loaded model takes and how it is served.
    pub fn model_info(&self, name: &str) -> Result<ModelInfo, Error> {
        self.registry.get(name).map(|m| ModelInfo::of(&m))
    }

    /// Changes a model's batching knobs while it serves.
    pub fn configure_batching(&self, name: &str, batching: BatchingConfig) -> Result<(), Error> {
        self.registry.get(name)?.configure(batching)
    }

    /// Checks and queues a request without waiting for it.
    pub fn submit(&self, model: &str, inputs: impl Into<Inputs>, options: InferOptions) -> Result<Ticket, Error> {
        self.registry.get(model)?.submit(inputs.into(), options.deadline)
    }

    /// Runs a request on `model`.
    pub async fn infer(&self, model: &str, inputs: impl Into<Inputs>) -> Result<Output, Error> {
        self.infer_with(model, inputs, InferOptions::default()).await
    }

    /// Runs a request on `model` with options.
    pub async fn infer_with(
        &self,
        model: &str,
        inputs: impl Into<Inputs>,
        options: InferOptions,
    ) -> Result<Output, Error> {
        self.submit(model, inputs, options)?.await_answer().await
    }

    /// Runs a request, blocking the thread until it is answered. For code without an
    /// async executor; do not call it on one.
    pub fn infer_blocking(&self, model: &str, inputs: impl Into<Inputs>) -> Result<Output, Error> {
        self.submit(model, inputs, InferOptions::default())?.wait()
    }
}

// The runtime is shared across threads and tasks.
const _: fn() = || {
    fn shareable<T: Send + Sync>() {}
    shareable::<Runtime>();
    shareable::<Arc<Runtime>>();
};
