//! A tensor as a config declares it: a task's signature, or a TorchScript module's
//! inputs and outputs, which the file itself does not say.

use serde::{Deserialize, Serialize};

use super::TensorSpec;
use crate::tensor::DType;

/// One declared input or output: of a task's signature, or of a TorchScript module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorDeclaration {
    /// Its name in requests and answers.
    pub name: String,
    /// Element type: `f32`, `f16`, `i64`, `i32`, `u8` or `bool` (or KServe's `FP32`, …).
    #[serde(alias = "datatype")]
    pub dtype: DType,
    /// Dimensions, `-1` where open; the first is the batch dimension.
    pub shape: Vec<i64>,
}

impl TensorDeclaration {
    /// A declaration from its parts.
    pub fn new(name: impl Into<String>, dtype: DType, shape: impl Into<Vec<i64>>) -> Self {
        TensorDeclaration { name: name.into(), dtype, shape: shape.into() }
    }

    /// As the runtime describes tensors: `None` for an open dimension.
    pub fn spec(&self) -> TensorSpec {
        let shape = self.shape.iter().map(|&d| usize::try_from(d).ok()).collect::<Vec<_>>();
        TensorSpec::new(self.name.clone(), self.dtype, shape)
    }
}
