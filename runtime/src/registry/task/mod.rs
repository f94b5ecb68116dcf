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
use modelless_policy_abi::{
    InstanceShare, LatencyFit, PhotoCapacity, Profile, RunTotals, ServingKnobs, VariantCost, VariantSnapshot,
};

use super::config::{TaskConfig, VariantConfig};
use super::images::{self, ImageServices};
use super::route::{choose, spill_order};
use crate::backend::{BackendFactory, ModelMetadata};
use crate::batching::{BatchingConfig, BatchingKnobs};
use crate::classify::read_labels;
use crate::error::{BackendError, Error};
use crate::metrics::{ModelFailures, TaskTraffic, serving_metrics};
use crate::model::{Admission, DrainHandle, LoadPhase, Model, StartOptions, Ticket};
use crate::preprocess::PreprocessPool;
use crate::profile::ImageProfile;
use crate::request::{InferOptions, Inputs, Slo};
use crate::signature::{SignatureMismatch, bound_factory};

mod demand;
mod image_capacity;
mod knobs;
mod lifecycle;
mod routing;
mod share;
mod status;

pub use image_capacity::{ImageCapacityOptions, ImageSizeClass};
pub use lifecycle::SwitchReport;
pub use status::{TaskStatus, VariantStatus, VersionStatus};

/// Makes the backend factory of a variant's version (its config, and the model file
/// of that version).
pub type MakeBackend = Arc<dyn Fn(&VariantConfig, &Path) -> BackendFactory + Send + Sync>;

/// Finds the profile of a variant's version (its config, and the model file of that
/// version), as `ProfileLookup` asks; `None` for none.
pub type FindProfile = Arc<dyn Fn(&VariantConfig, &Path, ProfileLookup) -> Option<Profile> + Send + Sync>;

/// What a [`FindProfile`] is asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileLookup {
    /// The profile stored for the file, never one measured: for a variant that does not
    /// load at start, which a policy and the simulator still price.
    Stored,
    /// As the variant's config says: the stored one, or one measured now where it says
    /// `measure`. For a version as it loads.
    AsConfigured,
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
    /// What it answers a second with photos, where that was measured for its settings.
    image_profile: Option<Arc<ImageProfile>>,
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
    /// The knobs set for it while the task runs (by a policy). They outlast its
    /// versions: knobs set before it loads are those it serves its first batch with.
    knobs: BatchingKnobs,
    /// The profile last known for it: stored for its file when the task started, or
    /// its newest loaded version's. What it is priced by while no version serves.
    known_profile: Option<Arc<Profile>>,
    /// What its sessions had run when last read while loaded.
    last_runs: Option<RunTotals>,
    /// The instances it serves with, or loads with: as configured, or as a policy set.
    instances: usize,
    /// What one instance held when it last loaded.
    share: Option<InstanceShare>,
}

impl VariantSlot {
    /// The version that serves it, if one is ready.
    fn serving_version(&self) -> Option<&VersionEntry> {
        self.current.and_then(|c| self.versions.get(&c))
    }

    /// Its serving version's profile, or, while none serves, the one last known.
    fn profile(&self) -> Option<&Arc<Profile>> {
        match self.serving_version() {
            Some(entry) => entry.profile.as_ref(),
            None => self.known_profile.as_ref(),
        }
    }

    /// The largest batch it may form: as configured, and no larger than what its
    /// serving version's profile found fits in memory.
    fn ceiling(&self) -> usize {
        let fits = memory_ceiling(self.serving_version().and_then(|e| e.profile.as_deref()));
        fits.map_or(self.config.batching.max_batch_size, |fits| fits.min(self.config.batching.max_batch_size))
    }
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
    /// Of recent surges, the share the demand ratio adds as headroom.
    demand_surge_weight: f64,
    /// How far ahead, s, the demand ratio carries a rising rate.
    demand_lead_s: f64,
    /// Whether requests the routed variant would refuse go to a cheaper ready one.
    spill: bool,
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

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Task {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Task").field("name", &self.name).finish_non_exhaustive()
    }
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
        let loads_at_start = |i: usize, v: &VariantConfig| i == active || v.preload;
        let variants = config
            .variants
            .iter()
            .enumerate()
            .map(|(i, v)| VariantSlot {
                config: v.clone(),
                current: None,
                latest: None,
                versions: BTreeMap::new(),
                next_version: 1,
                last_active: now,
                misfit: None,
                knobs: BatchingKnobs::default(),
                known_profile: find_profile
                    .as_ref()
                    .filter(|_| !loads_at_start(i, v))
                    .and_then(|find| find(v, &v.path, ProfileLookup::Stored))
                    .map(Arc::new),
                last_runs: None,
                instances: v.instances,
                share: None,
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
            demand_surge_weight: config.demand_surge_weight,
            demand_lead_s: config.demand_lead_s,
            spill: config.spill,
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

    /// The latency target its callers expect, in ms.
    pub fn latency_slo_ms(&self) -> Option<f64> {
        self.latency_slo_ms
    }

    /// The pool its requests' images are preprocessed on.
    pub fn preprocess_pool(&self) -> &Arc<PreprocessPool> {
        &self.images.pool
    }

    /// The task's traffic: demand, requests in flight, and each tick's answers.
    pub fn traffic(&self) -> &TaskTraffic {
        &self.traffic
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
}

/// The largest batch that fits the device memory `profile` measured, if it measured.
fn memory_ceiling(profile: Option<&Profile>) -> Option<usize> {
    profile.and_then(|p| p.max_safe_batch).map(|b| b.max(1) as usize)
}

/// `batching` with its largest batch no larger than the largest that fits the device
/// memory `profile` measured: a batch predicted not to fit is never formed, and a
/// request with more rows than that (within the configured `max_batch_size`) runs split.
pub(crate) fn memory_capped(mut batching: BatchingConfig, profile: Option<&Profile>) -> BatchingConfig {
    if let Some(fits) = memory_ceiling(profile)
        && fits < batching.max_batch_size
    {
        tracing::info!(configured = batching.max_batch_size, fits, "batches capped to what fits in memory");
        batching.max_batch_size = fits;
        batching.preferred_batch_sizes.retain(|&b| b <= fits);
    }
    batching
}

#[cfg(test)]
mod tests;
