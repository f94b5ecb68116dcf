//! [`Runtime`]: the models an application serves, and the calls to reach them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
#[cfg(feature = "server")]
use std::sync::Mutex;

use modelless_runtime::backend::onnx::{OrtBackend, OrtEnvironmentConfig};
use modelless_runtime::policy::{ResourceTotals, ResourcesConfig, budget};
use modelless_runtime::preprocess::{PreprocessConfig, PreprocessPool};
use modelless_runtime::profile::{ImageCapacity, ImageProfile, Profile};
use modelless_runtime::registry::{
    FindTask, ImageCapacityOptions, ImageSizeClass, Pipeline, PipelineAnswer, PipelineGlue, variant_profile,
};
use modelless_runtime::{
    BackendFactory, BatchingConfig, Cause, Error, FindProfile, InferOptions, Inputs, MakeBackend, Model, ModelMetadata,
    Output, Registry, Slo, StartOptions, SwitchReport, Task, TaskConfig, TaskStatus, Ticket, VariantConfig,
};
use serde::{Deserialize, Serialize};

use crate::model_info::ModelInfo;
use crate::off_thread::off_thread;
use crate::pipeline_config::PipelineConfig;
use crate::policy_config::PolicyConfig;
use crate::sources::Sources;
#[cfg(feature = "policies")]
use crate::steering::Steering;
use crate::task_handle::TaskHandle;
use modelless_runtime::source::ArtifactKind;

/// Everything a runtime is built from; the format of its TOML config file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeConfig {
    /// Process-wide ONNX Runtime settings.
    #[serde(default)]
    pub onnxruntime: OrtEnvironmentConfig,
    /// Models loaded at start, each called by its own name.
    #[serde(default)]
    pub models: Vec<VariantConfig>,
    /// Tasks, each served by one of its variants.
    #[serde(default)]
    pub tasks: Vec<TaskConfig>,
    /// Pipelines of the project's glue over the tasks (served after them).
    #[serde(default)]
    pub pipelines: Vec<PipelineConfig>,
    /// The pool that decodes and preprocesses the images requests carry.
    #[serde(default)]
    pub preprocessing: PreprocessConfig,
    /// The scheduling policy steering the tasks, if any.
    #[serde(default)]
    pub policy: Option<PolicyConfig>,
    /// What the tasks' instances may hold of the machine: the budget a policy's
    /// decisions are held to.
    #[serde(default)]
    pub resources: ResourcesConfig,
    /// How `oci://` and `https://` sources of policies and models are fetched,
    /// cached and followed.
    #[serde(default)]
    pub sources: modelless_runtime::source::SourcesConfig,
    /// The KServe V2 endpoints, for `modelless serve`.
    #[cfg(feature = "server")]
    #[serde(default)]
    pub server: Option<modelless_runtime::kserve::ServerConfig>,
}

impl RuntimeConfig {
    /// Parses a TOML config; relative paths in it are taken from `base`. An unknown
    /// key is an error that names it.
    pub fn from_toml(text: &str, base: &Path) -> Result<Self, Error> {
        let mut config: RuntimeConfig =
            toml::from_str(text).map_err(|e| Error::ConfigRefused { what: "TOML".into(), source: Cause::new(e) })?;
        config.validate()?;
        config.resolve_paths(base);
        Ok(config)
    }

    /// Checks every value against its bounds, before anything is loaded: models'
    /// instances and batching, tasks, the policy's sandbox and the server's limits.
    /// The error names the setting.
    pub fn validate(&self) -> Result<(), Error> {
        self.models.iter().try_for_each(VariantConfig::validate_as_model)?;
        self.tasks.iter().try_for_each(TaskConfig::validate)?;
        self.pipelines.iter().try_for_each(PipelineConfig::validate)?;
        self.preprocessing.validate()?;
        self.resources.validate()?;
        self.policy.as_ref().map_or(Ok(()), PolicyConfig::validate)?;
        self.sources.validate()?;
        #[cfg(feature = "server")]
        if let Some(server) = &self.server {
            server.validate().map_err(Error::Config)?;
        }
        Ok(())
    }

