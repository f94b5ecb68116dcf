//! A loaded model: its instance threads, its batcher, and admission in front of them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::admission::{Admitted, admit};
use crate::answered::AnswerHook;
use crate::answered::Answered;
use crate::backend::onnx::OrtSessionConfig;
use crate::backend::{Backend, BackendFactory, Device, ModelMetadata};
use crate::batching::margin::Prediction;
use crate::batching::pending::{Arrival, Pending, Prepared};
use crate::batching::queue::{PreparingRows, Queue, timer_task};
use crate::batching::worker::{ModelNames, worker_task};
use crate::batching::{BatchCost, BatchingConfig};
use crate::error::{BackendError, Error};
use crate::metrics::{ModelCounters, serving_metrics};
use crate::preprocess::{ImagePreprocess, ImageSource};
use crate::request::{InferOptions, Inputs, Output, Priority};
use crate::trace::{self, Traced};
use crate::warmup::{WarmupConfig, sizes_to_warm, warm_up};
use modelless_policy_abi::LatencyFit;

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

/// How a model admits a request that carries a deadline.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "mode")]
pub enum Admission {
    /// By its profiled batch cost: refused at once when it would be answered late.
    Predictive {
        /// Measured batch time over the profile's prediction, lately.
        correction: f64,
        /// What predictions are stretched by, as answers overran them lately (1: not).
        margin: f64,
    },
    /// Without a profile: queued while there is room, and answered
    /// `DeadlineExceeded` if its deadline passes before it runs.
    QueueRoom,
}

/// What a model is doing before it serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadPhase {
    /// Its sessions are being created.
    Loading,
    /// Its sessions run warm-up batches.
    Warming,
}

/// Called as a model moves through its load phases.
pub type PhaseCallback = Arc<dyn Fn(LoadPhase) + Send + Sync>;

/// How to start a model, beyond its backend, instances and batching.
#[derive(Clone)]
pub struct StartOptions {
    /// Task the model serves as a variant, named in its answers.
    pub task: Option<Arc<str>>,
    /// Version named in its answers.
    pub version: u64,
    /// Warm-up before the model takes requests.
    pub warmup: WarmupConfig,
    /// Told of each load phase.
    pub on_phase: Option<PhaseCallback>,
    /// Told how each request ends.
    pub on_answer: Option<AnswerHook>,
    /// The most rows a request may hold, when more than the batching's
    /// `max_batch_size` (which the device's memory lowered): larger requests are
    /// refused, those between the two split into batches that fit.
    pub max_request_rows: Option<usize>,
    /// Class labels its answers classify with.
    pub labels: Option<Arc<[String]>>,
    /// How images are made into its image input, where it takes images.
    pub preprocess: Option<Arc<ImagePreprocess>>,
    /// Its profiled batch latency. With it, a request that would be answered after
    /// its deadline is refused at admission, and one that could no longer make it
    /// leaves the queue unrun; without it, only deadlines already passed count.
    pub latency_fit: Option<LatencyFit>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for StartOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StartOptions").field("task", &self.task).finish_non_exhaustive()
    }
}

impl Default for StartOptions {
    fn default() -> Self {
        StartOptions {
            task: None,
            version: 1,
            warmup: WarmupConfig::disabled(),
            on_phase: None,
            on_answer: None,
            max_request_rows: None,
            labels: None,
            preprocess: None,
            latency_fit: None,
        }
    }
}

/// A model that serves requests.
pub struct Model {
    name: Arc<str>,
    /// The task it serves as a variant, named in its request spans.
    task: Option<Arc<str>>,
    version: u64,
    metadata: ModelMetadata,
    device: Device,
    instances: usize,
    warmup: Option<Duration>,
    batching: ArcSwap<BatchingConfig>,
    /// Requests with more rows (or more than the batch in force, if larger) are
    /// refused; those within it but larger than the batch in force are split.
    max_request_rows: usize,
    queue: Arc<Queue>,
    counters: Arc<ModelCounters>,
    preprocess: Option<Arc<ImagePreprocess>>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model").field("name", &self.name).finish_non_exhaustive()
    }
}

