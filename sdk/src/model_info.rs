//! What the runtime reports of a model served on its own.

use modelless_runtime::backend::ModelMetadata;
use modelless_runtime::{BatchingConfig, Model};

/// What a loaded model takes and how it is served.
#[derive(Clone, Debug)]
pub struct ModelInfo {
    /// Its name.
    pub name: String,
    /// Inputs and outputs.
    pub metadata: ModelMetadata,
    /// Batching knobs in force.
    pub batching: BatchingConfig,
    /// Instances serving it.
    pub instances: usize,
}

impl ModelInfo {
    pub(crate) fn of(model: &Model) -> Self {
        ModelInfo {
            name: model.name().to_string(),
            metadata: model.metadata().clone(),
            batching: model.batching(),
            instances: model.instances(),
        }
    }
}
