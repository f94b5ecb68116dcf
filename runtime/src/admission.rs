//! Admission: inputs are checked against the model's metadata before they queue, so
//! a bad request is refused with a reason and never reaches a backend.

use crate::backend::ModelMetadata;
use crate::error::Error;
use crate::request::Inputs;
use crate::tensor::Tensor;

/// A request that passed admission.
#[derive(Debug)]
pub(crate) struct Admitted {
    /// Tensors in the model's input order.
    pub tensors: Vec<Tensor>,
    /// Rows it adds to a batch.
    pub rows: usize,
    /// Trailing dimensions of every input: requests batch together only when equal.
    pub key: Vec<usize>,
}

/// Checks names, dtypes and shapes. `max_batch_size` (the configured one) bounds the
/// rows of a request to a model with an open dimension 0; a model with a fixed one takes
/// exactly its shape.
pub(crate) fn admit(
    model: &str,
    metadata: &ModelMetadata,
    max_batch_size: usize,
    inputs: Inputs,
) -> Result<Admitted, Error> {
    let invalid = |reason: String| Error::InvalidInput { model: model.to_string(), reason };
    let expected_names = || metadata.inputs.iter().map(|s| format!("`{}`", s.name)).collect::<Vec<_>>().join(", ");
    let mut slots: Vec<Option<Tensor>> = vec![None; metadata.inputs.len()];
    let unnamed_ok = metadata.inputs.len() == 1 && inputs.tensors.len() == 1;
    for (name, tensor) in inputs.tensors {
        let index = match name {
            None if unnamed_ok => 0,
            None => {
                return Err(invalid(format!(
                    "the model has {} inputs ({}): name each tensor",
                    metadata.inputs.len(),
                    expected_names()
                )));
            }
            Some(name) => metadata
                .inputs
                .iter()
                .position(|s| s.name == name)
                .ok_or_else(|| invalid(format!("unknown input `{name}`; the model takes {}", expected_names())))?,
        };
        if slots[index].replace(tensor).is_some() {
            return Err(invalid(format!("input `{}` given twice", metadata.inputs[index].name)));
        }
    }
    let dynamic = metadata.dynamic_batch();
    let mut tensors = Vec::with_capacity(slots.len());
    let mut rows = None;
    for (spec, slot) in metadata.inputs.iter().zip(slots) {
        let tensor = slot.ok_or_else(|| invalid(format!("missing input `{}`", spec.name)))?;
        let shape = tensor.shape();
        let describe = || {
            format!(
                "input `{}`: expected {} of shape {}, got {} of shape {:?}",
                spec.name,
                spec.dtype,
                spec.shape_display(),
                tensor.dtype(),
                shape
            )
        };
        if tensor.dtype() != spec.dtype || shape.len() != spec.shape.len() {
            return Err(invalid(describe()));
        }
        if let Some(dim) = spec.shape.iter().zip(shape).position(|(want, &got)| want.is_some_and(|w| w != got)) {
            return Err(invalid(format!("{} (dimension {dim} differs)", describe())));
        }
        if dynamic {
            let n = shape[0];
            if n == 0 {
                return Err(invalid(format!("input `{}` has no rows", spec.name)));
            }
            if *rows.get_or_insert(n) != n {
                return Err(invalid(format!("inputs disagree on dimension 0 ({} vs {n})", rows.unwrap_or(n))));
            }
        }
        tensors.push(tensor);
    }
    let rows = if dynamic { rows.unwrap_or(1) } else { 1 };
    if rows > max_batch_size {
        return Err(Error::RequestTooLarge { model: model.to_string(), rows, max_batch_size });
    }
    let key = batch_key(&tensors);
    Ok(Admitted { tensors, rows, key })
}

/// What requests must share to be batched together: every input's rank and trailing
/// dimensions.
pub(crate) fn batch_key(tensors: &[Tensor]) -> Vec<usize> {
    let mut key = Vec::new();
    for tensor in tensors {
        let shape = tensor.shape();
        key.push(shape.len());
        key.extend_from_slice(shape.get(1..).unwrap_or_default());
    }
    key
}

