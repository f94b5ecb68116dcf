//! A task's signature: the inputs and outputs its callers see, whatever variant
//! serves. Each variant is bound onto it when it loads (names mapped, size-1
//! dimensions of outputs dropped or added) or refused with a [`SignatureMismatch`]
//! that names the tensor and both signatures.

mod bind;
mod bound;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use crate::backend::TensorDeclaration;
pub use crate::error::SignatureMismatch;
pub use bind::{Binding, bind};
pub use bound::bound_factory;

use crate::backend::{ModelMetadata, TensorSpec};
use crate::error::Error;

/// The largest rank and dimension a declared signature may name.
const MAX_RANK: usize = 16;
const MAX_DIMENSION: i64 = 1 << 31;

/// What a task takes and gives, declared once for all its variants.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureConfig {
    /// Inputs, in the order answers and metadata list them.
    pub inputs: Vec<TensorDeclaration>,
    /// Outputs, in order.
    pub outputs: Vec<TensorDeclaration>,
}

impl SignatureConfig {
    /// A signature with these inputs and outputs.
    pub fn new(inputs: Vec<TensorDeclaration>, outputs: Vec<TensorDeclaration>) -> Self {
        SignatureConfig { inputs, outputs }
    }

    /// Refuses empty lists, repeated names, and shapes without a batch dimension or
    /// with dimensions below -1 or beyond 2³¹.
    pub fn validate(&self, task: &str) -> Result<(), Error> {
        let bad = |what: String| Err(Error::Config(format!("task `{task}`: signature: {what}")));
        for (kind, list) in [("inputs", &self.inputs), ("outputs", &self.outputs)] {
            if list.is_empty() {
                return bad(format!("no {kind}"));
            }
            for (i, t) in list.iter().enumerate() {
                if list[..i].iter().any(|u| u.name == t.name) {
                    return bad(format!("{kind}: `{}` is declared twice", t.name));
                }
                if t.shape.is_empty() || t.shape.len() > MAX_RANK {
                    return bad(format!("`{}`: a shape of 1 to {MAX_RANK} dimensions, batch first", t.name));
                }
                if let Some(d) = t.shape.iter().find(|&&d| !(-1..=MAX_DIMENSION).contains(&d) || d == 0) {
                    return bad(format!("`{}`: dimension {d} is neither -1 nor 1..=2^31", t.name));
                }
            }
        }
        Ok(())
    }

    /// As the runtime describes models.
    pub fn metadata(&self) -> ModelMetadata {
        ModelMetadata {
            inputs: self.inputs.iter().map(TensorDeclaration::spec).collect(),
            outputs: self.outputs.iter().map(TensorDeclaration::spec).collect(),
        }
    }
}

/// How a variant's own tensor names map onto its task's, as Triton's ensembles write
/// it: the variant's name as key, the task's as value. Tensors left out are matched by
/// name, or else by position where the variant has as many as the task.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TensorMaps {
    /// Variant input → task input.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub input_map: BTreeMap<String, String>,
    /// Variant output → task output.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub output_map: BTreeMap<String, String>,
}

/// The input a variant fills from images it preprocesses, and where height and width
/// lie in its shape.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageInput {
    /// The input's name; `None` for the variant's only input.
    pub name: Option<String>,
    /// The positions of height and width among its dimensions.
    pub spatial_axes: [usize; 2],
}

/// The signature a task without a declared one takes from its first variant: the
/// variant's own, with the batch dimension open, and, where the variant fills an
/// input from `images`, that input's height and width open too: each variant resizes
/// images to its own size, so the size one of them takes is no part of the task's.
pub fn signature_of(model: &ModelMetadata, images: Option<&ImageInput>) -> ModelMetadata {
    let open_batch = |spec: &TensorSpec| {
        let mut spec = spec.clone();
        if let Some(first) = spec.shape.first_mut() {
            *first = None;
        }
        spec
    };
    let mut signature = ModelMetadata {
        inputs: model.inputs.iter().map(open_batch).collect(),
        outputs: model.outputs.iter().map(open_batch).collect(),
    };
    if let Some(images) = images {
        let only = signature.inputs.len() == 1;
        let filled = signature.inputs.iter_mut().find(|s| images.name.as_ref().map_or(only, |n| *n == s.name));
        if let Some(input) = filled {
            for &axis in &images.spatial_axes {
                // A shape of another rank is refused when the variant loads, naming both.
                if let Some(dimension) = input.shape.get_mut(axis) {
                    *dimension = None;
                }
            }
        }
    }
    signature
}

/// A signature as people read it: `inputs image f32 [N, 3, 224, 224]; outputs …`.
pub fn describe(signature: &ModelMetadata) -> String {
    let list = |specs: &[TensorSpec]| {
        specs.iter().map(|s| format!("{} {} {}", s.name, s.dtype, s.shape_display())).collect::<Vec<_>>().join(", ")
    };
    format!("inputs {}; outputs {}", list(&signature.inputs), list(&signature.outputs))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor::DType;

    fn spec(name: &str, shape: &[usize]) -> TensorSpec {
        TensorSpec::new(name, DType::F32, shape.iter().map(|&d| Some(d)).collect::<Vec<_>>())
    }

    fn shapes(specs: &[TensorSpec]) -> Vec<Vec<Option<usize>>> {
        specs.iter().map(|s| s.shape.clone()).collect()
    }

    const N: Option<usize> = None;

    #[test]
    fn a_signature_taken_from_a_variant_leaves_open_the_size_its_images_are_resized_to() {
        let classifier =
            ModelMetadata { inputs: vec![spec("input", &[1, 3, 224, 224])], outputs: vec![spec("logits", &[1, 1000])] };
        let tensors = signature_of(&classifier, None);
        assert_eq!(shapes(&tensors.inputs), [[N, Some(3), Some(224), Some(224)]]);
        assert_eq!(shapes(&tensors.outputs), [[N, Some(1000)]], "outputs keep their sizes");
        let nchw = ImageInput { name: None, spatial_axes: [2, 3] };
        let images = signature_of(&classifier, Some(&nchw));
        assert_eq!(shapes(&images.inputs), [[N, Some(3), N, N]]);
        assert_eq!(images.outputs, tensors.outputs);

        // Of two inputs, only the one images fill, here channels last.
        let two = ModelMetadata {
            inputs: vec![spec("scale", &[1, 2]), spec("pixels", &[1, 260, 260, 3])],
            outputs: classifier.outputs.clone(),
        };
        let nhwc = ImageInput { name: Some("pixels".into()), spatial_axes: [1, 2] };
        assert_eq!(shapes(&signature_of(&two, Some(&nhwc)).inputs), [vec![N, Some(2)], vec![N, N, N, Some(3)]]);
        // Unnamed, images fill no input of two; one of another rank is left to the load
        // to refuse.
        assert_eq!(
            shapes(&signature_of(&two, Some(&nchw)).inputs),
            [vec![N, Some(2)], vec![N, Some(260), Some(260), Some(3)]]
        );
        let flat = ModelMetadata { inputs: vec![spec("x", &[1, 4])], outputs: classifier.outputs };
        assert_eq!(shapes(&signature_of(&flat, Some(&nchw)).inputs), [[N, Some(4)]]);
    }
}
