//! The protocol's operations on the registry, shared by the gRPC and HTTP endpoints:
//! names resolved to a task, a variant or a model; metadata; inference with the
//! request's parameters as its SLO; statistics; the model repository.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use super::admin_token::AdminToken;
use super::answer::{AnswerTensor, InferAnswer, InferCall, ModelDescription, ModelStats, RequestedOutput};
use super::config::ModelControlMode;
use super::limits::{InputBounds, RequestLimits};
use super::repository::{Repository, RepositoryEntry};
use super::status::{Code, ServeError};
use crate::backend::{ModelMetadata, TensorSpec};
use crate::metrics::serving_metrics;
use crate::model::Model;
use crate::registry::{Pipeline, PipelineAnswer, PipelineOutput, PipelineValue, Registry, Task};
use crate::request::{Inputs, Slo, Timings};

/// What a name stands for.
enum Target {
    /// A task: the runtime picks the variant.
    Task(Arc<Task>),
    /// One variant of a task, served directly.
    Variant(Arc<Task>, String),
    /// A plain model.
    Model(Arc<Model>),
    /// A pipeline of tasks.
    Pipeline(Arc<Pipeline>),
}

/// The operations both endpoints serve.
pub struct InferenceService {
    registry: Arc<Registry>,
    repository: Arc<dyn Repository>,
    limits: RequestLimits,
    model_control: ModelControlMode,
    admin_token: Option<AdminToken>,
    draining: AtomicBool,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for InferenceService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InferenceService").finish_non_exhaustive()
    }
}

impl InferenceService {
    /// Serves what `registry` holds within the default limits; repository calls go to
    /// `repository` once [`with_model_control`](Self::with_model_control) allows them.
    pub fn new(registry: Arc<Registry>, repository: Arc<dyn Repository>) -> Self {
        InferenceService {
            registry,
            repository,
            limits: RequestLimits::default(),
            model_control: ModelControlMode::default(),
            admin_token: None,
            draining: AtomicBool::new(false),
        }
    }

