//! A loaded model: its instance threads, its batcher, and admission in front of them.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use tokio::sync::oneshot;

use crate::admission::{Admitted, admit};
use crate::answered::Answered;
use crate::backend::{BackendFactory, Device, ModelMetadata};
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

mod config;
mod instance;
mod options;
mod ticket;

use crate::warmup::WarmupConfig;
pub use config::MAX_INSTANCES;
pub(crate) use config::check_instances;
use instance::{LoadedInstance, effective_batching, load_instances, spawn};
pub use options::{Admission, LoadPhase, StartOptions};
pub use ticket::Ticket;

/// A model that serves requests.
pub struct Model {
    name: Arc<str>,
    /// The task it serves as a variant, named in its request spans.
    task: Option<Arc<str>>,
    version: u64,
    metadata: ModelMetadata,
    device: Device,
    warmup: Option<Duration>,
    batching: ArcSwap<BatchingConfig>,
    /// Requests with more rows (or more than the batch in force, if larger) are
    /// refused; those within it but larger than the batch in force are split.
    max_request_rows: usize,
    queue: Arc<Queue>,
    counters: Arc<ModelCounters>,
    preprocess: Option<Arc<ImagePreprocess>>,
    growth: Growth,
    /// Instances being loaded to join the others.
    starting: AtomicUsize,
}

/// What a model's instances are made from, to add more while it serves.
struct Growth {
    factory: BackendFactory,
    warmup: WarmupConfig,
    /// The batching as configured, before a fixed batch dimension lowered it: what an
    /// instance is warmed for.
    configured: BatchingConfig,
    names: Arc<ModelNames>,
    /// One change of instances at a time.
    scaling: Mutex<()>,
}

impl Growth {
    /// Starts `instance`'s worker thread on `queue`, taking batches from now on.
    fn serve(&self, queue: &Arc<Queue>, instance: LoadedInstance) -> Result<(), Error> {
        let (jobs_tx, jobs) = crossbeam_channel::bounded(1);
        let index = queue.add_instance(jobs_tx);
        let (names, queue) = (self.names.clone(), queue.clone());
        spawn(format!("modelless-{}-{index}", self.names.model), move || {
            worker_task(names, instance.backend, jobs, queue, index, instance.pad_sizes)
        })
    }
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
        if let Some(on_phase) = &options.on_phase {
            on_phase(LoadPhase::Loading);
        }
        let loaded = load_instances(name, &factory, &batching, &options.warmup, instances, options.on_phase.clone())?;
        let metadata = loaded.first().map(|l| l.backend.metadata().clone()).ok_or(Error::ShuttingDown)?;
        if loaded.iter().any(|l| *l.backend.metadata() != metadata) {
            return Err(load_error(BackendError::InputMismatch("instances disagree on the model's inputs".into())));
        }
        let device = loaded.first().map_or(Device::Cpu, |l| l.backend.device());
        let configured = batching.clone();
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
        let queue =
            Queue::new(names.model.clone(), batching.clone(), Vec::new(), options.on_answer.clone(), counters.clone());
        queue.set_cost(options.latency_fit.and_then(BatchCost::new));
        let growth = Growth { factory, warmup: options.warmup.clone(), configured, names, scaling: Mutex::new(()) };
        for instance in loaded {
            growth.serve(&queue, instance)?;
        }
        let timer_queue = queue.clone();
        spawn(format!("modelless-{name}-timer"), move || timer_task(timer_queue))?;
        Ok(Model {
            name: growth.names.model.clone(),
            task: options.task.clone(),
            version: options.version,
            metadata,
            device,
            warmup,
            batching: ArcSwap::from_pointee(batching),
            max_request_rows,
            queue,
            counters,
            preprocess: options.preprocess.clone(),
            growth,
            starting: AtomicUsize::new(0),
        })
    }

    /// Brings the instances that take batches to `wanted`, while requests flow. Added
    /// ones are created and warmed on loader threads of the lowest priority, and take
    /// batches once warm; removed ones finish the batch they run, and no request waits
    /// for one that leaves. Blocks until the added ones serve; one change at a time.
    /// If an added instance fails to load, none is added and the error is returned.
    pub fn set_instances(&self, wanted: usize) -> Result<(), Error> {
        check_instances(&self.name, wanted)?;
        let _one_at_a_time = self.growth.scaling.lock().unwrap_or_else(PoisonError::into_inner);
        let serving = self.queue.instances();
        if wanted <= serving {
            self.queue.retire_instances(serving - wanted);
            return Ok(());
        }
        let added = wanted - serving;
        self.starting.store(added, Ordering::Relaxed);
        let loaded =
            load_instances(&self.name, &self.growth.factory, &self.growth.configured, &self.growth.warmup, added, None);
        self.starting.store(0, Ordering::Relaxed);
        let loaded = loaded?;
        if let Some(other) = loaded.iter().find(|l| *l.backend.metadata() != self.metadata) {
            let reason = format!(
                "an added instance takes {:?}, the others {:?}",
                other.backend.metadata().inputs,
                self.metadata.inputs
            );
            return Err(Error::Load {
                model: self.name.to_string(),
                source: Arc::new(BackendError::InputMismatch(reason)),
            });
        }
        for instance in loaded {
            self.growth.serve(&self.queue, instance)?;
        }
        tracing::info!(model = %self.name, instances = wanted, "instances added");
        Ok(())
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

    /// Instances that take batches.
    pub fn instances(&self) -> usize {
        self.queue.instances()
    }

    /// Instances being loaded and warmed to join them.
    pub fn instances_starting(&self) -> usize {
        self.starting.load(Ordering::Relaxed)
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

    /// Starts admission again from the batch cost, forgetting how answers came
    /// against their predictions: the model was just switched to.
    pub fn forget_overruns(&self) {
        self.queue.forget_overruns();
    }

    /// Judges its refusals' need by what it answers a second with the photos
    /// requests carry (`None`: by its profile's line).
    pub fn set_photo_capacity(&self, per_s: Option<f64>) {
        self.queue.set_photo_capacity(per_s);
    }

    /// Judges the refusals of a second that has ended, though nothing was refused or
    /// answered since (see [`crate::batching::RefusalLedger`]).
    pub fn settle_refusals(&self) {
        self.queue.settle_refusals();
    }

    /// Counts a request refused before it reached the queue (its images could not
    /// be ready in time) among the refusals whose need is judged.
    pub(crate) fn note_refusal(&self) {
        self.queue.note_refusal();
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

    /// Whether a request of `rows` rows and `priority`, queued `preparing` from now,
    /// would be admitted to make `deadline` were its wait `slowed_by` times what the
    /// batches' lines predict; nothing is queued or counted.
    pub(crate) fn would_admit(
        &self,
        rows: usize,
        priority: Priority,
        deadline: Instant,
        preparing: Duration,
        slowed_by: f64,
    ) -> bool {
        self.queue.would_admit(rows, priority, deadline, preparing, slowed_by)
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

#[cfg(test)]
mod tests;