    /// Points every model and variant whose path is an `oci://` reference or an
    /// `https://` URL at its file in the blob cache, fetching what is not there (a
    /// tag is resolved once; a runtime built from the config follows it). For tools
    /// that read the model files themselves: a runtime fetches them as it builds.
    pub fn fetch_sources(&mut self) -> Result<(), Error> {
        let sources = Sources::new(self.sources.clone());
        for model in &mut self.models {
            model.path = sources.fetch(&model.path, model.sha256.as_deref(), ArtifactKind::Model)?.path;
            model.sha256 = None;
        }
        sources.fetch_variants(&mut self.tasks)?;
        Ok(())
    }

    /// Reads and parses a TOML config file; relative paths are taken from its folder.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, Error> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| Error::io("read the config", path, e))?;
        let base = path.parent().unwrap_or(Path::new("."));
        RuntimeConfig::from_toml(&text, base).map_err(|e| match e {
            Error::Config(message) => Error::Config(format!("{}: {message}", path.display())),
            Error::ConfigRefused { what, source } => {
                Error::ConfigRefused { what: format!("{}: {what}", path.display()), source }
            }
            other => other,
        })
    }

    fn resolve_paths(&mut self, base: &Path) {
        // A remote source (`oci://`, `https://`) reads as a relative path; it is kept.
        let resolve = |p: &mut PathBuf| {
            let remote = modelless_runtime::source::Source::of_path(p).is_ok_and(|s| s.is_remote());
            if p.is_relative() && !remote {
                *p = base.join(&*p);
            }
        };
        if let Some(library) = self.onnxruntime.library_path.as_mut() {
            resolve(library);
        }
        self.models.iter_mut().for_each(|m| resolve(&mut m.path));
        for path in [&mut self.sources.cache, &mut self.sources.docker_config, &mut self.sources.token_file] {
            path.iter_mut().for_each(resolve);
        }
        self.tasks.iter_mut().flat_map(|t| t.variants.iter_mut()).for_each(|v| resolve(&mut v.path));
        self.tasks.iter_mut().filter_map(|t| t.labels.as_mut()).for_each(resolve);
        self.pipelines.iter_mut().for_each(|p| resolve(&mut p.dictionary));
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

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for RuntimeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeBuilder").finish_non_exhaustive()
    }
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
    pub fn with_model(mut self, model: VariantConfig) -> Self {
        self.config.models.push(model);
        self
    }

    /// Adds a task whose variants are ONNX models.
    pub fn with_task(mut self, task: TaskConfig) -> Self {
        self.config.tasks.push(task);
        self
    }

    /// Sets the preprocessing pool.
    pub fn with_preprocessing(mut self, config: PreprocessConfig) -> Self {
        self.config.preprocessing = config;
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

    /// Like [`RuntimeBuilder::build`], without blocking the caller's executor: the
    /// models load and warm on a thread of their own while the executor runs its other
    /// tasks. Warming takes about a batch's run per batch size warmed up (up to
    /// `max_batch_size`, or the sizes [`crate::WarmupConfig`] names): fractions of a
    /// second for a small CPU model at batch 1, seconds for several sizes.
    pub async fn build_async(self) -> Result<Runtime, Error> {
        off_thread("modelless-build", move || self.build()).await
    }

    /// Loads every model (blocking until all are ready) and returns the runtime. The
    /// first model that fails to load fails the build. In async code, await
    /// [`RuntimeBuilder::build_async`] instead.
    pub fn build(mut self) -> Result<Runtime, Error> {
        self.config.validate()?;
        let sources = Arc::new(Sources::new(self.config.sources.clone()));
        for model in &mut self.config.models {
            model.path = sources.fetch(&model.path, model.sha256.as_deref(), ArtifactKind::Model)?.path;
        }
        let to_follow = sources.fetch_variants(&mut self.config.tasks)?;
        let usable = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        self.config.resources.check_cores(usable)?;
        let registry = Arc::new(Registry::new());
        let resources = self.config.resources.totals(self.config.onnxruntime.intra_op_threads);
        registry.set_budget_cores(resources.cores);
        let runtime = Runtime {
            price_scale: self.config.resources.price_scale(),
            onnxruntime: self.config.onnxruntime,
            preprocessing: PreprocessPool::start(&self.config.preprocessing)?,
            #[cfg(feature = "policies")]
            steering: Arc::new(Steering::new(registry.clone(), resources.clone(), sources.clone())),
            sources,
            resources,
            registry,
            #[cfg(feature = "server")]
            declared: Mutex::new(crate::declared::Declared {
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
        #[cfg(feature = "oci")]
        runtime.sources.follow_variants(to_follow, &runtime.registry)?;
        #[cfg(not(feature = "oci"))]
        drop(to_follow);
        for (name, factory, instances, batching) in self.custom {
            runtime.load_backend(&name, factory, instances, batching)?;
        }
        #[cfg(feature = "ocr")]
        for pipeline in &self.config.pipelines {
            runtime.add_pipeline(&pipeline.name, pipeline.glue()?)?;
        }
        #[cfg(feature = "policies")]
        if let Some(policy) = self.config.policy {
            runtime.start_policy(policy)?;
        }
        Ok(runtime)
    }
}

/// The models an application serves. Share it (`Arc<Runtime>`) between threads and
/// tasks; every call takes `&self`.
pub struct Runtime {
    onnxruntime: OrtEnvironmentConfig,
    /// What every profile's prices are scaled by (the resources' oversubscription).
    price_scale: f64,
    preprocessing: Arc<PreprocessPool>,
    pub(crate) registry: Arc<Registry>,
    #[cfg(feature = "policies")]
    steering: Arc<Steering>,
    /// Where remote policies and model versions are fetched and followed.
    #[cfg_attr(not(feature = "oci"), allow(dead_code))]
    sources: Arc<Sources>,
    /// What the tasks' instances may hold.
    resources: ResourceTotals,
    /// What the config declared, for the model repository.
    #[cfg(feature = "server")]
    pub(crate) declared: Mutex<crate::declared::Declared>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime").finish_non_exhaustive()
    }
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

    /// What the tasks' instances may hold of the machine, and what of it is free now:
    /// the budget a policy's snapshot carries.
    pub fn budget(&self) -> modelless_runtime::policy_abi::Budget {
        let tasks: Vec<_> = self
            .registry
            .tasks()
            .iter()
            .map(|task| modelless_runtime::policy_abi::TaskSnapshot {
                name: task.name().to_string(),
                active: task.serving().0,
                variants: task.variant_snapshots(),
                ..Default::default()
            })
            .collect();
        budget(&self.resources, &tasks)
    }

    /// The process's metrics in Prometheus' text format, as `/metrics` serves them:
    /// for an application that exposes them on its own endpoint.
    pub fn metrics_text(&self) -> String {
        modelless_runtime::metrics::serving_metrics().render(&self.registry.gauge_reading())
    }

    /// Loads an ONNX model, warms it up and starts serving it; blocks until its
    /// instances are ready. A model that fails to load leaves the others serving; one
    /// that sets what only a task's variant takes is refused before it loads.
    pub fn load_model(&self, config: VariantConfig) -> Result<ModelInfo, Error> {
        config.validate_as_model()?;
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
    /// is profiled then if its config says `profile = "measure"`. A variant that does
    /// not load now is priced by its stored profile, if it has one (see
    /// [`Runtime::variant_profile`]).
    pub fn add_task(&self, config: TaskConfig) -> Result<TaskStatus, Error> {
        let onnxruntime = self.onnxruntime.clone();
        let make: MakeBackend = Arc::new(move |variant, path| variant.backend_factory(&onnxruntime, path));
        let onnxruntime = self.onnxruntime.clone();
        // Instances planned on more cores than exist run that much slower than profiled.
        let price_scale = self.price_scale;
        let find: FindProfile = Arc::new(move |variant, path, lookup| {
            variant_profile(variant, path, &onnxruntime, lookup)
                .inspect_err(|e| tracing::warn!(variant = %variant.name, error = %e, "no profile"))
                .ok()
                .flatten()
                .map(|profile| profile.slowed_by(price_scale))
        });
        let name = config.name.clone();
        let pool = self.preprocessing.clone();
        self.start_task(&name, || Task::start_with_pool(config, make, Some(find), pool))
    }

    /// Adds a task whose variants' backends `make` creates (without profiles).
    pub fn add_task_with(&self, config: TaskConfig, make: MakeBackend) -> Result<TaskStatus, Error> {
        let (name, pool) = (config.name.clone(), self.preprocessing.clone());
        self.start_task(&name, || Task::start_with_pool(config, make, None, pool))
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

    /// What `task` takes and gives, whatever variant serves it: its declared signature,
    /// or its first variant's.
    pub fn task_metadata(&self, task: &str) -> Result<ModelMetadata, Error> {
        self.registry.task(task)?.signature().cloned()
    }

    /// What a policy sees of `task`'s variants: accuracy, state and profiled cost.
    pub fn variant_snapshots(&self, task: &str) -> Result<Vec<modelless_runtime::policy_abi::VariantSnapshot>, Error> {
        Ok(self.registry.task(task)?.variant_snapshots())
    }

    /// The profile of the version serving `variant` of `task`; while none serves, the
    /// one last known for it (stored for its file when the task started, or its newest
    /// loaded version's). `None` where there is none.
    pub fn variant_profile(&self, task: &str, variant: &str) -> Result<Option<Arc<Profile>>, Error> {
        self.registry.task(task)?.profile(variant)
    }

    /// Measures what `variant` of `task` answers a second when its requests carry
    /// `class`'s photos (decoded, resized and run on the cores they share, through
    /// the task's own request path), and stores it beside the model in the variant's
    /// image profile. The variant must be loaded and declare `preprocess`. Send no
    /// other load meanwhile: it would be counted against the variant.
    pub fn measure_image_capacity(
        &self,
        task: &str,
        variant: &str,
        class: &ImageSizeClass,
        options: &ImageCapacityOptions,
        on_progress: &mut dyn FnMut(f64, f64),
    ) -> Result<ImageCapacity, Error> {
        self.registry.task(task)?.measure_image_capacity(variant, class, options, on_progress)
    }

    /// The image profile stored for `variant` of `task` as it is loaded and configured
    /// now (see [`Runtime::measure_image_capacity`]); `None` where none matches.
    pub fn image_profile(&self, task: &str, variant: &str) -> Result<Option<ImageProfile>, Error> {
        self.registry.task(task)?.image_profile(variant)
    }

    /// A handle on `task`: ask it, switch it, scale it, read its status.
    pub fn task(&self, task: &str) -> Result<TaskHandle, Error> {
        Ok(TaskHandle::new(self.registry.task(task)?))
    }

    /// Makes `variant` the one serving `task`, loading and warming it first if need
    /// be; blocks until it serves. No request fails because of a switch. In async
    /// code, await [`TaskHandle::switch`] instead.
    pub fn switch_variant(&self, task: &str, variant: &str) -> Result<SwitchReport, Error> {
        self.registry.task(task)?.switch_to(variant)
    }

    /// Loads a new version of a variant from `path`; once warm it replaces the old
    /// version, which drains. On failure the old version keeps serving. In async code,
    /// await [`Runtime::load_version_async`] instead.
    pub fn load_version(&self, task: &str, variant: &str, path: impl Into<PathBuf>) -> Result<u64, Error> {
        self.registry.task(task)?.load_version(variant, path)
    }

    /// Like [`Runtime::load_version`], loading and warming on a thread of its own
    /// while the caller's executor runs its other tasks.
    pub async fn load_version_async(&self, task: &str, variant: &str, path: impl Into<PathBuf>) -> Result<u64, Error> {
        let (task, variant, path) = (self.registry.task(task)?, variant.to_string(), path.into());
        off_thread("modelless-load", move || task.load_version(&variant, path)).await
    }

    /// Loads a variant without making it active. In async code, await
    /// [`Runtime::load_variant_async`] instead.
    pub fn load_variant(&self, task: &str, variant: &str) -> Result<(), Error> {
        self.registry.task(task)?.load_variant(variant)
    }

    /// Like [`Runtime::load_variant`], on a thread of its own.
    pub async fn load_variant_async(&self, task: &str, variant: &str) -> Result<(), Error> {
        let (task, variant) = (self.registry.task(task)?, variant.to_string());
        off_thread("modelless-load", move || task.load_variant(&variant)).await
    }

    /// Unloads a variant that is not active.
    pub fn unload_variant(&self, task: &str, variant: &str) -> Result<(), Error> {
        self.registry.task(task)?.unload_variant(variant)
    }

    /// Checks and queues a request to a task without waiting for it.
    pub fn submit_task(&self, task: &str, inputs: impl Into<Inputs>, slo: Slo) -> Result<Ticket, Error> {
        self.registry.task(task)?.submit(inputs.into(), &slo)
    }

    /// The variant serving `task` now.
    pub fn active_variant(&self, task: &str) -> Result<String, Error> {
        Ok(self.registry.task(task)?.active_model()?.name().to_string())
    }

    /// Checks and queues a request to one variant of a task, bypassing routing: in the
    /// task's signature, answered in it.
    pub fn submit_variant(
        &self,
        task: &str,
        variant: &str,
        inputs: impl Into<Inputs>,
        slo: Slo,
    ) -> Result<Ticket, Error> {
        self.registry.task(task)?.submit_to(variant, inputs.into(), &slo)
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

    /// Serves `name` as a pipeline: `glue` answers each request by running items
    /// through the tasks it names, which must be loaded (see
    /// [`PipelineGlue`]). A pipeline may not take a task's name.
    pub fn add_pipeline(&self, name: &str, glue: Arc<dyn PipelineGlue>) -> Result<(), Error> {
        for stage in glue.stages() {
            self.registry.task(&stage)?;
        }
        // Weak: the registry holds the pipeline, which must not keep the registry alive.
        let registry = Arc::downgrade(&self.registry);
        let find: FindTask = Arc::new(move |task: &str| registry.upgrade().ok_or(Error::ShuttingDown)?.task(task));
        self.registry.insert_pipeline(Pipeline::new(name, glue, find)).map(drop)
    }

    /// Stops serving a pipeline; its stages stay.
    pub fn remove_pipeline(&self, name: &str) -> Result<(), Error> {
        self.registry.remove_pipeline(name).map(drop)
    }

    /// Names of the pipelines, sorted.
    pub fn pipelines(&self) -> Vec<String> {
        self.registry.pipeline_names()
    }

    /// Runs `inputs` through the pipeline `name` on this thread, the whole pipeline
    /// under `slo`'s deadline; the answer says what each stage took and how many items
    /// it ran. Do not call it on an async executor.
    pub fn infer_pipeline_blocking(
        &self,
        name: &str,
        inputs: impl Into<Inputs>,
        slo: Slo,
    ) -> Result<PipelineAnswer, Error> {
        self.registry.pipeline(name)?.answer(inputs.into(), &slo)
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

/// Steering: the policy that decides every tick which variant serves each task, with
/// what knobs and instances (feature `policies`).
#[cfg(feature = "policies")]
impl Runtime {
    /// Starts steering every task with the policy `config` names (replacing any before
    /// it). The configured knobs each task has now are what the native fallback keeps
    /// should the module fail repeatedly. Its decisions are held to the budget of the
    /// config's `[resources]`.
    pub fn start_policy(&self, config: PolicyConfig) -> Result<(), Error> {
        self.steering.start(config)
    }

    /// Replaces the running policy with the module at `path` (compiled, dry-run on the
    /// last snapshot, handed the old one's state), keeping its parameters; the old one
    /// stays if that fails. Returns how long it took.
    pub fn reload_policy(&self, path: impl AsRef<Path>) -> Result<std::time::Duration, Error> {
        self.steering.reload(path.as_ref(), None)
    }

    /// Like [`Runtime::reload_policy`], compiling the module on a thread of its own
    /// while the caller's executor runs its other tasks.
    pub async fn reload_policy_async(&self, path: impl AsRef<Path>) -> Result<std::time::Duration, Error> {
        let (steering, path) = (self.steering.clone(), path.as_ref().to_path_buf());
        off_thread("modelless-policy", move || steering.reload(&path, None)).await
    }

    /// Like [`Runtime::reload_policy`], with new parameters for the new module.
    pub fn reload_policy_with(
        &self,
        path: impl AsRef<Path>,
        parameters: serde_json::Value,
    ) -> Result<std::time::Duration, Error> {
        self.steering.reload(path.as_ref(), Some(parameters))
    }

    /// Runs the module at `path` in shadow beside the running policy: it decides every
    /// tick, and its decisions show in the status (and the recording) but are never
    /// applied. `None` stops the shadow.
    pub fn shadow_policy(&self, path: Option<&Path>) -> Result<(), Error> {
        self.steering.shadow(path, None)
    }

    /// Like [`Runtime::shadow_policy`], with parameters for the shadow module.
    pub fn shadow_policy_with(&self, path: &Path, parameters: serde_json::Value) -> Result<(), Error> {
        self.steering.shadow(Some(path), Some(parameters))
    }

    /// What the tag the running policy follows serves, and how its polls went, if
    /// its module is an `oci://` tag.
    #[cfg(feature = "oci")]
    pub fn policy_source_status(&self) -> Option<modelless_runtime::source::FollowStatus> {
        self.steering.followed()
    }

    /// What the running policy has done, if one runs.
    pub fn policy_status(&self) -> Option<modelless_runtime::policy::ControlStatus> {
        self.steering.status()
    }

    /// The tasks' variants whose versions follow an `oci://` tag: what each serves,
    /// and how its polls went.
    #[cfg(feature = "oci")]
    pub fn followed_variants(&self) -> Vec<crate::sources::FollowedVariant> {
        self.sources.followed_variants()
    }

    /// Stops the running policy; tasks keep the knobs and instances they have.
    pub fn stop_policy(&self) {
        self.steering.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;

    use modelless_runtime::fuzzing::{PeakAllocator, fuzz, hostile};
    use proptest::collection::vec;
    use proptest::prelude::*;

    use super::*;

    /// A TOML number where the config wants one: typical, zero, negative, enormous,
    /// fractional, not a number, or not a number at all.
    fn number() -> impl Strategy<Value = String> + Clone {
        prop_oneof![
            4 => (0i64..10).prop_map(|n| n.to_string()),
            1 => any::<i64>().prop_map(|n| n.to_string()),
            1 => Just("9223372036854775807".to_string()),
            1 => Just("4294967296".to_string()),
            1 => any::<f64>().prop_map(|f| format!("{f:?}")),
            1 => prop_oneof![Just("nan"), Just("inf"), Just("-inf"), Just("-0.0"), Just("\"8\""), Just("[]")]
                .prop_map(str::to_string),
        ]
    }

    /// One section of a config, with every number drawn from [`number`].
    fn section() -> impl Strategy<Value = String> {
        let n = number;
        let model = (n(), n(), n(), n(), vec(n(), 0..3)).prop_map(|(instances, batch, delay, queue, warmup)| {
            format!(
                "[[models]]\nname = \"m\"\npath = \"m.onnx\"\ninstances = {instances}\n\
                 batching = {{ max_batch_size = {batch}, max_queue_delay_us = {delay}, max_queue_size = {queue} }}\n\
                 warmup = {{ batch_sizes = [{}] }}\n",
                warmup.join(", ")
            )
        });
        let task = (n(), n(), n(), n()).prop_map(|(slo, keep, accuracy, instances)| {
            format!(
                "[[tasks]]\nname = \"t\"\nactive = \"v\"\nlatency_slo_ms = {slo}\nkeep_warm_mib = {keep}\n\
                 [[tasks.variants]]\nname = \"v\"\npath = \"v.onnx\"\naccuracy = {accuracy}\ninstances = {instances}\n"
            )
        });
        let policy = (n(), n(), n(), n()).prop_map(|(tick, deadline, memory, gap)| {
            format!(
                "[policy]\nmodule = \"p.wasm\"\ntick_ms = {tick}\ndeadline_ms = {deadline}\n\
                 memory_limit_mib = {memory}\nearly_tick_gap_ms = {gap}\n"
            )
        });
        let server = (n(), n(), n(), n(), n(), n()).prop_map(|(mib, elements, tensors, timeout, window, batch)| {
            format!(
                "[server]\nmax_message_mib = {mib}\nmax_tensor_elements = {elements}\nmax_request_tensors = {tensors}\n\
                 request_read_timeout_ms = {timeout}\nhttp2_stream_window_kib = {window}\n\
                 [server.override_limits]\nmax_batch_size = {batch}\n"
            )
        });
        prop_oneof![model, task, policy, server]
    }

    #[test]
    fn a_config_that_is_not_toml_keeps_the_parsers_error_as_its_source() {
        let refused = RuntimeConfig::from_toml("[[models]\nname = 1", Path::new("/configs")).unwrap_err();
        assert_eq!(refused.kind(), modelless_runtime::ErrorKind::Config);
        let source = std::error::Error::source(&refused).and_then(|s| s.downcast_ref::<Cause>());
        assert!(source.and_then(|c| c.downcast_ref::<toml::de::Error>()).is_some(), "{refused:?}");
        assert!(refused.to_string().contains("TOML"), "{refused}");
    }

    #[test]
    fn fuzz_runtime_config_files() {
        let base = Path::new("/configs");
        let text = vec(section(), 1..4).prop_map(|sections| sections.concat());
        // A file known to be valid among them, so that a run of 256 accepts some: few
        // drawn files parse (every number must be in range).
        let valid = "[[models]]\nname = \"m\"\npath = \"m.onnx\"\ninstances = 1\n\
                     [[tasks]]\nname = \"t\"\nlatency_slo_ms = 50\n\
                     [[tasks.variants]]\nname = \"v\"\npath = \"v.onnx\"\naccuracy = 70\n";
        assert!(RuntimeConfig::from_toml(valid, base).is_ok(), "the valid file is");
        let config_file = prop_oneof![
            8 => text.prop_flat_map(hostile::mangled),
            1 => vec(any::<u8>(), 0..256),
            1 => Just(valid.as_bytes().to_vec()),
        ];
        let (accepted, refused) = (Cell::new(0), Cell::new(0));
        fuzz("runtime-config", config_file, |bytes| {
            let text = String::from_utf8_lossy(&bytes);
            PeakAllocator::reset();
            let parsed = RuntimeConfig::from_toml(&text, base);
            let largest = PeakAllocator::largest();
            // The TOML parser keeps a few words per level of nesting: linear, if wider
            // than the JSON decoders.
            prop_assert!(largest <= 64 * text.len() + (64 << 10), "{} bytes allocated {largest}", text.len());
            let Ok(config) = parsed else {
                refused.set(refused.get() + 1);
                return Ok(());
            };
            accepted.set(accepted.get() + 1);
            // What is accepted is within bounds everywhere it is used, and reads back
            // the same when written out.
            prop_assert!(config.validate().is_ok());
            #[cfg(feature = "policies")]
            if let Some(policy) = &config.policy {
                let host = policy.host_config();
                prop_assert!(host.memory_limit_bytes.is_none_or(|m| m >= 1 << 20) && host.deadline.as_millis() >= 1);
            }
            #[cfg(feature = "server")]
            if let Some(server) = &config.server {
                let limits = server.request_limits();
                prop_assert!(limits.max_message_bytes >= 1 << 20 && limits.max_tensor_elements >= 1);
                prop_assert!(!server.request_read_timeout().is_zero());
            }
            let written = toml::to_string(&config).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let read_back = RuntimeConfig::from_toml(&written, base);
            prop_assert_eq!(read_back.as_ref().ok(), Some(&config), "{}", written);
            Ok(())
        });
        assert!(accepted.get() > 0 && refused.get() > 0, "{} accepted, {} refused", accepted.get(), refused.get());
    }
}
