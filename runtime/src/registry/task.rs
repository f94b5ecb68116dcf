//! A task and its variants: which variant serves, their versions and states, and the
//! switches between them.
//!
//! The request path reads one `ArcSwap` of [`Routes`] (the ready variants and which
//! one is active) and submits to a model it holds a handle on, so a switch never
//! fails a request: the old model only closes when the last handle is dropped, and
//! then still answers what it queued. The control path (switch, load, unload) loads
//! and warms a model off the request path, then publishes new routes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
pub use modelless_policy_abi::VariantState;
use modelless_policy_abi::{LatencyFit, Profile, RunTotals, ServingKnobs, VariantCost, VariantSnapshot};

use super::config::{TaskConfig, VariantConfig};
use super::images::{self, ImageServices};
use super::route::choose;
use crate::backend::{BackendFactory, ModelMetadata};
use crate::batching::{BatchingConfig, MAX_QUEUE_DELAY_US};
use crate::classify::read_labels;
use crate::error::{BackendError, Error};
use crate::metrics::{ModelFailures, TaskTraffic, serving_metrics};
use crate::model::{Admission, DrainHandle, LoadPhase, Model, StartOptions, Ticket};
use crate::preprocess::PreprocessPool;
use crate::request::{InferOptions, Inputs, Slo};
use crate::signature::{SignatureMismatch, bound_factory};
use crate::trace;

/// Makes the backend factory of a variant's version (its config, and the model file
/// of that version).
pub type MakeBackend = Arc<dyn Fn(&VariantConfig, &Path) -> BackendFactory + Send + Sync>;

/// Finds the profile of a variant's version (its config, and the model file of that
/// version) as it loads: a stored one, or one measured then; `None` for none.
pub type FindProfile = Arc<dyn Fn(&VariantConfig, &Path) -> Option<Profile> + Send + Sync>;

/// One version of a variant, as [`Task::status`] reports it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VersionStatus {
    /// Version number, from 1.
    pub version: u64,
    /// Its state.
    pub state: VariantState,
    /// Its model file.
    pub path: PathBuf,
    /// How long the slowest instance took to warm up.
    pub warmup: Option<Duration>,
    /// Memory it is estimated to hold while loaded (twice its file: weights, and
    /// the copies sessions pack them into).
    pub memory_bytes: u64,
    /// Why it failed.
    pub error: Option<String>,
    /// Its profiled maximal throughput, in requests per second.
    pub max_throughput_per_s: Option<f64>,
    /// Its profiled warm latency against batch size.
    pub latency_fit: Option<LatencyFit>,
    /// How its queue admits requests with a deadline, while it is loaded: by its
    /// profiled batch cost, or (without a profile) by the queue's room alone.
    pub admission: Option<Admission>,
}

/// One variant, as [`Task::status`] reports it.
#[derive(Clone, Debug, serde::Serialize)]
pub struct VariantStatus {
    /// Its name.
    pub name: String,
    /// Its accuracy.
    pub accuracy: f64,
    /// The version that serves it, if one is ready.
    pub current: Option<u64>,
    /// Its versions, oldest first.
    pub versions: Vec<VersionStatus>,
}

impl VariantStatus {
    /// State of the serving version, or `Unloaded`.
    pub fn state(&self) -> VariantState {
        self.current
            .and_then(|c| self.versions.iter().find(|v| v.version == c))
            .map_or(VariantState::Unloaded, |v| v.state)
    }
}

/// A task's variants and which one is active.
#[derive(Clone, Debug, serde::Serialize)]
pub struct TaskStatus {
    /// The task.
    pub name: String,
    /// The active variant.
    pub active: String,
    /// Its serving version.
    pub active_version: u64,
    /// All variants, cheapest first.
    pub variants: Vec<VariantStatus>,
    /// Requests waiting in the active variant's queue.
    pub queue_length: u64,
    /// The latency target its callers expect, in ms.
    pub latency_slo_ms: Option<f64>,
    /// The input that takes encoded images, where its variants preprocess images.
    pub image_input: Option<String>,
    /// The tensor the active variant's preprocessing makes of one image (batch of 1).
    pub image_shape: Option<Vec<usize>>,
}

impl TaskStatus {
    /// The variant called `name`.
    pub fn variant(&self, name: &str) -> Option<&VariantStatus> {
        self.variants.iter().find(|v| v.name == name)
    }
}

/// What a switch did.
#[derive(Clone, Copy, Debug)]
pub struct SwitchReport {
    /// Whether the variant had to be loaded (and warmed up) first.
    pub loaded: bool,
    /// From the call until the variant served new requests.
    pub took: Duration,
    /// Warm-up time, when it was loaded.
    pub warmup: Option<Duration>,
    /// Requests that waited for the variant replaced and moved to this one.
    pub moved: usize,
}

/// What the request path reads: ready variants in configured order, their costs when
/// every one is profiled, and the active one.
struct Routes {
    ready: Vec<Arc<Model>>,
    accuracies: Vec<f64>,
    /// Seconds per request at maximal throughput.
    costs: Option<Vec<f64>>,
    names: Vec<String>,
    active: usize,
}

struct VersionEntry {
    path: PathBuf,
    state: VariantState,
    model: Option<Arc<Model>>,
    drain: Option<DrainHandle>,
    warmup: Option<Duration>,
    memory_bytes: u64,
    error: Option<String>,
    profile: Option<Arc<Profile>>,
    /// How long its last load took, warm-up included.
    load_time: Option<Duration>,
}

