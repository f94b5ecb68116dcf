//! What is loaded: plain models and tasks, by name. Lookups on the request path read an
//! `ArcSwap` snapshot and take no lock; loads and unloads replace the snapshot.

mod config;
mod gauges;
mod images;
mod pipeline;
mod profile;
mod route;
mod task;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

pub use config::{Device, ModelConfig, ModelFormat, ProfileMode, TaskConfig, VariantConfig};
pub use pipeline::{
    FindTask, Pipeline, PipelineAnswer, PipelineGlue, PipelineOutput, PipelineSignature, PipelineValue, StageTime,
    Stages,
};
pub use profile::{profiling_factory, variant_profile, variant_profile_key};
#[cfg(test)]
pub(crate) use task::memory_capped;
pub use task::{
    FindProfile, ImageCapacityOptions, ImageSizeClass, MakeBackend, ProfileLookup, SwitchReport, Task, TaskStatus,
    VariantState, VariantStatus, VersionStatus,
};

use crate::error::Error;
use crate::model::Model;

/// Things by name, read without locks.
struct Named<T> {
    map: ArcSwap<HashMap<String, Arc<T>>>,
    writer: Mutex<()>,
}

impl<T> Default for Named<T> {
    fn default() -> Self {
        Named { map: ArcSwap::default(), writer: Mutex::default() }
    }
}

impl<T> Named<T> {
    fn get(&self, name: &str) -> Option<Arc<T>> {
        self.map.load().get(name).cloned()
    }

    fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.map.load().keys().cloned().collect();
        names.sort();
        names
    }

    /// Everything, sorted by name.
    fn all(&self) -> Vec<Arc<T>> {
        let map = self.map.load();
        let mut all: Vec<(&String, &Arc<T>)> = map.iter().collect();
        all.sort_by_key(|(name, _)| *name);
        all.into_iter().map(|(_, value)| value.clone()).collect()
    }

    /// Adds `value` unless the name is taken; gives it back if it is.
    fn insert(&self, name: &str, value: T) -> Result<Arc<T>, T> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.map.load();
        if current.contains_key(name) {
            return Err(value);
        }
        let value = Arc::new(value);
        let mut next = HashMap::clone(&current);
        next.insert(name.to_string(), value.clone());
        self.map.store(Arc::new(next));
        Ok(value)
    }

    fn remove(&self, name: &str) -> Option<Arc<T>> {
        let _writer = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let current = self.map.load();
        let mut next = HashMap::clone(&current);
        let removed = next.remove(name)?;
        self.map.store(Arc::new(next));
        Some(removed)
    }
}

/// Loaded models, tasks and pipelines.
#[derive(Default)]
pub struct Registry {
    models: Named<Model>,
    tasks: Named<Task>,
    pipelines: Named<Pipeline>,
    /// The cores the budget gives instances (an `f64`'s bits; 0: what the process may
    /// run on): a task's best allocation, which its demand ratio is held against.
    budget_cores: AtomicU64,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry").finish_non_exhaustive()
    }
}

impl Registry {
    /// Nothing loaded.
    pub fn new() -> Self {
        Registry::default()
    }

    /// Sets the cores the budget gives instances (see [`Registry::budget_cores`]).
    pub fn set_budget_cores(&self, cores: f64) {
        self.budget_cores.store(cores.to_bits(), Ordering::Relaxed);
    }

    /// The cores the budget gives instances: as set, else what the process may run on.
    pub fn budget_cores(&self) -> f64 {
        match f64::from_bits(self.budget_cores.load(Ordering::Relaxed)) {
            cores if cores > 0.0 => cores,
            _ => std::thread::available_parallelism().map_or(1, |n| n.get()) as f64,
        }
    }

    /// The model called `name`.
    pub fn get(&self, name: &str) -> Result<Arc<Model>, Error> {
        self.models.get(name).ok_or_else(|| Error::UnknownModel(name.to_string()))
    }

    /// Names of the loaded models, sorted.
    pub fn names(&self) -> Vec<String> {
        self.models.names()
    }

    /// Adds a started model, unless one of its name is loaded.
    pub fn insert(&self, model: Model) -> Result<Arc<Model>, Error> {
        let name = model.name().to_string();
        self.models.insert(&name, model).map_err(|_| Error::AlreadyLoaded(name))
    }

    /// Removes a model. Requests already queued still run; the model's threads end
    /// once the last handle to it is dropped and its queue has drained.
    pub fn remove(&self, name: &str) -> Result<Arc<Model>, Error> {
        self.models.remove(name).ok_or_else(|| Error::UnknownModel(name.to_string()))
    }

    /// The task called `name`.
    pub fn task(&self, name: &str) -> Result<Arc<Task>, Error> {
        self.tasks.get(name).ok_or_else(|| Error::UnknownTask(name.to_string()))
    }

    /// The tasks, sorted by name.
    pub fn tasks(&self) -> Vec<Arc<Task>> {
        self.tasks.all()
    }

    /// Names of the tasks, sorted.
    pub fn task_names(&self) -> Vec<String> {
        self.tasks.names()
    }

    /// Adds a started task, unless one of its name exists.
    pub fn insert_task(&self, task: Task) -> Result<Arc<Task>, Error> {
        let name = task.name().to_string();
        self.tasks.insert(&name, task).map_err(|_| Error::AlreadyLoaded(name))
    }

    /// Removes a task; its variants drain and unload.
    pub fn remove_task(&self, name: &str) -> Result<Arc<Task>, Error> {
        self.tasks.remove(name).ok_or_else(|| Error::UnknownTask(name.to_string()))
    }

    /// The pipeline called `name`.
    pub fn pipeline(&self, name: &str) -> Result<Arc<Pipeline>, Error> {
        self.pipelines.get(name).ok_or_else(|| Error::UnknownTask(name.to_string()))
    }

    /// Names of the pipelines, sorted.
    pub fn pipeline_names(&self) -> Vec<String> {
        self.pipelines.names()
    }

    /// Adds a pipeline, unless a pipeline or a task of its name exists.
    pub fn insert_pipeline(&self, pipeline: Pipeline) -> Result<Arc<Pipeline>, Error> {
        let name = pipeline.name().to_string();
        if self.tasks.get(&name).is_some() {
            return Err(Error::AlreadyLoaded(name));
        }
        self.pipelines.insert(&name, pipeline).map_err(|_| Error::AlreadyLoaded(name))
    }

    /// Removes a pipeline; its stages stay.
    pub fn remove_pipeline(&self, name: &str) -> Result<Arc<Pipeline>, Error> {
        self.pipelines.remove(name).ok_or_else(|| Error::UnknownTask(name.to_string()))
    }
}
