//! [`Runtime`]: the models an application serves, and the calls to reach them.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use modelless_runtime::backend::onnx::{OrtBackend, OrtEnvironmentConfig};
use modelless_runtime::profile::{Profile, variant_profile};
use modelless_runtime::{
    BackendFactory, BatchingConfig, Error, FindProfile, InferOptions, Inputs, MakeBackend, Model, ModelConfig,
    ModelMetadata, Output, Registry, Slo, StartOptions, SwitchReport, Task, TaskConfig, TaskStatus, Ticket,
};
use serde::{Deserialize, Serialize};

use crate::steering::{PolicyConfig, RunningPolicy};

/// Everything a runtime is built from; the format of its TOML config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Process-wide ONNX Runtime settings.
    #[serde(default)]
    pub onnxruntime: OrtEnvironmentConfig,
    /// Models loaded at start, each called by its own name.
    #[serde(default)]
    pub models: Vec<ModelConfig>,
    /// Tasks, each served by one of its variants.
    #[serde(default)]
    pub tasks: Vec<TaskConfig>,
    /// The scheduling policy steering the tasks, if any.
    #[serde(default)]
    pub policy: Option<PolicyConfig>,
    /// The KServe V2 endpoints, for `modelless serve`.
    #[cfg(feature = "server")]
    #[serde(default)]
    pub server: Option<modelless_runtime::kserve::ServerConfig>,
}

impl RuntimeConfig {
    /// Parses a TOML config; relative paths in it are taken from `base`. An unknown
    /// key is an error that names it.
    pub fn from_toml(text: &str, base: &Path) -> Result<Self, Error> {
        let mut config: RuntimeConfig = toml::from_str(text).map_err(|e| Error::Config(e.to_string()))?;
        config.resolve_paths(base);
        Ok(config)
    }

    /// Reads and parses a TOML config file; relative paths are taken from its folder.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::Config(format!("{}: {e}", path.display())))?;
        let base = path.parent().unwrap_or(Path::new("."));
        RuntimeConfig::from_toml(&text, base).map_err(|e| Error::Config(format!("{}: {e}", path.display())))
    }

    fn resolve_paths(&mut self, base: &Path) {
        let resolve = |p: &mut PathBuf| {
            if p.is_relative() {
                *p = base.join(&*p);
            }
        };
        if let Some(library) = self.onnxruntime.library_path.as_mut() {
            resolve(library);
        }
        self.models.iter_mut().for_each(|m| resolve(&mut m.path));
        self.tasks.iter_mut().flat_map(|t| t.variants.iter_mut()).for_each(|v| resolve(&mut v.path));
        #[cfg(feature = "server")]
        if let Some(server) = self.server.as_mut() {
            server.model_repository.iter_mut().for_each(&resolve);
            if let Some(tls) = server.tls.as_mut() {
                resolve(&mut tls.cert);
                resolve(&mut tls.key);
            }
        }
        if let Some(policy) = self.policy.as_mut() {
            resolve(&mut policy.module);
            if let Some(record) = policy.record.as_mut() {
                resolve(record);
            }
        }
    }
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

    /// Adds a task whose variants are ONNX models.
    pub fn with_task(mut self, task: TaskConfig) -> Self {
        self.config.tasks.push(task);
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
        let runtime = Runtime {
            onnxruntime: self.config.onnxruntime,
            registry: Arc::new(Registry::new()),
            policy: Mutex::new(None),
            #[cfg(feature = "server")]
            declared: Mutex::new(crate::serving::Declared {
                models: self.config.models.clone(),
                tasks: self.config.tasks.clone(),
            }),
        };
        for model in self.config.models {
            runtime.load_model(model)?;
        }
        for task in self.config.tasks {
            runtime.add_task(task)?;
        }
        for (name, factory, instances, batching) in self.custom {
            runtime.load_backend(&name, factory, instances, batching)?;
        }
        if let Some(policy) = self.config.policy {
            runtime.start_policy(policy)?;
        }
        Ok(runtime)
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
    pub(crate) registry: Arc<Registry>,
    pub(crate) policy: Mutex<Option<RunningPolicy>>,
    /// What the config declared, for the model repository.
    #[cfg(feature = "server")]
    pub(crate) declared: Mutex<crate::serving::Declared>,
}

impl Runtime {
    /// A builder with no models.
    pub fn builder() -> RuntimeBuilder {
        RuntimeBuilder::default()
    }

    /// A runtime built from a TOML config file (see [`RuntimeConfig`]).
    pub fn from_config_file(path: impl AsRef<Path>) -> Result<Runtime, Error> {
        Runtime::builder().with_config(RuntimeConfig::from_file(path)?).build()
    }

    /// Loads an ONNX model, warms it up and starts serving it; blocks until its
    /// instances are ready. A model that fails to load leaves the others serving.
    pub fn load_model(&self, config: ModelConfig) -> Result<ModelInfo, Error> {
        let factory = OrtBackend::factory(self.onnxruntime.clone(), config.path.clone(), config.onnx.clone());
        let options = StartOptions { warmup: config.warmup.clone(), ..StartOptions::default() };
        self.start(&config.name, factory, config.instances, config.batching, options)
    }

    /// Starts serving a model of your own backend (without warm-up); blocks until its
    /// instances are ready.
    pub fn load_backend(
        &self,
        name: &str,
        factory: BackendFactory,
        instances: usize,
        batching: BatchingConfig,
    ) -> Result<ModelInfo, Error> {
        self.start(name, factory, instances, batching, StartOptions::default())
    }