impl Model {
    /// Starts `instances` backends made by `factory`, each on its own thread, and the
    /// queue in front of them, without warm-up. Blocks until every instance has loaded;
    /// if one fails, the others are let go and the error is returned.
    pub fn start(
        name: &str,
        factory: BackendFactory,
        instances: usize,
        batching: BatchingConfig,
    ) -> Result<Model, Error> {
        Model::start_with(name, factory, instances, batching, StartOptions::default())
    }

    /// Like [`Model::start`], with options. Sessions are created and warmed up on
    /// threads of the lowest scheduling priority, so that loading a model beside others
    /// that serve does not starve them; each then serves from a thread of normal
    /// priority.
    pub fn start_with(
        name: &str,
        factory: BackendFactory,
        instances: usize,
        batching: BatchingConfig,
        options: StartOptions,
    ) -> Result<Model, Error> {
        check_instances(name, instances)?;
        batching.validate()?;
        let load_error = |source: BackendError| Error::Load { model: name.to_string(), source: Arc::new(source) };
        let phase = |p: LoadPhase| {
            if let Some(on_phase) = &options.on_phase {
                on_phase(p);
            }
        };
        phase(LoadPhase::Loading);
        // Sessions are created and warmed up on loader threads of the lowest priority:
        // they take the cores only when the models that serve leave them idle. (The
        // warm-up's batches also use the shared intra-op pool; measured, a low-priority
        // caller still slows serving far less than one of normal priority.)
        let (loaded_tx, loaded_rx) = std::sync::mpsc::channel();
        for index in 0..instances {
            let (factory, loaded) = (factory.clone(), loaded_tx.clone());
            let (name, batching, warmup) = (name.to_string(), batching.clone(), options.warmup.clone());
            let on_phase = options.on_phase.clone();
            spawn(format!("modelless-{name}-load-{index}"), move || {
                lower_priority();
                let _ = loaded.send(load_instance(&name, &factory, batching, &warmup, index, on_phase));
            })?;
        }
        drop(loaded_tx);
        let mut loaded: Vec<LoadedInstance> = Vec::with_capacity(instances);
        for _ in 0..instances {
            let instance = loaded_rx.recv().map_err(|_| Error::ShuttingDown)?.map_err(load_error)?;
            if loaded.first().is_some_and(|l| l.backend.metadata() != instance.backend.metadata()) {
                return Err(load_error(BackendError::InputMismatch("instances disagree on the model's inputs".into())));
            }
            loaded.push(instance);
        }
        let metadata = loaded.first().map(|l| l.backend.metadata().clone()).ok_or(Error::ShuttingDown)?;
        let device = loaded.first().map_or(Device::Cpu, |l| l.backend.device());
        let batching = effective_batching(name, &metadata, batching);
        let max_request_rows = options.max_request_rows.unwrap_or(0).max(batching.max_batch_size);
        let warmup = loaded.iter().filter_map(|l| l.warmup).max();
        // A plain model is its own task.
        let counters = serving_metrics().model_counters(options.task.as_deref().unwrap_or(name), name);
        let counters = Arc::new(counters);
        let names = Arc::new(ModelNames {
            model: Arc::from(name),
            version: options.version,
            task: options.task.clone(),
            outputs: metadata.outputs.iter().map(|o| o.name.clone()).collect(),
            on_answer: options.on_answer.clone(),
            counters: counters.clone(),
            labels: options.labels.clone(),
        });
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..instances).map(|_| crossbeam_channel::bounded(1)).unzip();
        let queue =
            Queue::new(names.model.clone(), batching.clone(), senders, options.on_answer.clone(), counters.clone());
        queue.set_cost(options.latency_fit.and_then(BatchCost::new));
        for (index, (instance, jobs)) in loaded.into_iter().zip(receivers).enumerate() {
            let (names, queue) = (names.clone(), queue.clone());
            spawn(format!("modelless-{name}-{index}"), move || {
                worker_task(names, instance.backend, jobs, queue, index, instance.pad_sizes)
            })?;
        }
        let timer_queue = queue.clone();
        spawn(format!("modelless-{name}-timer"), move || timer_task(timer_queue))?;
        Ok(Model {
            name: names.model.clone(),
            task: options.task.clone(),
            version: options.version,
            metadata,
            device,
            instances,
            warmup,
            batching: ArcSwap::from_pointee(batching),
            max_request_rows,
            queue,
            counters,
            preprocess: options.preprocess.clone(),
        })
    }

    /// Whether the model has stopped taking requests and finished what it had; for
    /// watching a model drain after the last handle to it is dropped.
    pub fn drain_handle(&self) -> DrainHandle {
        DrainHandle(self.queue.clone())
    }

    /// Version named in its answers.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Where its sessions run (the CPU, where a variant fell back from a GPU).
    pub fn device(&self) -> Device {
        self.device
    }

    /// How long the slowest instance took to warm up, if it did.
    pub fn warmup_time(&self) -> Option<Duration> {
        self.warmup
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Inputs and outputs.
    pub fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    /// Number of instances.
    pub fn instances(&self) -> usize {
        self.instances
    }

    /// The batching knobs in force.
    pub fn batching(&self) -> BatchingConfig {
        self.batching.load().as_ref().clone()
    }

    /// Its request counters (shared with every version of the same task and variant).
    pub fn counters(&self) -> &ModelCounters {
        &self.counters
    }

    /// The most rows one request may hold: the configured `max_batch_size`, or the
    /// batch in force if a policy raised it above that.
    pub fn max_request_rows(&self) -> usize {
        self.max_request_rows.max(self.batching.load().max_batch_size)
    }

    /// Requests waiting for a batch.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// How its queue admits requests with a deadline.
    pub fn admission(&self) -> Admission {
        match self.queue.cost_and_margin() {
            Some((cost, margin)) => Admission::Predictive { correction: cost.correction(), margin },
            None => Admission::QueueRoom,
        }
    }

    /// How images are made into its image input, where it takes images.
    pub fn preprocess(&self) -> Option<&Arc<ImagePreprocess>> {
        self.preprocess.as_ref()
    }

    /// The input its images fill: the one its preprocessing names, else its only one;
    /// `None` where it takes no images (or cannot tell which input they fill).
    pub fn image_input(&self) -> Option<&str> {
        let preprocess = self.preprocess.as_ref()?;
        match (&preprocess.input, self.metadata.inputs.as_slice()) {
            (Some(name), _) => Some(name),
            (None, [only]) => Some(&only.name),
            (None, _) => None,
        }
    }

    /// Moves the requests waiting in this model's queue to `to`'s, when both take the
    /// same inputs; those `to` cannot run (too many rows for its batches, no room)
    /// stay here. Returns how many moved.
    pub fn move_waiting_to(&self, to: &Model) -> usize {
        self.move_waiting(to, None)
    }

    /// Like [`Model::move_waiting_to`]; requests whose image input was made for this
    /// model's preprocessing, when `to`'s differs, go to `remake` (with their place
    /// in time) to be made again for `to`, or stay here without it.
    pub(crate) fn move_waiting(&self, to: &Model, mut remake: Option<&mut dyn FnMut(Pending, Instant)>) -> usize {
        let same_inputs = self.metadata.inputs == to.metadata.inputs;
        let same_images = self.preprocess == to.preprocess;
        if !same_inputs && remake.is_none() {
            return 0;
        }
        let max_rows = to.batching.load().max_batch_size;
        let (mut fit, mut stay, mut redo) = (Vec::new(), Vec::new(), Vec::new());
        // What this queue predicted for a request says nothing of how `to` runs: were
        // it late there, it must not stretch `to`'s margin.
        let unpredicted = |pending: Pending| Pending { prediction: None, ..pending };
        for (pending, enqueued) in self.queue.take_waiting() {
            // Its image input was made for this model's preprocessing, which `to`'s is not.
            let needs_remaking = pending.source.is_some() && !same_images;
            if pending.rows > max_rows {
                stay.push((pending, enqueued));
            } else if needs_remaking && remake.is_some() {
                redo.push((unpredicted(pending), enqueued));
            } else if same_inputs && !needs_remaking {
                fit.push((unpredicted(pending), enqueued));
            } else {
                stay.push((pending, enqueued));
            }
        }
        let moved = fit.len();
        let refused = to.queue.take_over(fit);
        let moved = moved - refused.len() + redo.len();
        stay.extend(refused);
        // Back where they were; only arrivals routed here meanwhile can have taken the room.
        self.requeue(stay);
        if let Some(remake) = remake.as_mut() {
            redo.into_iter().for_each(|(pending, enqueued)| remake(pending, enqueued));
        }
        moved
    }

    /// Queues requests taken from a queue (or made again for this model), each keeping
    /// its place in time; those it has no room for are refused as overloaded.
    pub(crate) fn requeue(&self, moved: Vec<(Pending, Instant)>) {
        let refused = self.queue.take_over(moved);
        self.queue.refuse(refused.into_iter().map(|(pending, _)| pending).collect());
    }

    /// Answers a request taken from its queue that cannot run after all.
    pub(crate) fn fail_taken(&self, pending: Pending, error: Error) {
        pending.traced.failed(&error);
        self.counters.failed(&error);
        self.queue.tell(Answered::Failed);
        let _ = pending.reply.send(Err(error));
    }

    /// Judges a request of `rows` rows and `priority` that will be queued `preparing`
    /// from now: its refusal as unable to make `deadline`, or what was predicted for
    /// it (`None` where no profile prices its batches).
    pub(crate) fn judge_prepared(
        &self,
        rows: usize,
        priority: Priority,
        deadline: Instant,
        preparing: Duration,
    ) -> Result<Option<Prediction>, Error> {
        self.queue.judge_prepared(rows, priority, deadline, preparing)
    }

    /// Counts `rows` admitted and being prepared as ahead of requests judged by
    /// [`Model::judge_prepared`] while the guard lives: drop it as they are queued.
    pub(crate) fn preparing(&self, rows: usize) -> PreparingRows {
        self.queue.preparing(rows)
    }

    /// Changes the batching knobs; they apply from the next batch on.
    pub fn configure(&self, batching: BatchingConfig) -> Result<(), Error> {
        batching.validate()?;
        let batching = effective_batching(&self.name, &self.metadata, batching);
        self.batching.store(Arc::new(batching.clone()));
        self.queue.configure(batching);
        Ok(())
    }

    /// Checks and queues a request; the ticket resolves to its answer. Refused at once
    /// when the inputs do not fit the model or the queue is full. A request with more
    /// rows than the batch in force runs as several batches (each part counts as a
    /// request in the model's counters) and is answered once all have run.
    pub fn submit(&self, inputs: Inputs, options: InferOptions) -> Result<Ticket, Error> {
        // A plain model is its own task.
        let task = self.task.as_deref().unwrap_or(&self.name);
        let span = trace::request(task, &self.name, options.priority, options.deadline);
        self.submit_in(inputs, options, span)
    }

    /// Like [`Model::submit`], for a request whose span (see [`crate::trace`]) a task made.
    pub(crate) fn submit_in(
        &self,
        inputs: Inputs,
        options: InferOptions,
        span: tracing::Span,
    ) -> Result<Ticket, Error> {
        if inputs.has_images() {
            let error = Error::InvalidInput {
                model: self.name.to_string(),
                reason: "images go to a task whose variants declare `preprocess`; a model takes tensors".into(),
            };
            trace::failed(&span, &error);
            self.counters.failed(&error);
            return Err(error);
        }
        self.submit_prepared(inputs, options, Arrival::now(), Prepared::default(), None, span)
    }

    /// Like [`Model::submit`], for a request that arrived as `arrival` says and whose
    /// images took `prepared` to become its image input (made from `source`); `span`
    /// is its request span.
    pub(crate) fn submit_prepared(
        &self,
        inputs: Inputs,
        options: InferOptions,
        arrival: Arrival,
        prepared: Prepared,
        source: Option<Arc<ImageSource>>,
        span: tracing::Span,
    ) -> Result<Ticket, Error> {
        let batch_rows = self.batching.load().max_batch_size;
        let refused = |e: &Error| trace::failed(&span, e);
        let rejected = |e: &Error| {
            self.counters.failed(e);
            refused(e);
        };
        let admitted = admit(&self.name, &self.metadata, self.max_request_rows(), inputs).inspect_err(rejected)?;
        let pending = |part: Admitted, source: Option<Arc<ImageSource>>| {
            let (reply, answer) = oneshot::channel();
            let pending = Pending {
                tensors: part.tensors,
                rows: part.rows,
                key: part.key,
                deadline: options.deadline,
                priority: options.priority,
                admitted: arrival.at,
                prepared,
                prediction: arrival.prediction,
                source,
                reply,
                traced: Traced::queued(span.clone()),
            };
            (pending, answer)
        };
        // Most requests fit a batch: they allocate nothing for parts.
        if admitted.rows <= batch_rows {
            let (whole, answer) = pending(admitted, source);
            self.queue.submit(std::iter::once(whole)).inspect_err(refused)?;
            return Ok(Ticket::queued(answer, Vec::new()));
        }
        let invalid = || Error::InvalidInput { model: self.name.to_string(), reason: "inputs disagree on rows".into() };
        let parts = admitted.into_parts(batch_rows).ok_or_else(invalid).inspect_err(rejected)?;
        // A part is not made again for another variant: it stays where it queued.
        let (parts, mut answers): (Vec<_>, Vec<_>) = parts.into_iter().map(|part| pending(part, None)).unzip();
        let first = answers.remove(0);
        self.queue.submit(parts.into_iter()).inspect_err(refused)?;
        Ok(Ticket::queued(first, answers))
    }

    /// Runs one request and waits for its answer.
    pub async fn infer(&self, inputs: Inputs, options: InferOptions) -> Result<Output, Error> {
        self.submit(inputs, options)?.await_answer().await
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// Watches a model drain; see [`Model::drain_handle`].
#[derive(Clone)]
pub struct DrainHandle(Arc<Queue>);

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for DrainHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DrainHandle").finish_non_exhaustive()
    }
}

