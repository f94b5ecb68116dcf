//! What a runtime's config declared: the models and tasks its model repository may
//! load besides the files under the repository root.

use modelless_runtime::{TaskConfig, VariantConfig};

/// Models and tasks the config declares.
#[derive(Clone, Debug, Default)]
pub(crate) struct Declared {
    pub models: Vec<VariantConfig>,
    pub tasks: Vec<TaskConfig>,
}