impl Admitted {
    /// Splits into requests of at most `max_rows` rows each, in row order, so that no
    /// batch larger than the model's in force is ever formed for it; `None` if an
    /// input does not have the request's rows (admission made sure they do).
    pub fn into_parts(self, max_rows: usize) -> Option<Vec<Admitted>> {
        let max_rows = max_rows.max(1);
        if self.rows <= max_rows {
            return Some(vec![self]);
        }
        let sizes: Vec<usize> = (0..self.rows).step_by(max_rows).map(|start| max_rows.min(self.rows - start)).collect();
        let mut parts: Vec<Admitted> = sizes
            .iter()
            .map(|&rows| Admitted { tensors: Vec::with_capacity(self.tensors.len()), rows, key: self.key.clone() })
            .collect();
        for tensor in self.tensors {
            for (part, piece) in parts.iter_mut().zip(tensor.split_rows(&sizes)?) {
                part.tensors.push(piece);
            }
        }
        Some(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::TensorSpec;
    use crate::tensor::DType;

    fn two_inputs() -> ModelMetadata {
        ModelMetadata {
            inputs: vec![
                TensorSpec::new("x", DType::F32, vec![None, Some(4)]),
                TensorSpec::new("k", DType::I64, vec![None, Some(2)]),
            ],
            outputs: vec![TensorSpec::new("y", DType::F32, vec![None, Some(3)])],
        }
    }

    fn reason(result: Result<Admitted, Error>) -> String {
        match result {
            Err(Error::InvalidInput { reason, .. }) => reason,
            other => panic!("expected InvalidInput, got {other:?}"),
        }
    }

    #[test]
    fn orders_named_inputs_as_the_model_does() {
        let inputs = Inputs::new().with("k", Tensor::full([2, 2], 1i64)).with("x", Tensor::full([2, 4], 0f32));
        let admitted = admit("m", &two_inputs(), 8, inputs).unwrap();
        assert_eq!(admitted.rows, 2);
        assert_eq!(admitted.tensors[0].dtype(), DType::F32);
        assert_eq!(admitted.key, vec![2, 4, 2, 2]);
    }

    #[test]
    fn a_large_request_splits_into_parts_of_at_most_the_batch_in_force() {
        let x: Vec<f32> = (0..7 * 4).map(|i| i as f32).collect();
        let k: Vec<i64> = (0..7 * 2).collect();
        let inputs =
            Inputs::new().with("x", Tensor::new([7, 4], x.clone()).unwrap()).with("k", Tensor::new([7, 2], k).unwrap());
        let parts = admit("m", &two_inputs(), 8, inputs).unwrap().into_parts(3).unwrap();
        assert_eq!(parts.iter().map(|p| p.rows).collect::<Vec<_>>(), vec![3, 3, 1]);
        assert!(parts.iter().all(|p| p.key == vec![2, 4, 2, 2] && p.tensors[1].rows() == p.rows));
        let rejoined = Tensor::concat_rows(parts.into_iter().map(|mut p| p.tensors.swap_remove(0)).collect()).unwrap();
        assert_eq!(rejoined.as_slice::<f32>().unwrap(), &x[..]);
        let whole = admit(
            "m",
            &two_inputs(),
            8,
            Inputs::new().with("x", Tensor::full([2, 4], 0f32)).with("k", Tensor::full([2, 2], 0i64)),
        );
        assert_eq!(whole.unwrap().into_parts(2).unwrap().len(), 1);
    }

    #[test]
    fn names_what_is_wrong() {
        let m = two_inputs();
        let x = || Tensor::full([1, 4], 0f32);
        let k = || Tensor::full([1, 2], 0i64);
        assert!(reason(admit("m", &m, 8, Inputs::new().with("x", x()))).contains("missing input `k`"));
        assert!(reason(admit("m", &m, 8, Inputs::new().with("x", x()).with("z", k()))).contains("unknown input `z`"));
        assert!(reason(admit("m", &m, 8, Inputs::from(x()))).contains("name each tensor"));
        let wrong_dtype = Inputs::new().with("x", Tensor::full([1, 4], 0i32)).with("k", k());
        assert!(reason(admit("m", &m, 8, wrong_dtype)).contains("expected f32 of shape [N, 4], got i32"));
        let wrong_dim = Inputs::new().with("x", Tensor::full([1, 5], 0f32)).with("k", k());
        assert!(reason(admit("m", &m, 8, wrong_dim)).contains("dimension 1 differs"));
        let wrong_rank = Inputs::new().with("x", Tensor::full([4], 0f32)).with("k", k());
        assert!(reason(admit("m", &m, 8, wrong_rank)).contains("shape [N, 4]"));
        let rows_differ = Inputs::new().with("x", Tensor::full([2, 4], 0f32)).with("k", k());
        assert!(reason(admit("m", &m, 8, rows_differ)).contains("disagree on dimension 0"));
    }

    #[test]
    fn refuses_requests_larger_than_a_batch() {
        let inputs = Inputs::new().with("x", Tensor::full([9, 4], 0f32)).with("k", Tensor::full([9, 2], 0i64));
        assert!(matches!(
            admit("m", &two_inputs(), 8, inputs),
            Err(Error::RequestTooLarge { rows: 9, max_batch_size: 8, .. })
        ));
    }

    #[test]
    fn a_fixed_batch_model_takes_exactly_its_shape() {
        let fixed = ModelMetadata {
            inputs: vec![TensorSpec::new("input", DType::F32, vec![Some(1), Some(4)])],
            outputs: vec![TensorSpec::new("output", DType::F32, vec![Some(1), Some(3)])],
        };
        assert_eq!(admit("m", &fixed, 1, Inputs::from(Tensor::full([1, 4], 0f32))).unwrap().rows, 1);
        assert!(reason(admit("m", &fixed, 1, Inputs::from(Tensor::full([2, 4], 0f32)))).contains("dimension 0"));
    }
}
