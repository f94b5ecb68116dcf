//! A variant's sessions seen through its task's signature: requests come in the task's
//! order and names, answers leave in them, reshaped where the variant's outputs carry
//! other dimensions of size 1. Reshaping moves no element.

use std::sync::{Arc, OnceLock};

use super::{Binding, ImageInput, TensorMaps, bind, signature_of};
use crate::backend::{Backend, BackendFactory, Batch, BatchOutput, BatchParts, Device, ModelMetadata};
use crate::error::BackendError;
use crate::tensor::Tensor;

/// Sessions made by `factory`, for variant `variant` of task `task`, bound onto the
/// task's signature: the one in `signature`, or, while it holds none, the variant's
/// own as [`signature_of`] opens it (the task's first variant sets it; `images` is the
/// input the variant fills from images, if any). A variant that does not fit fails to
/// load with [`BackendError::DoesNotFitTask`].
pub fn bound_factory(
    factory: BackendFactory,
    task: Arc<str>,
    variant: String,
    maps: TensorMaps,
    images: Option<ImageInput>,
    signature: Arc<OnceLock<ModelMetadata>>,
) -> BackendFactory {
    Arc::new(move || {
        let backend = factory()?;
        let signature = signature.get_or_init(|| signature_of(backend.metadata(), images.as_ref()));
        let binding =
            bind(&task, &variant, signature, backend.metadata(), &maps).map_err(BackendError::DoesNotFitTask)?;
        if binding.is_identity(backend.metadata()) {
            return Ok(backend);
        }
        Ok(Box::new(BoundBackend { inner: backend, binding }))
    })
}

/// A session behind the mapping of its [`Binding`].
struct BoundBackend {
    inner: Box<dyn Backend + Send>,
    binding: Binding,
}

impl Backend for BoundBackend {
    fn metadata(&self) -> &ModelMetadata {
        &self.binding.presented
    }

    fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError> {
        let inputs = self.in_variant_order(batch.inputs)?;
        let rows = inputs.first().map_or(1, Tensor::rows);
        let outputs = if self.binding.one_row && rows > 1 { self.row_by_row(inputs, rows)? } else { self.run(inputs)? };
        self.presented(outputs)
    }

    fn joins_batches(&self) -> bool {
        !self.binding.one_row && self.inner.joins_batches()
    }

    fn infer_parts(&mut self, parts: BatchParts) -> Result<BatchOutput, BackendError> {
        if !self.joins_batches() {
            return self.infer(parts.join()?);
        }
        let columns = self.in_variant_order(parts.columns)?;
        let outputs = self.inner.infer_parts(BatchParts { columns, pad_rows: parts.pad_rows })?.outputs;
        self.presented(outputs)
    }

    fn warmup_batch_sizes(&self, max_batch_size: usize) -> Vec<usize> {
        self.inner.warmup_batch_sizes(max_batch_size)
    }

    fn device(&self) -> Device {
        self.inner.device()
    }

    fn takes_turns(&self) -> bool {
        self.inner.takes_turns()
    }
}

impl BoundBackend {
    /// The task's inputs (tensors, or their columns) in the variant's order.
    fn in_variant_order<T>(&self, inputs: Vec<T>) -> Result<Vec<T>, BackendError> {
        let mut slots: Vec<Option<T>> = (0..self.binding.inputs.len()).map(|_| None).collect();
        for (input, &m) in inputs.into_iter().zip(&self.binding.inputs) {
            if let Some(slot) = slots.get_mut(m) {
                *slot = Some(input);
            }
        }
        let inputs = slots.into_iter().collect::<Option<Vec<_>>>();
        inputs.ok_or_else(|| BackendError::InputMismatch("a batch lacks an input of the variant".into()))
    }

    /// The variant's outputs as the task presents them: in its order, reshaped.
    fn presented(&self, outputs: Vec<Tensor>) -> Result<BatchOutput, BackendError> {
        let mut outputs: Vec<Option<Tensor>> = outputs.into_iter().map(Some).collect();
        let mut answer = Vec::with_capacity(self.binding.outputs.len());
        for (&(m, reshape), spec) in self.binding.outputs.iter().zip(&self.binding.presented.outputs) {
            let tensor = outputs.get_mut(m).and_then(Option::take).ok_or_else(|| {
                BackendError::OutputMismatch(format!("the variant gave no output for `{}`", spec.name))
            })?;
            let tensor = if reshape { reshaped(tensor, &spec.shape, &spec.name)? } else { tensor };
            answer.push(tensor);
        }
        Ok(BatchOutput::new(answer))
    }

    /// One run of the variant, its tensors in its own order.
    fn run(&mut self, inputs: Vec<Tensor>) -> Result<Vec<Tensor>, BackendError> {
        Ok(self.inner.infer(Batch { inputs })?.outputs)
    }