impl DrainHandle {
    /// Whether the model was closed and has answered everything it had queued.
    pub fn is_drained(&self) -> bool {
        self.0.is_drained()
    }
}

/// A backend created and warmed up, ready to serve.
struct LoadedInstance {
    backend: Box<dyn Backend + Send>,
    warmup: Option<Duration>,
    /// Sizes its batches are padded up to (see [`WarmupConfig::pad_to_warmed`]).
    pad_sizes: Vec<usize>,
}

/// Creates one instance's backend and warms it up; on the loader thread. The first
/// instance to finish creating reports the warming phase.
fn load_instance(
    name: &str,
    factory: &BackendFactory,
    batching: BatchingConfig,
    warmup: &WarmupConfig,
    index: usize,
    on_phase: Option<PhaseCallback>,
) -> Result<LoadedInstance, BackendError> {
    let mut backend = create(factory)?;
    if index == 0
        && let Some(on_phase) = on_phase
    {
        on_phase(LoadPhase::Warming);
    }
    let metadata = backend.metadata().clone();
    let max_batch_size = effective_batching(name, &metadata, batching).max_batch_size;
    let config = warmup;
    let warmup = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        warm_up(backend.as_mut(), &metadata, max_batch_size, config)
    })) {
        Ok(took) => took?,
        Err(_) => return Err(BackendError::Panicked("while warming up".into())),
    };
    let warmed =
        if warmup.is_some() { sizes_to_warm(backend.as_ref(), &metadata, max_batch_size, config) } else { Vec::new() };
    let pad_sizes = config.pad_sizes(backend.device(), &warmed);
    Ok(LoadedInstance { backend, warmup, pad_sizes })
}

