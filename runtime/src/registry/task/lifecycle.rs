//! Loading, warming, switching and unloading a task's variants and versions, off the
//! request path: a switch publishes new routes only once the variant serves, and the
//! variant replaced drains what it queued.

use super::*;

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

impl Task {
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
        if previous != index {
            // How answers came when it last served says little of now.
            let model = self.lock().variants[index].serving_version().and_then(|e| e.model.clone());
            if let Some(model) = model {
                model.forget_overruns();
            }
        }
        let moved = if previous == index { 0 } else { self.move_waiting(previous, index) };
        // One loaded to stand by serves with the instances set for it.
        if ready {
            self.bring_instances(index)?;
        }
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
                return Err(Error::Precondition(format!(
                    "task `{}`: `{variant}` is active and cannot be unloaded; switch to another variant first",
                    self.name
                )));
            }
            retire_current(&mut inner.variants[index]);
        }
        self.publish();
        Ok(())
    }

    /// Sets the instances `variant` serves with (or, while it is not loaded, loads
    /// with), within `1..=MAX_INSTANCES`. Returns whether a loaded version now runs a
    /// different number, which [`Task::scale_instances`] brings to it.
    pub fn want_instances(&self, variant: &str, instances: usize) -> Result<bool, Error> {
        let index = self.index_of(variant)?;
        crate::model::check_instances(variant, instances)?;
        let mut inner = self.lock();
        let slot = &mut inner.variants[index];
        slot.instances = instances;
        let model = slot.serving_version().and_then(|e| e.model.as_ref());
        Ok(model.is_some_and(|m| m.instances() + m.instances_starting() != instances))
    }

    /// Brings `variant`'s loaded version to the instances set for it (see
    /// [`Task::want_instances`]) while requests flow: added instances load and warm
    /// before they take batches, removed ones finish their batch. Blocks until done;
    /// one control operation at a time. Nothing to do for a variant not loaded.
    pub fn scale_instances(&self, variant: &str) -> Result<(), Error> {
        let _control = self.control.lock().unwrap_or_else(PoisonError::into_inner);
        let index = self.index_of(variant)?;
        self.bring_instances(index)
    }

    /// Brings variant `index`'s loaded version to the instances set for it; the
    /// caller holds the control lock.
    fn bring_instances(&self, index: usize) -> Result<(), Error> {
        let (model, instances) = {
            let inner = self.lock();
            let slot = &inner.variants[index];
            (slot.serving_version().and_then(|e| e.model.clone()), slot.instances)
        };
        let Some(model) = model else { return Ok(()) };
        model.set_instances(instances)?;
        let mut inner = self.lock();
        let slot = &mut inner.variants[index];
        let per_instance = slot.share.map_or(0, |s| s.memory_bytes + s.gpu_memory_bytes);
        if let Some(entry) = slot.current.and_then(|c| slot.versions.get_mut(&c)) {
            entry.memory_bytes = per_instance * model.instances() as u64;
        }
        Ok(())
    }

    /// Loads and warms variant `index`: a new version from `path`, or else its newest
    /// version again (its configured file at first), recording the states. Holds no
    /// lock while the model loads.
    pub(super) fn load(&self, index: usize, path: Option<PathBuf>) -> Result<u64, Error> {
        let (config, version, path, knobs, instances) = {
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
                    image_profile: None,
                    load_time: None,
                },
            );
            (slot.config.clone(), version, path, slot.knobs, slot.instances)
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
        let profile =
            self.find_profile.as_ref().and_then(|find| find(&config, &path, ProfileLookup::AsConfigured)).map(Arc::new);
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
        let in_use = share::InUse::now(config.device);
        let batching = memory_capped(config.batching.clone().with_knobs(knobs), profile.as_deref());
        let started = Model::start_with(&config.name, factory, instances, batching, options).and_then(|model| {
            match model.preprocess() {
                Some(preprocess) => images::check_fits(&model, preprocess).map(|()| model),
                None => Ok(model),
            }
        });
        let load_time = loading.elapsed();
        let held = share::measured(&config, &path, in_use, share::InUse::now(config.device), instances);
        let image_profile =
            started.as_ref().ok().and_then(|model| self.stored_image_profile(&config.name, model, &path));
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
            slot.share = Some(held);
        }
        if started.is_ok() && profile.is_some() {
            slot.known_profile.clone_from(&profile);
        }
        let entry = slot.versions.get_mut(&version).ok_or(Error::ShuttingDown)?;
        match started {
            Ok(model) => {
                model.set_photo_capacity(image_profile.as_ref().and_then(|p| p.least_requests_per_s()));
                entry.state = VariantState::Ready;
                entry.error = None;
                entry.warmup = model.warmup_time();
                entry.memory_bytes = (held.memory_bytes + held.gpu_memory_bytes) * instances as u64;
                entry.model = Some(Arc::new(model));
                entry.profile = profile;
                entry.image_profile = image_profile;
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
    pub(super) fn promote(&self, index: usize, version: u64) {
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
    pub(super) fn settle(&self) {
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
    pub(super) fn move_waiting(&self, from: usize, to: usize) -> usize {
        let (from, to) = {
            let inner = self.lock();
            let model = |slot: &VariantSlot| slot.serving_version().and_then(|e| e.model.clone());
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
    pub(super) fn publish(&self) {
        let inner = self.lock();
        let mut routes =
            Routes { ready: Vec::new(), accuracies: Vec::new(), costs: Some(Vec::new()), names: Vec::new(), active: 0 };
        for (i, slot) in inner.variants.iter().enumerate() {
            let Some(entry) = slot.serving_version() else { continue };
            let Some(model) = entry.model.clone() else { continue };
            let throughput = entry.profile.as_ref().and_then(|p| p.max_throughput).map(|t| t.requests_per_s);
            match (throughput, routes.costs.as_mut()) {
                (Some(per_s), Some(costs)) if per_s > 0.0 => costs.push(1.0 / per_s),
                _ => routes.costs = None,
            }
            if i == inner.active {
                routes.active = routes.ready.len();
            }
            routes.accuracies.push(slot.config.variant_accuracy());
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
pub(super) fn mark_drained(inner: &mut Inner) {
    for entry in inner.variants.iter_mut().flat_map(|s| s.versions.values_mut()) {
        if entry.state == VariantState::Draining && entry.drain.as_ref().is_none_or(DrainHandle::is_drained) {
            entry.state = VariantState::Unloaded;
            entry.drain = None;
        }
    }
}