struct VariantSlot {
    config: VariantConfig,
    current: Option<u64>,
    /// The newest version that loaded: what the variant reloads after being unloaded.
    latest: Option<u64>,
    versions: BTreeMap<u64, VersionEntry>,
    next_version: u64,
    last_active: Instant,
    /// Why its model does not fit the task, once a load found it does not: it is then
    /// neither routed nor switched to until a new version that fits is loaded.
    misfit: Option<Arc<SignatureMismatch>>,
}

struct Inner {
    active: usize,
    variants: Vec<VariantSlot>,
}

/// A task: its variants, the active one, and routing between them.
pub struct Task {
    name: Arc<str>,
    keep_warm_bytes: u64,
    make_backend: MakeBackend,
    find_profile: Option<FindProfile>,
    traffic: Arc<TaskTraffic>,
    /// Requests the task refused before any variant took them.
    refusals: ModelFailures,
    latency_slo_ms: Option<f64>,
    /// Class labels for classification answers.
    labels: Option<Arc<[String]>>,
    /// What callers send and get: declared, or the first variant's once it loads.
    signature: Arc<OnceLock<ModelMetadata>>,
    /// Where requests that carry images are preprocessed.
    images: ImageServices,
    routes: ArcSwapOption<Routes>,
    inner: Arc<Mutex<Inner>>,
    /// One control operation (switch, load, unload) at a time.
    control: Mutex<()>,
}

impl Task {
    /// Loads the active variant (and those marked `preload`) and returns the task,
    /// ready to serve. Fails if the active variant cannot be loaded.
    pub fn start(config: TaskConfig, make_backend: MakeBackend) -> Result<Task, Error> {
        Task::start_profiled(config, make_backend, None)
    }

    /// Like [`Task::start`]; each version that loads gets the profile `find_profile`
    /// finds for it. Once every ready variant has one, requests that need more
    /// accuracy than the active variant has go to the one with the lowest profiled
    /// cost rather than the first in configured order.
    pub fn start_profiled(
        config: TaskConfig,
        make_backend: MakeBackend,
        find_profile: Option<FindProfile>,
    ) -> Result<Task, Error> {
        Task::start_with_pool(config, make_backend, find_profile, PreprocessPool::shared_default()?)
    }