    fn start(
        &self,
        name: &str,
        factory: BackendFactory,
        instances: usize,
        batching: BatchingConfig,
        options: StartOptions,
    ) -> Result<ModelInfo, Error> {
        if self.registry.get(name).is_ok() {
            return Err(Error::AlreadyLoaded(name.to_string()));
        }
        let model = Model::start_with(name, factory, instances, batching, options)?;
        let model = self.registry.insert(model)?;
        Ok(ModelInfo::of(&model))
    }

    /// Adds a task whose variants are ONNX models or TorchScript modules (their `format`),
    /// loading (and warming up) its active variant and those marked `preload`; blocks
    /// until the active one is ready.
    ///
    /// Each version that loads takes its stored profile (see `modelless profile`), or
    /// is profiled then if its config says `profile = "measure"`.
    pub fn add_task(&self, config: TaskConfig) -> Result<TaskStatus, Error> {
        let onnxruntime = self.onnxruntime.clone();
        let make: MakeBackend = Arc::new(move |variant, path| variant.backend_factory(&onnxruntime, path));
        let onnxruntime = self.onnxruntime.clone();
        let find: FindProfile = Arc::new(move |variant, path| {
            variant_profile(variant, path, &onnxruntime)
                .inspect_err(|e| tracing::warn!(variant = %variant.name, error = %e, "no profile"))
                .ok()
                .flatten()
        });
        let name = config.name.clone();
        self.start_task(&name, || Task::start_profiled(config, make, Some(find)))
    }

    /// Adds a task whose variants' backends `make` creates (without profiles).
    pub fn add_task_with(&self, config: TaskConfig, make: MakeBackend) -> Result<TaskStatus, Error> {
        let name = config.name.clone();
        self.start_task(&name, || Task::start(config, make))
    }

    fn start_task(&self, name: &str, start: impl FnOnce() -> Result<Task, Error>) -> Result<TaskStatus, Error> {
        if self.registry.task(name).is_ok() {
            return Err(Error::AlreadyLoaded(name.to_string()));
        }
        let task = self.registry.insert_task(start()?)?;
        Ok(task.status())
    }

    /// Removes a task; its variants finish what they queued, then unload.
    pub fn remove_task(&self, task: &str) -> Result<(), Error> {
        self.registry.remove_task(task).map(drop)
    }

    /// Names of the tasks, sorted.
    pub fn tasks(&self) -> Vec<String> {
        self.registry.task_names()
    }

    /// A task's variants, versions and their states.
    pub fn task_status(&self, task: &str) -> Result<TaskStatus, Error> {
        Ok(self.registry.task(task)?.status())
    }

    /// Inputs and outputs of the variant serving `task` (every variant of a task takes
    /// the same inputs).
    pub fn task_metadata(&self, task: &str) -> Result<ModelMetadata, Error> {
        Ok(self.registry.task(task)?.active_model()?.metadata().clone())
    }

    /// What a policy sees of `task`'s variants: accuracy, state and profiled cost.
    pub fn variant_snapshots(&self, task: &str) -> Result<Vec<modelless_runtime::policy_abi::VariantSnapshot>, Error> {
        Ok(self.registry.task(task)?.variant_snapshots())
    }

    /// The profile of the version serving `variant` of `task`, if it has one.
    pub fn variant_profile(&self, task: &str, variant: &str) -> Result<Option<Arc<Profile>>, Error> {
        self.registry.task(task)?.profile(variant)
    }

    /// Makes `variant` the one serving `task`, loading and warming it first if need
    /// be; blocks until it serves. No request fails because of a switch.
    pub fn switch_variant(&self, task: &str, variant: &str) -> Result<SwitchReport, Error> {
        self.registry.task(task)?.switch_to(variant)
    }

    /// Loads a new version of a variant from `path`; once warm it replaces the old
    /// version, which drains. On failure the old version keeps serving.
    pub fn load_version(&self, task: &str, variant: &str, path: impl Into<PathBuf>) -> Result<u64, Error> {
        self.registry.task(task)?.load_version(variant, path)
    }

    /// Loads a variant without making it active.
    pub fn load_variant(&self, task: &str, variant: &str) -> Result<(), Error> {
        self.registry.task(task)?.load_variant(variant)
    }

    /// Unloads a variant that is not active.
    pub fn unload_variant(&self, task: &str, variant: &str) -> Result<(), Error> {
        self.registry.task(task)?.unload_variant(variant)
    }

    /// Checks and queues a request to a task without waiting for it.
    pub fn submit_task(&self, task: &str, inputs: impl Into<Inputs>, slo: Slo) -> Result<Ticket, Error> {
        self.registry.task(task)?.submit(inputs.into(), &slo)
    }

    /// Asks `task` for an answer meeting `slo`; the runtime picks the variant.
    pub async fn infer_task(&self, task: &str, inputs: impl Into<Inputs>, slo: Slo) -> Result<Output, Error> {
        self.submit_task(task, inputs, slo)?.await_answer().await
    }

    /// Like [`Runtime::infer_task`], blocking the thread. Do not call it on an async
    /// executor.
    pub fn infer_task_blocking(&self, task: &str, inputs: impl Into<Inputs>, slo: Slo) -> Result<Output, Error> {
        self.submit_task(task, inputs, slo)?.wait()
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
        self.registry.get(model)?.submit(inputs.into(), options)
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
