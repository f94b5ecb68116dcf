//! What a runtime's config declared: the models and tasks its model repository may
//! load besides the files under the repository root.

use modelless_runtime::{ModelConfig, TaskConfig};

/// Models and tasks the config declares.
#[derive(Clone, Debug, Default)]
pub(crate) struct Declared {
    pub models: Vec<ModelConfig>,
    pub tasks: Vec<TaskConfig>,
}