/// Creates one backend, containing a panic.
fn create(factory: &BackendFactory) -> Result<Box<dyn Backend + Send>, BackendError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| factory())) {
        Ok(result) => result,
        Err(_) => Err(BackendError::Panicked("while loading".into())),
    }
}

/// Loading and teardown yield the CPU to threads that serve. Best effort:
/// where the system refuses, they run at normal priority.
pub(crate) fn lower_priority() {
    // On Linux this applies to the calling thread only.
    if let Err(e) = rustix::process::setpriority_process(None, LOAD_NICENESS) {
        tracing::debug!(error = %e, "cannot lower the loader thread's priority");
    }
}

/// Niceness of loader threads (0 is normal, 19 the lowest priority).
const LOAD_NICENESS: i32 = 19;

fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<(), Error> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(f)
        .map(drop)
        .map_err(|e| Error::thread_start(format!("thread {name}"), e))
}

/// A model with a fixed dimension 0 runs one request per batch.
fn effective_batching(name: &str, metadata: &ModelMetadata, mut batching: BatchingConfig) -> BatchingConfig {
    if !metadata.dynamic_batch() && batching.max_batch_size != 1 {
        tracing::info!(model = name, "dimension 0 is fixed: serving one request per batch");
        batching.max_batch_size = 1;
        batching.preferred_batch_sizes.clear();
    }
    batching
}

