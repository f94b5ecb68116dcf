//! The loaded models by name. Lookups on the request path read an `ArcSwap` snapshot
//! and take no lock; loads and unloads replace the snapshot.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;

use crate::error::Error;
use crate::model::Model;

/// Models by name.
#[derive(Default)]
pub struct Registry {
    models: ArcSwap<HashMap<String, Arc<Model>>>,
    writer: Mutex<()>,
}

impl Registry {
    /// No models.
    pub fn new() -> Self {
        Registry::default()
    }

    /// The model called `name`.
    pub fn get(&self, name: &str) -> Result<Arc<Model>, Error> {
        self.models.load().get(name).cloned().ok_or_else(|| Error::UnknownModel(name.to_string()))
    }

    /// Names of the loaded models, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.models.load().keys().cloned().collect();
        names.sort();
        names
    }

    /// Adds a started model, unless one of its name is loaded.
    pub fn insert(&self, model: Model) -> Result<Arc<Model>, Error> {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.models.load();
        if current.contains_key(model.name()) {
            return Err(Error::AlreadyLoaded(model.name().to_string()));
        }
        let model = Arc::new(model);
        let mut next = HashMap::clone(&current);
        next.insert(model.name().to_string(), model.clone());
        self.models.store(Arc::new(next));
        Ok(model)
    }

    /// Removes a model. Requests already queued still run; the model's threads end
    /// once the last handle to it is dropped and its queue has drained.
    pub fn remove(&self, name: &str) -> Result<Arc<Model>, Error> {
        let _writer = self.writer.lock().unwrap_or_else(|p| p.into_inner());
        let current = self.models.load();
        let mut next = HashMap::clone(&current);
        let removed = next.remove(name).ok_or_else(|| Error::UnknownModel(name.to_string()))?;
        self.models.store(Arc::new(next));
        Ok(removed)
    }
}