    /// Like [`Task::start_profiled`]; requests that carry images are preprocessed on `pool`.
    pub fn start_with_pool(
        config: TaskConfig,
        make_backend: MakeBackend,
        find_profile: Option<FindProfile>,
        pool: Arc<PreprocessPool>,
    ) -> Result<Task, Error> {
        config.validate()?;
        let active = config.active.as_deref().and_then(|a| config.variant_index(a)).unwrap_or(0);
        let now = Instant::now();
        let variants = config
            .variants
            .iter()
            .map(|v| VariantSlot {
                config: v.clone(),
                current: None,
                latest: None,
                versions: BTreeMap::new(),
                next_version: 1,
                last_active: now,
                misfit: None,
            })
            .collect();
        let signature = Arc::new(OnceLock::new());
        if let Some(declared) = &config.signature {
            let _ = signature.set(declared.metadata());
        }
        let traffic = Arc::new(TaskTraffic::default());
        let task = Task {
            name: Arc::from(config.name.as_str()),
            keep_warm_bytes: config.keep_warm_mib.saturating_mul(1 << 20),
            make_backend,
            find_profile,
            images: ImageServices { pool, traffic: traffic.clone() },
            traffic,
            refusals: serving_metrics().task_refusals(&config.name),
            latency_slo_ms: config.latency_slo_ms,
            labels: config.labels.as_deref().map(read_labels).transpose()?,
            signature,
            routes: ArcSwapOption::empty(),
            inner: Arc::new(Mutex::new(Inner { active, variants })),
            control: Mutex::new(()),
        };
        let version = task.load(active, None)?;
        task.promote(active, version);
        for (i, v) in config.variants.iter().enumerate() {
            if v.preload && i != active {
                match task.load(i, None) {
                    Ok(version) => task.promote(i, version),
                    Err(e) => tracing::warn!(task = %task.name, variant = %v.name, error = %e, "preload failed"),
                }
            }
        }
        task.settle();
        Ok(task)
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// What its callers send and get, whatever variant serves: the declared signature,
    /// or the first variant's (with its batch dimension open, and the height and width
    /// of the input it fills from images).
    pub fn signature(&self) -> Result<&ModelMetadata, Error> {
        self.signature.get().ok_or(Error::ShuttingDown)
    }

    /// Its class labels, if it has a label file.
    pub fn labels(&self) -> Option<Arc<[String]>> {
        self.labels.clone()
    }

    /// Whether `variant` can serve the task: known, and not found to misfit its
    /// signature. A policy's switch to one that cannot is refused with this error.
    pub fn can_serve(&self, variant: &str) -> Result<(), Error> {
        self.servable_index(variant).map(drop)
    }

    /// The index of `variant`, unless it is unknown or known not to fit.
    fn servable_index(&self, variant: &str) -> Result<usize, Error> {
        let index = self.index_of(variant)?;
        match &self.lock().variants[index].misfit {
            Some(mismatch) => Err(Error::DoesNotFitTask(mismatch.clone())),
            None => Ok(index),
        }
    }

    /// Checks and queues a request: the active variant serves it, or, when it asks for
    /// more accuracy than that, the cheapest ready variant that has it.
    pub fn submit(&self, inputs: Inputs, slo: &Slo) -> Result<Ticket, Error> {
        let now = Instant::now();
        let routes = self.routes.load();
        let routes = routes.as_ref().ok_or(Error::ShuttingDown)?;
        let Some(chosen) = choose(&routes.accuracies, routes.costs.as_deref(), routes.active, slo.min_accuracy) else {
            self.traffic.refused();
            let error = Error::NoVariantMeetsSlo {
                task: self.name.to_string(),
                min_accuracy: slo.min_accuracy.unwrap_or(f64::NAN),
                available: routes.names.iter().cloned().zip(routes.accuracies.iter().copied()).collect(),
            };
            self.refusals.failed(&error);
            return Err(error);
        };
        self.submit_counted(&routes.ready[chosen], inputs, slo.options(now))
    }

    /// Queues a request on `model`, counted in the task's traffic; one that carries
    /// images goes through the preprocessing pool first.
    fn submit_counted(&self, model: &Arc<Model>, inputs: Inputs, options: InferOptions) -> Result<Ticket, Error> {
        let span = trace::request(&self.name, model.name(), options.priority, options.deadline);
        if inputs.has_images() {
            return images::submit(&self.images, model.clone(), inputs, options, span);
        }
        // Counted in flight before it can be answered, so the count never dips below zero.
        self.traffic.admitted();
        let submitted = model.submit_in(inputs, options, span);
        if let Err(error) = &submitted {
            self.traffic.unadmitted(error);
        }
        submitted
    }

    /// Checks and queues a request for `variant` itself, bypassing routing; refused as
    /// not ready when the variant is not loaded.
    pub fn submit_to(&self, variant: &str, inputs: Inputs, slo: &Slo) -> Result<Ticket, Error> {
        let model = self.variant_model(variant)?;
        self.submit_counted(&model, inputs, slo.options(Instant::now()))
    }

    /// The serving version of `variant`: `NotReady` when it is not loaded.
    pub fn variant_model(&self, variant: &str) -> Result<Arc<Model>, Error> {
        let routes = self.routes.load();
        let routes = routes.as_ref().ok_or(Error::ShuttingDown)?;
        if let Some(i) = routes.names.iter().position(|n| n == variant) {
            return Ok(routes.ready[i].clone());
        }
        self.index_of(variant)?;
        Err(Error::NotReady { model: variant.to_string() })
    }

    /// The serving version of the active variant.
    pub fn active_model(&self) -> Result<Arc<Model>, Error> {
        let routes = self.routes.load();
        let routes = routes.as_ref().ok_or(Error::ShuttingDown)?;
        routes.ready.get(routes.active).cloned().ok_or(Error::ShuttingDown)
    }

    /// Whether the task has a variant called `variant`.
    pub fn has_variant(&self, variant: &str) -> bool {
        self.index_of(variant).is_ok()
    }

    /// Makes `variant` the active one: loads and warms it first unless it is ready,
    /// then routes new requests to it. The previous variant finishes what it queued
    /// and stays loaded within the task's keep-warm memory.
    pub fn switch_to(&self, variant: &str) -> Result<SwitchReport, Error> {
        let start = Instant::now();
        let _control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let index = self.servable_index(variant)?;
        let ready = self.lock().variants[index].current.is_some();
        let mut warmup = None;
        if !ready {
            let version = self.load(index, None)?;
            warmup = self.lock().variants[index].versions.get(&version).and_then(|v| v.warmup);
            self.promote(index, version);
        }
        let previous = {
            let mut inner = self.lock();
            let now = Instant::now();
            let previous = inner.active;
            inner.variants[previous].last_active = now;
            inner.variants[index].last_active = now;
            inner.active = index;
            if previous != index {
                let (from, to) = (&inner.variants[previous].config.name, &inner.variants[index].config.name);
                serving_metrics().variant_switched(&self.name, from, to);
            }
            previous
        };
        self.settle();
        let moved = if previous == index { 0 } else { self.move_waiting(previous, index) };
        Ok(SwitchReport { loaded: !ready, took: start.elapsed(), warmup, moved })
    }

    /// Loads a new version of `variant` from `path` and, once it is warm, makes it the
    /// one that serves the variant; the old version drains. If the new version cannot
    /// be loaded, the old one keeps serving and the error is returned.
    pub fn load_version(&self, variant: &str, path: impl Into<PathBuf>) -> Result<u64, Error> {
        let _control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let index = self.index_of(variant)?;
        let version = self.load(index, Some(path.into()))?;
        self.promote(index, version);
        self.settle();
        Ok(version)
    }

    /// Loads `variant` (if it is not) without making it active.
    pub fn load_variant(&self, variant: &str) -> Result<(), Error> {
        let _control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let index = self.servable_index(variant)?;
        if self.lock().variants[index].current.is_none() {
            let version = self.load(index, None)?;
            self.promote(index, version);
            self.settle();
        }
        Ok(())
    }

    /// Unloads `variant`; it drains first. The active variant cannot be unloaded.
    pub fn unload_variant(&self, variant: &str) -> Result<(), Error> {
        let _control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let index = self.index_of(variant)?;
        {
            let mut inner = self.lock();
            if inner.active == index {
                return Err(Error::Config(format!(
                    "task `{}`: `{variant}` is active; switch to another variant first",
                    self.name
                )));
            }
            retire_current(&mut inner.variants[index]);
        }
        self.publish();
        Ok(())
    }

    /// The latency target its callers expect, in ms.
    pub fn latency_slo_ms(&self) -> Option<f64> {
        self.latency_slo_ms
    }

    /// The active variant and its serving knobs, and the requests waiting in its queue.
    pub fn serving(&self) -> (ServingKnobs, u64) {
        let routes = self.routes.load();
        let Some(routes) = routes.as_ref() else { return (ServingKnobs::default(), 0) };
        let model = &routes.ready[routes.active];
        let batching = model.batching();
        let knobs = ServingKnobs {
            variant: routes.names[routes.active].clone(),
            max_batch_size: batching.max_batch_size as u32,
            max_queue_delay_us: batching.max_queue_delay_us,
            instances: model.instances() as u32,
        };
        (knobs, model.queued() as u64)
    }

    /// Changes the active variant's batch size and queue delay, the batch size clamped
    /// to between 1 and the variant's configured one (what its memory was sized for),
    /// the delay to [`MAX_QUEUE_DELAY_US`]; returns the knobs in force.
    pub fn configure_active(
        &self,
        max_batch_size: Option<u32>,
        max_queue_delay_us: Option<u64>,
    ) -> Result<BatchingConfig, Error> {
        let _control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let (model, ceiling) = {
            let inner = self.lock();
            let slot = &inner.variants[inner.active];
            let entry = slot.current.and_then(|c| slot.versions.get(&c));
            let model = entry.and_then(|e| e.model.clone());
            let profile = entry.and_then(|e| e.profile.as_deref());
            (model.ok_or(Error::ShuttingDown)?, memory_capped(slot.config.batching.clone(), profile).max_batch_size)
        };
        let mut batching = model.batching();
        if let Some(rows) = max_batch_size {
            batching.max_batch_size = (rows as usize).clamp(1, ceiling.max(1));
            batching.preferred_batch_sizes.retain(|&b| b <= batching.max_batch_size);
        }
        if let Some(delay) = max_queue_delay_us {
            batching.max_queue_delay_us = delay.min(MAX_QUEUE_DELAY_US);
        }
        model.configure(batching.clone())?;
        Ok(batching)
    }

    /// Every variant as a policy sees it: accuracy, state, and what it costs.
    pub fn variant_snapshots(&self) -> Vec<VariantSnapshot> {
        let inner = self.lock();
        inner
            .variants
            .iter()
            .map(|slot| {
                let entry = slot.current.and_then(|c| slot.versions.get(&c));
                let profile = entry.and_then(|e| e.profile.as_ref());
                let cost = VariantCost {
                    fit: profile.and_then(|p| p.fit),
                    max_throughput: profile.and_then(|p| p.max_throughput),
                    load_ms: entry.and_then(|e| e.load_time).map(|t| t.as_secs_f64() * 1e3),
                    memory_bytes: entry.map(|e| e.memory_bytes).filter(|&b| b > 0),
                    max_safe_batch: profile.and_then(|p| p.max_safe_batch),
                };
                let known = cost != VariantCost::default();
                // The counters are the variant's, whichever version ran the batches.
                let runs = entry.and_then(|e| e.model.as_ref()).map(|model| {
                    let totals = model.counters().totals();
                    RunTotals {
                        batches: totals.executions,
                        rows: totals.inferences,
                        run_ms: totals.batch_run.as_secs_f64() * 1e3,
                    }
                });
                let state = match (entry, &slot.misfit) {
                    (Some(e), _) => e.state,
                    (None, Some(_)) => VariantState::Failed,
                    (None, None) => VariantState::Unloaded,
                };
                VariantSnapshot {
                    name: slot.config.name.clone(),
                    accuracy: slot.config.accuracy,
                    state,
                    // Where it runs if loaded (a variant may have fallen back to the CPU).
                    device: entry.and_then(|e| e.model.as_ref()).map_or(slot.config.device, |m| m.device()).name(),
                    profile: known.then_some(cost),
                    runs,
                }
            })
            .collect()
    }

    /// The pool its requests' images are preprocessed on.
    pub fn preprocess_pool(&self) -> &Arc<PreprocessPool> {
        &self.images.pool
    }

    /// The task's traffic: demand, requests in flight, and each tick's answers.
    pub fn traffic(&self) -> &TaskTraffic {
        &self.traffic
    }

    /// The profile of `variant`'s serving version, if it has one.
    pub fn profile(&self, variant: &str) -> Result<Option<Arc<Profile>>, Error> {
        let index = self.index_of(variant)?;
        let inner = self.lock();
        let slot = &inner.variants[index];
        Ok(slot.current.and_then(|c| slot.versions.get(&c)).and_then(|e| e.profile.clone()))
    }

    /// Variants, their versions and states.
    pub fn status(&self) -> TaskStatus {
        let queue_length = self.serving().1;
        let routes = self.routes.load();
        let active_model = routes.as_ref().map(|r| &r.ready[r.active]);
        let image_input = active_model.and_then(|m| m.image_input().map(str::to_string));
        let image_shape = active_model.and_then(|m| m.preprocess().map(|p| p.shape(1)));
        let mut inner = self.lock();
        mark_drained(&mut inner);
        let active = &inner.variants[inner.active];
        TaskStatus {
            name: self.name.to_string(),
            queue_length,
            latency_slo_ms: self.latency_slo_ms,
            image_input,
            image_shape,
            active: active.config.name.clone(),
            active_version: active.current.unwrap_or(0),
            variants: inner
                .variants
                .iter()
                .map(|slot| VariantStatus {
                    name: slot.config.name.clone(),
                    accuracy: slot.config.accuracy,
                    current: slot.current,
                    versions: slot
                        .versions
                        .iter()
                        .map(|(&version, e)| VersionStatus {
                            version,
                            state: e.state,
                            path: e.path.clone(),
                            warmup: e.warmup,
                            memory_bytes: e.memory_bytes,
                            error: e.error.clone(),
                            max_throughput_per_s: e
                                .profile
                                .as_ref()
                                .and_then(|p| p.max_throughput)
                                .map(|t| t.requests_per_s),
                            latency_fit: e.profile.as_ref().and_then(|p| p.fit),
                            admission: e.model.as_ref().map(|m| m.admission()),
                        })
                        .collect(),
                })
                .collect(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn index_of(&self, variant: &str) -> Result<usize, Error> {
        self.lock()
            .variants
            .iter()
            .position(|s| s.config.name == variant)
            .ok_or_else(|| Error::UnknownVariant { task: self.name.to_string(), variant: variant.to_string() })
    }

    /// Loads and warms variant `index`: a new version from `path`, or else its newest
    /// version again (its configured file at first), recording the states. Holds no
    /// lock while the model loads.
    fn load(&self, index: usize, path: Option<PathBuf>) -> Result<u64, Error> {
        let (config, version, path) = {
            let mut inner = self.lock();
            let slot = &mut inner.variants[index];
            let reload = path.is_none().then_some(slot.latest).flatten();
            let (version, path) = match reload.and_then(|v| slot.versions.get(&v).map(|e| (v, e.path.clone()))) {
                Some(again) => again,
                None => {
                    slot.next_version += 1;
                    (slot.next_version - 1, path.unwrap_or_else(|| slot.config.path.clone()))
                }
            };
            slot.versions.insert(
                version,
                VersionEntry {
                    path: path.clone(),
                    state: VariantState::Loading,
                    model: None,
                    drain: None,
                    warmup: None,
                    memory_bytes: 0,
                    error: None,
                    profile: None,
                    load_time: None,
                },
            );
            (slot.config.clone(), version, path)
        };
        let inner = self.inner.clone();
        let on_phase = Arc::new(move |phase: LoadPhase| {
            if phase == LoadPhase::Warming {
                let mut inner = inner.lock().unwrap_or_else(PoisonError::into_inner);
                if let Some(entry) = inner.variants[index].versions.get_mut(&version) {
                    entry.state = VariantState::Warming;
                }
            }
        });
        // Before the model starts, so that a profile measured now has the cores to itself.
        let profile = self.find_profile.as_ref().and_then(|find| find(&config, &path)).map(Arc::new);
        let options = StartOptions {
            task: Some(self.name.clone()),
            version,
            warmup: config.warmup.clone(),
            on_phase: Some(on_phase),
            on_answer: Some(self.traffic.answer_hook()),
            max_request_rows: Some(config.batching.max_batch_size),
            labels: self.labels.clone(),
            preprocess: config.preprocess.clone().map(Arc::new),
            latency_fit: profile.as_ref().and_then(|p| p.fit),
        };
        let factory = bound_factory(
            (self.make_backend)(&config, &path),
            self.name.clone(),
            config.name.clone(),
            config.tensor_maps(),
            config.preprocess.as_ref().map(images::image_input_of),
            self.signature.clone(),
        );
        let loading = Instant::now();
        let batching = memory_capped(config.batching.clone(), profile.as_deref());
        let started =
            Model::start_with(&config.name, factory, config.instances, batching, options).and_then(|model| match model
                .preprocess()
            {
                Some(preprocess) => images::check_fits(&model, preprocess).map(|()| model),
                None => Ok(model),
            });
        let load_time = loading.elapsed();
        let mut inner = self.lock();
        let slot = &mut inner.variants[index];
        let started = started.map_err(|e| match misfit_of(&e) {
            Some(mismatch) => {
                slot.misfit = Some(mismatch.clone());
                Error::DoesNotFitTask(mismatch)
            }
            None => e,
        });
        if started.is_ok() {
            slot.latest = slot.latest.max(Some(version));
            slot.misfit = None;
        }
        let entry = slot.versions.get_mut(&version).ok_or(Error::ShuttingDown)?;
        match started {
            Ok(model) => {
                entry.state = VariantState::Ready;
                entry.error = None;
                entry.warmup = model.warmup_time();
                // Weights dominate; sessions hold about one more copy, packed for their kernels.
                entry.memory_bytes = std::fs::metadata(&path).map_or(0, |m| 2 * m.len());
                entry.model = Some(Arc::new(model));
                entry.profile = profile;
                entry.load_time = Some(load_time);
                tracing::info!(task = %self.name, variant = %config.name, version, warmup = ?entry.warmup, "ready");
                Ok(version)
            }
            Err(e) => {
                entry.state = VariantState::Failed;
                entry.error = Some(e.to_string());
                tracing::warn!(task = %self.name, variant = %config.name, version, error = %e, "load failed");
                Err(e)
            }
        }
    }

    /// Makes a ready `version` the one that serves variant `index`; the one before drains.
    fn promote(&self, index: usize, version: u64) {
        let mut inner = self.lock();
        let slot = &mut inner.variants[index];
        if slot.current != Some(version) {
            retire_current(slot);
            slot.current = Some(version);
        }
        drop(inner);
        self.publish();
    }

    /// Publishes routes, then unloads inactive variants beyond the keep-warm memory,
    /// least recently active first, and publishes again if any went.
    fn settle(&self) {
        self.publish();
        let evicted = {
            let mut inner = self.lock();
            let active = inner.active;
            let mut evicted = false;
            loop {
                let warm: Vec<(usize, u64, Instant)> = inner
                    .variants
                    .iter()
                    .enumerate()
                    .filter(|&(i, _)| i != active)
                    .filter_map(|(i, s)| {
                        let entry = s.versions.get(&s.current?)?;
                        Some((i, entry.memory_bytes, s.last_active))
                    })
                    .collect();
                let held: u64 = warm.iter().map(|w| w.1).sum();
                // With no keep-warm memory nothing stays, whatever its estimated size.
                if held <= self.keep_warm_bytes && (self.keep_warm_bytes > 0 || warm.is_empty()) {
                    break;
                }
                let Some(&(oldest, ..)) = warm.iter().min_by_key(|w| w.2) else { break };
                tracing::info!(task = %self.name, variant = %inner.variants[oldest].config.name, "unloading: over keep-warm memory");
                retire_current(&mut inner.variants[oldest]);
                evicted = true;
            }
            evicted
        };
        if evicted {
            self.publish();
        }
    }

    /// Moves the requests waiting for variant `from` to `to`, which serves the task
    /// now: they were sent to the task, not to a variant, and the variant replaced is
    /// the one that could not keep up, whose queue would otherwise be answered late.
    /// Returns how many moved.
    fn move_waiting(&self, from: usize, to: usize) -> usize {
        let (from, to) = {
            let inner = self.lock();
            let model =
                |slot: &VariantSlot| slot.current.and_then(|c| slot.versions.get(&c)).and_then(|e| e.model.clone());
            (model(&inner.variants[from]), model(&inner.variants[to]))
        };
        match (from, to) {
            (Some(from), Some(to)) => {
                let target = to.clone();
                let mut remake = |pending, enqueued| images::remake(&self.images, target.clone(), pending, enqueued);
                from.move_waiting(&to, Some(&mut remake))
            }
            _ => 0,
        }
    }

    /// Stores the routes of what is ready now.
    fn publish(&self) {
        let inner = self.lock();
        let mut routes =
            Routes { ready: Vec::new(), accuracies: Vec::new(), costs: Some(Vec::new()), names: Vec::new(), active: 0 };
        for (i, slot) in inner.variants.iter().enumerate() {
            let Some(entry) = slot.current.and_then(|c| slot.versions.get(&c)) else { continue };
            let Some(model) = entry.model.clone() else { continue };
            let throughput = entry.profile.as_ref().and_then(|p| p.max_throughput).map(|t| t.requests_per_s);
            match (throughput, routes.costs.as_mut()) {
                (Some(per_s), Some(costs)) if per_s > 0.0 => costs.push(1.0 / per_s),
                _ => routes.costs = None,
            }
            if i == inner.active {
                routes.active = routes.ready.len();
            }
            routes.accuracies.push(slot.config.accuracy);
            routes.names.push(slot.config.name.clone());
            routes.ready.push(model);
        }
        self.routes.store(Some(Arc::new(routes)));
    }
}

/// Stops variant `slot`'s serving version from taking new requests: its model drains
/// once the handles requests in flight hold are dropped.
fn retire_current(slot: &mut VariantSlot) {
    if let Some(entry) = slot.current.take().and_then(|c| slot.versions.get_mut(&c))
        && let Some(model) = entry.model.take()
    {
        entry.drain = Some(model.drain_handle());
        entry.state = VariantState::Draining;
    }
}

/// The mismatch a load failed with, if it failed because the model does not fit.
fn misfit_of(error: &Error) -> Option<Arc<SignatureMismatch>> {
    if let Error::Load { source, .. } = error
        && let BackendError::DoesNotFitTask(mismatch) = &**source
    {
        return Some(Arc::new((**mismatch).clone()));
    }
    None
}

/// Versions that finished draining become unloaded.
fn mark_drained(inner: &mut Inner) {
    for entry in inner.variants.iter_mut().flat_map(|s| s.versions.values_mut()) {
        if entry.state == VariantState::Draining && entry.drain.as_ref().is_none_or(DrainHandle::is_drained) {
            entry.state = VariantState::Unloaded;
            entry.drain = None;
        }
    }
}

/// `batching` with its largest batch no larger than the largest that fits the device
/// memory `profile` measured: a batch predicted not to fit is never formed, and a
/// request with more rows than that (within the configured `max_batch_size`) runs split.
pub(crate) fn memory_capped(mut batching: BatchingConfig, profile: Option<&Profile>) -> BatchingConfig {
    if let Some(fits) = profile.and_then(|p| p.max_safe_batch).map(|b| b.max(1) as usize)
        && fits < batching.max_batch_size
    {
        tracing::info!(configured = batching.max_batch_size, fits, "batches capped to what fits in memory");
        batching.max_batch_size = fits;
        batching.preferred_batch_sizes.retain(|&b| b <= fits);
    }
    batching
}

#[cfg(test)]
mod tests {
    use modelless_policy_abi::{ProfileKey, Throughput};

    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use crate::profile::MemoryProbe;
    use crate::tensor::Tensor;
    use crate::warmup::WarmupConfig;

    /// Variants v0, v1, v2 of accuracy 60, 70, 80, all loaded, v0 active.
    fn task(find_profile: Option<FindProfile>) -> Task {
        let mut config = TaskConfig::new("classify");
        for (i, accuracy) in [60.0, 70.0, 80.0].into_iter().enumerate() {
            let variant = VariantConfig::new(format!("v{i}"), "fake", accuracy).with_warmup(WarmupConfig::disabled());
            config = config.with_variant(variant.with_preload(true));
        }
        let make: MakeBackend = Arc::new(|_, _| FakeBackend::factory(FakeConfig::default(), BatchLog::default()));
        Task::start_profiled(config, make, find_profile).unwrap()
    }

    /// Profiles with these maximal throughputs by variant name; none for the others.
    fn profiles(throughputs: &'static [(&'static str, f64)]) -> FindProfile {
        Arc::new(move |variant, _| {
            let (_, per_s) = throughputs.iter().find(|(name, _)| *name == variant.name)?;
            Some(Profile {
                key: ProfileKey { model_sha256: "00".into(), device: "cpu".into(), settings: "{}".into() },
                points: Vec::new(),
                fit: None,
                max_throughput: Some(Throughput { requests_per_s: *per_s, batch_size: 1 }),
                memory_budget_bytes: None,
                max_safe_batch: None,
                first_runs: Vec::new(),
            })
        })
    }

    #[test]
    fn batches_are_capped_to_what_fits_the_measured_memory_and_larger_requests_run_split() {
        let fake =
            FakeConfig { memory_per_row: 1 << 20, per_batch: Duration::from_millis(20), ..FakeConfig::default() };
        let log = BatchLog::default();
        let make: MakeBackend = {
            let log = log.clone();
            Arc::new(move |_, _| FakeBackend::factory(fake.clone(), log.clone()))
        };
        let batching = BatchingConfig::default().with_max_batch_size(8);
        let variant =
            VariantConfig::new("v", "fake", 50.0).with_batching(batching).with_warmup(WarmupConfig::disabled());
        // What the profiler stores for a memory budget that fits 3 rows.
        let find: FindProfile = Arc::new(|_, _| {
            Some(Profile {
                key: ProfileKey { model_sha256: "00".into(), device: "cuda:0".into(), settings: "{}".into() },
                points: Vec::new(),
                fit: None,
                max_throughput: None,
                memory_budget_bytes: Some(3 << 20),
                max_safe_batch: Some(3),
                first_runs: Vec::new(),
            })
        });
        let task = Task::start_profiled(TaskConfig::new("gpu").with_variant(variant), make, Some(find)).unwrap();
        let row = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        let tickets: Vec<_> = (0..10).map(|_| task.submit(row(), &Slo::default()).unwrap()).collect();
        tickets.into_iter().for_each(|t| drop(t.wait().unwrap()));
        assert!(log.sizes().iter().all(|&rows| rows <= 3), "{:?}", log.sizes());
        assert!(log.sizes().contains(&3), "batches grow to the cap: {:?}", log.sizes());
        assert!(log.bytes_in_use().unwrap() <= 3 << 20);
        let seven_rows: Vec<f32> = (0..7 * 4).map(|i| i as f32).collect();
        let answer = task.submit(Inputs::from(Tensor::new([7, 4], seven_rows.clone()).unwrap()), &Slo::default());
        let answer = answer.unwrap().wait().unwrap();
        // The fake backend answers its input: the parts come back joined in order.
        assert_eq!(answer.first().unwrap().as_slice::<f32>().unwrap(), &seven_rows[..]);
        assert!(log.sizes().iter().all(|&rows| rows <= 3), "{:?}", log.sizes());
        assert!(log.bytes_in_use().unwrap() <= 3 << 20);
        let nine_rows = Inputs::from(Tensor::new([9, 4], vec![1.0f32; 36]).unwrap());
        let refused = task.submit(nine_rows, &Slo::default()).err();
        assert!(matches!(refused, Some(Error::RequestTooLarge { rows: 9, max_batch_size: 8, .. })), "{refused:?}");
        // A policy asking for more than fits gets what fits.
        assert_eq!(task.configure_active(Some(8), None).unwrap().max_batch_size, 3);
    }

    #[test]
    fn a_profile_without_a_memory_limit_leaves_the_batching_as_configured() {
        let batching = BatchingConfig::default().with_max_batch_size(8).with_preferred_batch_sizes([8, 4]);
        let mut profile = profiles(&[("v", 100.0)])(&VariantConfig::new("v", "fake", 1.0), Path::new("fake")).unwrap();
        assert_eq!(memory_capped(batching.clone(), Some(&profile)), batching);
        profile.max_safe_batch = Some(16);
        assert_eq!(memory_capped(batching.clone(), Some(&profile)), batching);
        profile.max_safe_batch = Some(5);
        let capped = memory_capped(batching, Some(&profile));
        assert_eq!((capped.max_batch_size, capped.preferred_batch_sizes), (5, vec![4]));
    }

    fn served(task: &Task, min_accuracy: f64) -> String {
        let input = Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        let slo = Slo::default().with_min_accuracy(min_accuracy);
        task.submit(input, &slo).unwrap().wait().unwrap().model.to_string()
    }

    #[test]
    fn with_every_variant_profiled_the_cheapest_by_throughput_serves_accuracy_requests() {
        // v2 is listed last but answers four times as many requests a second as v1.
        let task = task(Some(profiles(&[("v0", 500.0), ("v1", 100.0), ("v2", 400.0)])));
        assert_eq!(served(&task, 65.0), "v2");
        assert_eq!(served(&task, 55.0), "v0", "the active variant is accurate enough");
        let status = task.status();
        let v1 = status.variant("v1").unwrap();
        assert_eq!(v1.versions[0].max_throughput_per_s, Some(100.0));
        assert_eq!(task.profile("v2").unwrap().and_then(|p| p.max_throughput).map(|t| t.requests_per_s), Some(400.0));
    }

    #[test]
    fn the_task_counts_its_traffic_as_requests_end() {
        let task = task(None);
        for _ in 0..5 {
            served(&task, 50.0);
        }
        let input = Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        assert!(task.submit(input, &Slo::default().with_min_accuracy(99.0)).is_err());
        let reading = task.traffic().read();
        assert_eq!(reading.in_flight, 0);
        assert_eq!(reading.tick.latencies_ms.len(), 5);
        assert_eq!(reading.tick.rejections, 1);
        assert!(task.traffic().read().tick.latencies_ms.is_empty(), "a reading takes the tick's answers");
    }

    #[test]
    fn without_a_profile_for_every_variant_the_configured_order_decides() {
        let task = task(Some(profiles(&[("v0", 500.0), ("v2", 400.0)])));
        assert_eq!(served(&task, 65.0), "v1");
        assert!(task.profile("v1").unwrap().is_none());
        assert_eq!(served(&self::task(None), 65.0), "v1");
    }

    #[test]
    fn a_variant_snapshot_counts_the_batches_its_sessions_ran() {
        let variant = VariantConfig::new("only", "fake", 70.0).with_warmup(WarmupConfig::disabled());
        let config = TaskConfig::new("runs-counted").with_variant(variant.with_preload(true));
        let slow = FakeConfig {
            per_batch: Duration::from_millis(2),
            per_row: Duration::from_millis(1),
            ..FakeConfig::default()
        };
        let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(slow.clone(), BatchLog::default()));
        let task = Task::start_profiled(config, make, None).unwrap();
        for rows in [1, 3] {
            let input = Inputs::from(Tensor::new([rows, 4], vec![1.0f32; 4 * rows]).unwrap());
            task.submit(input, &Slo::default()).unwrap().wait().unwrap();
        }
        let runs = task.variant_snapshots()[0].runs.unwrap();
        assert_eq!((runs.batches, runs.rows), (2, 4));
        assert!(runs.run_ms >= 2.0 * 2.0 + 4.0, "two batches of 2 ms and four rows of 1 ms: {runs:?}");
    }

    #[test]
    fn a_switch_moves_the_requests_waiting_for_the_replaced_variant() {
        // `slow` runs one row at a time, 100 ms each; `fast` takes no time.
        let one_row = BatchingConfig::default().with_max_batch_size(1);
        let mut config = TaskConfig::new("moves-waiting");
        for name in ["slow", "fast"] {
            let variant = VariantConfig::new(name, "fake", 70.0).with_warmup(WarmupConfig::disabled());
            config = config.with_variant(variant.with_preload(true).with_batching(one_row.clone()));
        }
        let make: MakeBackend = Arc::new(|variant, _| {
            let per_batch = if variant.name == "slow" { Duration::from_millis(100) } else { Duration::ZERO };
            FakeBackend::factory(FakeConfig { per_batch, ..FakeConfig::default() }, BatchLog::default())
        });
        let task = Task::start_profiled(config, make, None).unwrap();
        let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        let tickets: Vec<_> = (0..4).map(|_| task.submit(input(), &Slo::default()).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(20));
        assert_eq!(task.switch_to("fast").unwrap().moved, 3, "one runs on `slow`, three wait");
        let served: Vec<String> = tickets.into_iter().map(|t| t.wait().unwrap().model.to_string()).collect();
        assert_eq!(served, ["slow", "fast", "fast", "fast"]);
        assert_eq!(task.traffic().read().in_flight, 0, "each counted once as it ended");
    }

    #[test]
    fn a_batch_waiting_for_its_turn_takes_in_the_requests_that_arrive_meanwhile() {
        let log = BatchLog::default();
        let variant = VariantConfig::new("v", "fake", 70.0).with_warmup(WarmupConfig::disabled()).with_preload(true);
        let config = TaskConfig::new("tops-up").with_variant(variant);
        let fake = FakeConfig { takes_turns: true, ..FakeConfig::default() };
        let sizes = log.clone();
        let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), sizes.clone()));
        let task = Task::start_profiled(config, make, None).unwrap();
        let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        // Another task's batch holds the turn: the first request's batch waits for it,
        // and three more arrive meanwhile.
        let other = crate::backend::turns::RUN_TURNS.take();
        let first = task.submit(input(), &Slo::default()).unwrap();
        std::thread::sleep(Duration::from_millis(30));
        let more: Vec<_> = (0..3).map(|_| task.submit(input(), &Slo::default()).unwrap()).collect();
        std::thread::sleep(Duration::from_millis(30));
        drop(other);
        let batch_sizes: Vec<usize> =
            std::iter::once(first).chain(more).map(|t| t.wait().unwrap().batch_size).collect();
        assert_eq!(batch_sizes, [4, 4, 4, 4]);
        assert_eq!(log.sizes(), [4], "one run, not one for the first request and one for the rest");
    }
}