    /// Decodes requests within `limits`.
    pub fn with_limits(mut self, limits: RequestLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Lets repository calls load and unload models (`Explicit`) or not (`None`).
    pub fn with_model_control(mut self, mode: ModelControlMode) -> Self {
        self.model_control = mode;
        self
    }

    /// Makes repository calls present `token` (see [`ServerConfig::admin_token`]).
    ///
    /// [`ServerConfig::admin_token`]: super::ServerConfig::admin_token
    pub fn with_admin_token(mut self, token: Option<AdminToken>) -> Self {
        self.admin_token = token;
        self
    }

    /// The limits requests are decoded within.
    pub fn limits(&self) -> RequestLimits {
        self.limits
    }

    /// What a request to `name` (at `version`) may claim: the inputs of the model that
    /// serves it now and the rows it takes, within the server's limits.
    pub fn input_bounds(&self, name: &str, version: &str) -> Result<InputBounds, ServeError> {
        let target = self.resolve(name)?;
        if let Target::Pipeline(pipeline) = &target {
            check_pipeline_version(name, version)?;
            let image_input = pipeline.signature().image_input;
            return Ok(InputBounds {
                inputs: vec![TensorSpec::new(image_input.clone(), crate::tensor::DType::U8, [None])],
                batched: true,
                max_rows: 1,
                limits: self.limits,
                image_input: Some(image_input),
            });
        }
        let model = self.serving_model(name, &target, version)?;
        let metadata = described(&target, &model)?;
        Ok(InputBounds {
            image_input: model.image_input().map(str::to_string),
            batched: metadata.dynamic_batch(),
            inputs: metadata.inputs.clone(),
            max_rows: model.max_request_rows(),
            limits: self.limits,
        })
    }

    /// The registry served.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// From now on the server says it is not ready, so that probes and balancers send
    /// elsewhere. It still answers what reaches it over connections already open: a
    /// balancer's requests already on their way when it learnt of the drain would
    /// otherwise fail, and the listeners stop taking connections anyway.
    pub fn start_draining(&self) {
        self.draining.store(true, Ordering::SeqCst);
    }

    /// Whether the server is ready: not draining.
    pub fn is_ready(&self) -> bool {
        !self.draining.load(Ordering::SeqCst)
    }

    fn resolve(&self, name: &str) -> Result<Target, ServeError> {
        if let Ok(task) = self.registry.task(name) {
            return Ok(Target::Task(task));
        }
        if let Ok(pipeline) = self.registry.pipeline(name) {
            return Ok(Target::Pipeline(pipeline));
        }
        if let Ok(model) = self.registry.get(name) {
            return Ok(Target::Model(model));
        }
        if let Some(task) = self.registry.tasks().into_iter().find(|t| t.has_variant(name)) {
            return Ok(Target::Variant(task, name.to_string()));
        }
        Err(ServeError::new(
            Code::NotFound,
            format!("unknown model `{name}`: no task, pipeline, variant or model of that name"),
        ))
    }

    /// The model serving `target` now, checked against the version asked for.
    fn serving_model(&self, name: &str, target: &Target, version: &str) -> Result<Arc<Model>, ServeError> {
        let model = match target {
            Target::Task(task) => task.active_model()?,
            Target::Variant(task, variant) => task.variant_model(variant)?,
            Target::Model(model) => model.clone(),
            Target::Pipeline(_) => {
                return Err(ServeError::new(Code::Internal, format!("`{name}` is a pipeline, served by no one model")));
            }
        };
        let versioned = !matches!(target, Target::Task(_));
        if !version.is_empty() && (!versioned || version != model.version().to_string()) {
            return Err(ServeError::new(
                Code::NotFound,
                format!("model `{name}` has no version `{version}` ready (serving: {})", model.version()),
            ));
        }
        Ok(model)
    }

    /// Whether `name` (at `version`, if given) can serve now.
    pub fn model_ready(&self, name: &str, version: &str) -> bool {
        self.is_ready()
            && self.resolve(name).is_ok_and(|target| match &target {
                Target::Pipeline(pipeline) => {
                    check_pipeline_version(name, version).is_ok() && self.pipeline_ready(pipeline)
                }
                _ => self.serving_model(name, &target, version).is_ok(),
            })
    }

    /// Whether every stage of `pipeline` has a variant serving.
    fn pipeline_ready(&self, pipeline: &Pipeline) -> bool {
        pipeline.stages().iter().all(|stage| self.registry.task(stage).is_ok_and(|t| t.active_model().is_ok()))
    }

    /// What `name` takes and gives.
    pub fn metadata(&self, name: &str, version: &str) -> Result<ModelDescription, ServeError> {
        let target = self.resolve(name)?;
        if let Target::Pipeline(pipeline) = &target {
            check_pipeline_version(name, version)?;
            return Ok(pipeline_description(name, pipeline));
        }
        let model = self.serving_model(name, &target, version)?;
        let ModelMetadata { inputs, outputs } = described(&target, &model)?.clone();
        let (platform, versions) = match target {
            Target::Task(_) => ("modelless_task", Vec::new()),
            _ => ("onnxruntime_onnx", vec![model.version().to_string()]),
        };
        let image_input = model.image_input().map(str::to_string);
        let text_outputs = Vec::new();
        Ok(ModelDescription { name: name.to_string(), versions, platform, inputs, outputs, image_input, text_outputs })
    }

    /// Runs one inference.
    pub async fn infer(&self, call: InferCall) -> Result<InferAnswer, ServeError> {
        let target = self.resolve(&call.model)?;
        if let Target::Pipeline(pipeline) = target {
            return self.infer_pipeline(pipeline, call).await;
        }
        let model = self.serving_model(&call.model, &target, &call.version)?;
        let wanted = wanted_outputs(&call.model, described(&target, &model)?, &call.outputs)?;
        let classify = |name: &str| call.outputs.iter().find(|o| o.name == name).and_then(|o| o.classification);
        let slo = self.slo(&call);
        let mut inputs: Inputs = call.inputs.into_iter().collect();
        for (name, images) in call.images {
            inputs = inputs.with_images(name, images);
        }
        // The request span is made as it is submitted, under the caller's span.
        let ticket = call.parent.in_scope(|| match &target {
            Target::Task(task) => task.submit(inputs, &slo),
            Target::Variant(task, variant) => task.submit_to(variant, inputs, &slo),
            Target::Model(model) => model.submit(inputs, slo.options(Instant::now())),
            Target::Pipeline(_) => unreachable!("pipelines are answered above"),
        })?;
        let output = ticket.await_answer().await?;
        let (model, version, task) = (output.model.to_string(), output.version, output.task.clone());
        let (batch_size, timings) = (output.batch_size, output.timings);
        // Classified first, while the output is whole; the tensors then move out uncopied.
        let mut classified = Vec::new();
        for (name, k) in output.names.iter().filter_map(|name| Some((name, classify(name)?))) {
            let classes = output.classes(name, k)?;
            let per_row = classes.first().map_or(0, Vec::len);
            let strings = classes.iter().flatten().map(|c| c.to_triton()).collect();
            classified.push((
                name.clone(),
                AnswerTensor::Strings { shape: vec![classes.len() as i64, per_row as i64], strings },
            ));
        }
        let names = output.names.clone();
        let outputs = names
            .iter()
            .zip(output.into_tensors())
            .filter(|(name, _)| wanted.as_ref().is_none_or(|w| w.contains(name)))
            .map(|(name, tensor)| match classified.iter().position(|(c, _)| c == name) {
                Some(i) => classified.swap_remove(i),
                None => (name.clone(), AnswerTensor::Tensor(tensor)),
            })
            .collect();
        Ok(InferAnswer {
            model,
            version,
            id: call.id,
            task: task.as_deref().map(str::to_string),
            batch_size,
            timings,
            outputs,
            stages: Vec::new(),
        })
    }

    /// Runs one request through `pipeline`, on a blocking thread: the glue waits for
    /// its stages' answers.
    async fn infer_pipeline(&self, pipeline: Arc<Pipeline>, call: InferCall) -> Result<InferAnswer, ServeError> {
        check_pipeline_version(&call.model, &call.version)?;
        let signature = pipeline.signature();
        for RequestedOutput { name: output, .. } in &call.outputs {
            if !signature.outputs.iter().any(|o| o.name() == output) {
                let known: Vec<&str> = signature.outputs.iter().map(PipelineOutput::name).collect();
                return Err(ServeError::invalid(format!(
                    "pipeline `{}` has no output `{output}`; outputs: {}",
                    call.model,
                    known.join(", ")
                )));
            }
        }
        let slo = self.slo(&call);
        let mut inputs: Inputs = call.inputs.into_iter().collect();
        for (name, images) in call.images {
            inputs = inputs.with_images(name, images);
        }
        let parent = call.parent;
        let answer = tokio::task::spawn_blocking(move || parent.in_scope(|| pipeline.answer(inputs, &slo)))
            .await
            .map_err(|e| ServeError::new(Code::Internal, format!("pipeline `{}` failed: {e}", call.model)))??;
        let PipelineAnswer { outputs, stages, total } = answer;
        let outputs = outputs
            .into_iter()
            .filter(|(name, _)| call.outputs.is_empty() || call.outputs.iter().any(|o| &o.name == name))
            .map(|(name, value)| match value {
                PipelineValue::Tensor(tensor) => (name, AnswerTensor::Tensor(tensor)),
                PipelineValue::Texts(strings) => {
                    (name, AnswerTensor::Strings { shape: vec![strings.len() as i64], strings })
                }
                PipelineValue::Bytes(items) => (name, AnswerTensor::Bytes { shape: vec![items.len() as i64], items }),
            })
            .collect();
        Ok(InferAnswer {
            model: call.model.clone(),
            version: PIPELINE_VERSION,
            id: call.id,
            task: Some(call.model),
            batch_size: 1,
            timings: Timings { total, ..Timings::default() },
            outputs,
            stages,
        })
    }

    /// The request's SLO: its latency target, tightened by its timeout and the
    /// transport's deadline, each of which becomes the request's deadline.
    fn slo(&self, call: &InferCall) -> Slo {
        let now = Instant::now();
        let transport = call.deadline.map(|d| d.saturating_duration_since(now));
        let latency = [call.params.latency, call.params.timeout, transport].into_iter().flatten().min();
        Slo { latency, min_accuracy: call.params.min_accuracy, priority: call.params.priority, no_deadline: false }
    }

    /// Statistics of `name` (every variant of a task), or of everything for "".
    pub fn statistics(&self, name: &str) -> Result<Vec<ModelStats>, ServeError> {
        let metrics = serving_metrics();
        let variant_stats = |task: &Task, variant: &str| ModelStats {
            name: variant.to_string(),
            version: task.variant_model(variant).ok().map(|m| m.version()),
            totals: metrics.model_counters(task.name(), variant).totals(),
        };
        let task_stats = |task: &Task| -> Vec<ModelStats> {
            task.status().variants.iter().map(|v| variant_stats(task, &v.name)).collect()
        };
        let model_stats = |model: &Model| ModelStats {
            name: model.name().to_string(),
            version: Some(model.version()),
            totals: model.counters().totals(),
        };
        if name.is_empty() {
            let mut all: Vec<ModelStats> = self.registry.tasks().iter().flat_map(|t| task_stats(t)).collect();
            let models = self.registry.names().into_iter().filter_map(|n| self.registry.get(&n).ok());
            all.extend(models.map(|m| model_stats(&m)));
            return Ok(all);
        }
        Ok(match self.resolve(name)? {
            Target::Task(task) => task_stats(&task),
            Target::Variant(task, variant) => vec![variant_stats(&task, &variant)],
            Target::Model(model) => vec![model_stats(&model)],
            Target::Pipeline(pipeline) => pipeline
                .stages()
                .iter()
                .filter_map(|stage| self.registry.task(stage).ok())
                .flat_map(|task| task_stats(&task))
                .collect(),
        })
    }

    /// What this replica runs: its policy and the variants that follow tags.
    pub fn provenance(&self) -> serde_json::Value {
        self.repository.provenance()
    }

    /// The repository's models and their states; only those ready when `ready_only`.
    pub async fn repository_index(&self, ready_only: bool) -> Result<Vec<RepositoryEntry>, ServeError> {
        let repository = self.repository.clone();
        let entries = blocking(move || Ok(repository.index())).await?;
        Ok(entries.into_iter().filter(|e| !ready_only || e.state == "READY").collect())
    }

    /// Reports a request to `name` that `endpoint` refused before it reached the model:
    /// counted as the endpoint's refusal, and as a rejection of the model it was for.
    pub fn refused(&self, endpoint: &str, name: &str, version: &str, error: ServeError) -> ServeError {
        let target = self.resolve(name).and_then(|t| self.serving_model(name, &t, version));
        if let Ok(model) = target {
            let reason = match error.code {
                Code::OutOfRange => "request_too_large",
                _ => "invalid_input",
            };
            model.counters().refused(reason, &error);
        }
        error.counted_by(endpoint)
    }

    /// Refused unless the model control mode lets peers load and unload models, and
    /// the call presents the admin token where one is set (`authorization`: the
    /// header's or metadata's value).
    fn check_model_control(&self, authorization: Option<&str>) -> Result<(), ServeError> {
        match self.model_control {
            ModelControlMode::Explicit => match &self.admin_token {
                Some(token) => token.check(authorization),
                None => Ok(()),
            },
            ModelControlMode::None => Err(ServeError::new(
                Code::FailedPrecondition,
                "loading and unloading models is off on this server (model_control_mode = \"none\"); \
                 its operator can set model_control_mode = \"explicit\"",
            )),
        }
    }

    /// Loads `name` from the repository, with `config` (JSON) overriding its settings;
    /// `authorization` is what the call presented.
    pub async fn repository_load(
        &self,
        name: String,
        config: Option<String>,
        authorization: Option<&str>,
    ) -> Result<(), ServeError> {
        self.check_model_control(authorization)?;
        let repository = self.repository.clone();
        blocking(move || repository.load(&name, config.as_deref())).await
    }

    /// Unloads `name`; `authorization` is what the call presented.
    pub async fn repository_unload(&self, name: String, authorization: Option<&str>) -> Result<(), ServeError> {
        self.check_model_control(authorization)?;
        let repository = self.repository.clone();
        blocking(move || repository.unload(&name)).await
    }
}

/// A pipeline's one version: its glue is code, not a versioned file.
const PIPELINE_VERSION: u64 = 1;

/// Refused unless `version` is empty or the pipeline's one version.
fn check_pipeline_version(name: &str, version: &str) -> Result<(), ServeError> {
    if version.is_empty() || version == PIPELINE_VERSION.to_string() {
        return Ok(());
    }
    Err(ServeError::new(Code::NotFound, format!("pipeline `{name}` has no version `{version}` (serving: 1)")))
}

/// What a pipeline takes and gives, as the protocol presents it.
fn pipeline_description(name: &str, pipeline: &Pipeline) -> ModelDescription {
    let signature = pipeline.signature();
    let mut text_outputs = Vec::new();
    let outputs = signature
        .outputs
        .into_iter()
        .map(|output| match output {
            PipelineOutput::Tensor(spec) => spec,
            PipelineOutput::Texts(name) => {
                text_outputs.push(name.clone());
                TensorSpec::new(name, crate::tensor::DType::U8, [None])
            }
        })
        .collect();
    ModelDescription {
        name: name.to_string(),
        versions: vec![PIPELINE_VERSION.to_string()],
        platform: "modelless_pipeline",
        inputs: vec![TensorSpec::new(signature.image_input.clone(), crate::tensor::DType::U8, [None])],
        outputs,
        image_input: Some(signature.image_input),
        text_outputs,
    }
}

/// What `target` takes and gives: a task's signature, whatever variant serves it;
/// else what `model` (the one serving `target`) does.
fn described<'a>(target: &'a Target, model: &'a Model) -> Result<&'a ModelMetadata, ServeError> {
    match target {
        Target::Task(task) => Ok(task.signature()?),
        _ => Ok(model.metadata()),
    }
}

/// Runs a call that loads or unloads models off the async workers.
async fn blocking<T: Send + 'static>(
    call: impl FnOnce() -> Result<T, ServeError> + Send + 'static,
) -> Result<T, ServeError> {
    tokio::task::spawn_blocking(call)
        .await
        .unwrap_or_else(|e| Err(ServeError::new(Code::Internal, format!("repository call failed: {e}"))))
}

/// The outputs asked for, checked against the model's; `None` for all.
fn wanted_outputs(
    name: &str,
    metadata: &ModelMetadata,
    asked: &[RequestedOutput],
) -> Result<Option<Vec<String>>, ServeError> {
    if asked.is_empty() {
        return Ok(None);
    }
    for RequestedOutput { name: output, .. } in asked {
        if !metadata.outputs.iter().any(|o| &o.name == output) {
            let known: Vec<&str> = metadata.outputs.iter().map(|o| o.name.as_str()).collect();
            return Err(ServeError::invalid(format!(
                "model `{name}` has no output `{output}`; outputs: {}",
                known.join(", ")
            )));
        }
    }
    Ok(Some(asked.iter().map(|o| o.name.clone()).collect()))
}