/// The answer to a submitted request, to wait for. Dropping it withdraws the request
/// if it has not run yet.
#[must_use = "dropping a ticket withdraws its request"]
pub struct Ticket {
    state: TicketState,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket").finish_non_exhaustive()
    }
}

enum TicketState {
    /// Queued on a model.
    Queued {
        /// The answer to the request, or to its first part where it was split.
        first: Answer,
        /// The other parts' answers, in row order.
        rest: Vec<Answer>,
    },
    /// Its images are being preprocessed; then it is queued and this is its ticket.
    Preprocessing(oneshot::Receiver<Result<Ticket, Error>>),
}

type Answer = oneshot::Receiver<Result<Output, Error>>;

impl Ticket {
    fn queued(first: Answer, rest: Vec<Answer>) -> Ticket {
        Ticket { state: TicketState::Queued { first, rest } }
    }

    /// The ticket of a request handed to the preprocessing pool, which sends the
    /// ticket of the queued request (or why it could not be queued) on `queued`.
    pub(crate) fn preprocessing(queued: oneshot::Receiver<Result<Ticket, Error>>) -> Ticket {
        Ticket { state: TicketState::Preprocessing(queued) }
    }

    /// Waits for the answer.
    pub async fn await_answer(self) -> Result<Output, Error> {
        let mut state = self.state;
        loop {
            match state {
                TicketState::Preprocessing(queued) => {
                    state = queued.await.map_err(|_| Error::ShuttingDown)??.state;
                }
                TicketState::Queued { first, rest } => {
                    let first = first.await.map_err(|_| Error::ShuttingDown)??;
                    let mut others = Vec::with_capacity(rest.len());
                    for answer in rest {
                        others.push(answer.await.map_err(|_| Error::ShuttingDown)??);
                    }
                    return joined(first, others);
                }
            }
        }
    }

    /// Waits for the answer, blocking the thread. Do not call it on an async executor.
    pub fn wait(self) -> Result<Output, Error> {
        let mut state = self.state;
        loop {
            match state {
                TicketState::Preprocessing(queued) => {
                    state = queued.blocking_recv().map_err(|_| Error::ShuttingDown)??.state;
                }
                TicketState::Queued { first, rest } => {
                    let first = first.blocking_recv().map_err(|_| Error::ShuttingDown)??;
                    let others = rest
                        .into_iter()
                        .map(|answer| answer.blocking_recv().map_err(|_| Error::ShuttingDown)?)
                        .collect::<Result<Vec<_>, _>>()?;
                    return joined(first, others);
                }
            }
        }
    }
}

/// The answer from the first part's and the others'; the first alone when it was whole.
fn joined(first: Output, rest: Vec<Output>) -> Result<Output, Error> {
    if rest.is_empty() {
        return Ok(first);
    }
    Output::joined(std::iter::once(first).chain(rest).collect())
}