    /// Runs of one row each, for a variant whose batch dimension is fixed at 1, their
    /// outputs joined in row order.
    fn row_by_row(&mut self, inputs: Vec<Tensor>, rows: usize) -> Result<Vec<Tensor>, BackendError> {
        let uneven = || BackendError::InputMismatch("inputs of one batch disagree on rows".into());
        let ones = vec![1; rows];
        let mut per_input = Vec::with_capacity(inputs.len());
        for tensor in inputs {
            per_input.push(tensor.split_rows(&ones).ok_or_else(uneven)?.into_iter());
        }
        let mut columns: Vec<Vec<Tensor>> = Vec::new();
        for _ in 0..rows {
            let row = per_input.iter_mut().map(Iterator::next).collect::<Option<Vec<_>>>().ok_or_else(uneven)?;
            let outputs = self.run(row)?;
            columns.resize_with(outputs.len(), || Vec::with_capacity(rows));
            for (column, output) in columns.iter_mut().zip(outputs) {
                column.push(output);
            }
        }
        let joined = columns.into_iter().map(Tensor::concat_rows).collect::<Option<Vec<_>>>();
        joined.ok_or_else(|| BackendError::OutputMismatch("the variant's runs disagree on output shapes".into()))
    }
}

/// `tensor` in the task's `shape` (open dimensions filled from the tensor's own, in
/// order, once dimensions of size 1 are set aside on both sides).
fn reshaped(tensor: Tensor, shape: &[Option<usize>], name: &str) -> Result<Tensor, BackendError> {
    let mismatch = |have: &[usize]| {
        BackendError::OutputMismatch(format!("output `{name}` of shape {have:?} cannot take the task's {shape:?}"))
    };
    let have = tensor.shape().to_vec();
    let Some((&rows, rest)) = have.split_first() else { return Err(mismatch(&have)) };
    let mut sized = rest.iter().copied().filter(|&d| d != 1);
    let mut target = Vec::with_capacity(shape.len());
    target.push(rows);
    for &want in shape.iter().skip(1) {
        match want {
            Some(1) => target.push(1),
            want => match sized.next() {
                Some(d) if want.is_none_or(|w| w == d) => target.push(d),
                _ => return Err(mismatch(&have)),
            },
        }
    }
    if sized.next().is_some() {
        return Err(mismatch(&have));
    }
    tensor.reshape(target).map_err(|_| mismatch(&have))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::TensorSpec;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use crate::tensor::DType;

    #[test]
    fn a_variant_that_joins_batches_itself_gets_them_unjoined_through_the_binding() {
        // The task names its tensors otherwise than the fake does: bound by position.
        let spec = |name: &str| TensorSpec::new(name, DType::F32, vec![None, Some(4)]);
        let signature = ModelMetadata { inputs: vec![spec("x")], outputs: vec![spec("y")] };
        let log = BatchLog::default();
        let fake = FakeBackend::factory(FakeConfig { joins_batches: true, ..FakeConfig::default() }, log.clone());
        let factory =
            bound_factory(fake, "t".into(), "v".into(), TensorMaps::default(), None, Arc::new(signature.into()));
        let mut backend = factory().unwrap();
        assert_eq!(backend.metadata().inputs[0].name, "x", "bound onto the task's names");
        assert!(backend.joins_batches());
        let rows = |v: f32, n: usize| Tensor::full([n, 4], v);
        let parts = BatchParts { columns: vec![vec![rows(1., 1), rows(2., 2)]], pad_rows: 1 };
        let output = backend.infer_parts(parts).unwrap().outputs.remove(0);
        assert_eq!(log.unjoined(), 1, "handed on unjoined");
        let want = [[1.; 4], [2.; 4], [2.; 4], [0.; 4]].concat();
        assert_eq!((output.shape(), output.as_slice::<f32>().unwrap()), (&[4, 4][..], &want[..]));
    }

    #[test]
    fn outputs_take_the_task_shape_without_copying() {
        let logits = Tensor::new([2, 3, 1, 1], vec![1.0f32, 2.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let before = logits.as_slice::<f32>().unwrap().as_ptr();
        let flat = reshaped(logits, &[None, Some(3)], "logits").unwrap();
        assert_eq!(flat.shape(), &[2, 3]);
        assert_eq!(flat.as_slice::<f32>().unwrap().as_ptr(), before);
        let widened = reshaped(flat, &[None, Some(1), Some(3)], "logits").unwrap();
        assert_eq!(widened.shape(), &[2, 1, 3]);
        assert!(reshaped(widened, &[None, Some(4)], "logits").is_err());
        assert!(reshaped(Tensor::zeros(DType::F32, [2, 3, 2]), &[None, Some(3)], "x").is_err());
    }
}
