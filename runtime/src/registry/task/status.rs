//! What a task reports of itself: its variants, versions and states for people and
//! the repository API, and the snapshot of each variant a policy decides on.

use super::lifecycle::mark_drained;
use super::share;
use super::*;

/// One version of a variant, as a task's status reports it.
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
    /// Memory its instances hold while loaded: measured as they loaded, no less than
    /// twice its file each (weights, and the copies sessions pack them into).
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

/// One variant, as a task's status reports it.
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
    /// Requests it refused while it could have served them: its queue empty, or it
    /// answered under 0.8 of its profiled capacity in the second of the refusal.
    pub needless_refusals: u64,
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

impl Task {
    /// Every variant as a policy sees it: accuracy, state, and what it costs.
    pub fn variant_snapshots(&self) -> Vec<VariantSnapshot> {
        let mut inner = self.lock();
        let active = inner.active;
        inner
            .variants
            .iter_mut()
            .enumerate()
            .map(|(i, slot)| {
                // The counters are the variant's, whichever version ran the batches; an
                // unloaded variant ran nothing since it was last seen loaded, and a policy
                // with no profile to price it by prices it by them.
                let read = slot.serving_version().and_then(|e| e.model.as_ref()).map(|model| {
                    let totals = model.counters().totals();
                    RunTotals {
                        batches: totals.executions,
                        rows: totals.inferences,
                        run_ms: totals.batch_run.as_secs_f64() * 1e3,
                    }
                });
                if read.is_some() {
                    slot.last_runs = read;
                }
                let runs = slot.last_runs;
                let slot = &*slot;
                let entry = slot.serving_version();
                let last_load = slot.latest.and_then(|v| slot.versions.get(&v)).and_then(|e| e.load_time);
                let profile = slot.profile();
                let cost = VariantCost {
                    fit: profile.and_then(|p| p.fit),
                    max_throughput: profile.and_then(|p| p.max_throughput),
                    load_ms: last_load.map(|t| t.as_secs_f64() * 1e3),
                    memory_bytes: entry.map(|e| e.memory_bytes).filter(|&b| b > 0),
                    max_safe_batch: profile.and_then(|p| p.max_safe_batch),
                    photos: entry.and_then(|e| e.image_profile.as_deref()).map_or_else(Vec::new, photo_capacities),
                };
                let known = cost != VariantCost::default();
                let model = entry.and_then(|e| e.model.as_ref());
                let idle_ms = (i != active).then(|| slot.last_active.elapsed().as_millis() as u64).or(Some(0));
                let state = match (entry, &slot.misfit) {
                    (Some(e), _) => e.state,
                    (None, Some(_)) => VariantState::Failed,
                    (None, None) => VariantState::Unloaded,
                };
                VariantSnapshot {
                    name: slot.config.name.clone(),
                    accuracy: slot.config.variant_accuracy(),
                    state,
                    // Where it runs if loaded (a variant may have fallen back to the CPU).
                    device: entry.and_then(|e| e.model.as_ref()).map_or(slot.config.device, |m| m.device()).name(),
                    profile: known.then_some(cost),
                    runs,
                    batch_ceiling: Some(u32::try_from(slot.ceiling()).unwrap_or(u32::MAX)),
                    refused: slot.misfit.as_ref().map(|m| Error::DoesNotFitTask(m.clone()).to_string()),
                    instances: model.map_or(0, |m| m.instances() as u32),
                    instances_starting: model.map_or(0, |m| m.instances_starting() as u32),
                    instances_set: slot.instances as u32,
                    share: Some(slot.share.unwrap_or_else(|| share::expected(&slot.config, &slot.config.path))),
                    idle_ms,
                }
            })
            .collect()
    }

    /// The profile of `variant`'s serving version, or, while none serves, the one last
    /// known for it (stored for its file when the task started, or its newest
    /// loaded version's).
    pub fn profile(&self, variant: &str) -> Result<Option<Arc<Profile>>, Error> {
        let index = self.index_of(variant)?;
        let inner = self.lock();
        Ok(inner.variants[index].profile().cloned())
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
                .inspect(|slot| {
                    for model in slot.versions.values().filter_map(|e| e.model.as_ref()) {
                        model.settle_refusals();
                    }
                })
                .map(|slot| VariantStatus {
                    name: slot.config.name.clone(),
                    accuracy: slot.config.variant_accuracy(),
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
                    needless_refusals: serving_metrics().needless_refusals(&self.name, &slot.config.name),
                })
                .collect(),
        }
    }
}

/// An image profile's capacities as a policy sees them.
fn photo_capacities(profile: &ImageProfile) -> Vec<PhotoCapacity> {
    let capacities = profile.capacities.iter();
    capacities
        .map(|c| PhotoCapacity {
            size_class: c.size_class.clone(),
            mean_bytes: c.mean_bytes,
            requests_per_s: c.requests_per_s,
        })
        .collect()
}
