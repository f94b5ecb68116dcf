//! An instance's batch inputs, assembled from its requests' tensors into memory the
//! instance keeps from one batch to the next, and padded to a warmed size where the
//! model asks for it. A backend that joins batches itself (into pinned staging) gets
//! the padding only.
//!
//! Memory kept is what holds a large batch's host-side cost to its rows: a fresh
//! allocation of a batch above glibc's mmap threshold is mapped anew each time, and
//! the kernel faults in and zeroes every page again (an averaging model's batch of 64
//! images cost 22 times its batch of 16 that way on 2 cores).

use crate::tensor::Tensor;

/// Assembles the inputs of one instance's batches.
pub(crate) struct BatchAssembler {
    /// Per input, the tensor the last batch was assembled into: its memory is reused
    /// once the backend and the answers let go of it.
    spare: Vec<Option<Tensor>>,
    /// Sizes batches are padded up to, ascending; empty: none is padded.
    pad_sizes: Vec<usize>,
}

impl BatchAssembler {
    /// An assembler padding batches up to `pad_sizes` (ascending; empty for none).
    pub fn new(pad_sizes: Vec<usize>) -> Self {
        BatchAssembler { spare: Vec::new(), pad_sizes }
    }

    /// The rows of zeros that take a batch of `rows` to the next size to pad to; 0
    /// where it is one, or larger than all.
    pub fn pad_rows(&self, rows: usize) -> usize {
        self.pad_sizes.iter().find(|&&size| size >= rows).map_or(0, |&size| size - rows)
    }

    /// Joins each input's column of request tensors (`columns[i]` holds every request's
    /// tensor of input `i`, in the batch's order), then `pad_rows` rows of zeros; `None`
    /// when a column's tensors disagree on dtype or trailing dimensions.
    pub fn assemble(&mut self, columns: Vec<Vec<Tensor>>, pad_rows: usize) -> Option<Vec<Tensor>> {
        if self.spare.len() < columns.len() {
            self.spare.resize(columns.len(), None);
        }
        let mut inputs = Vec::with_capacity(columns.len());
        for (mut column, spare) in columns.into_iter().zip(&mut self.spare) {
            // A lone request's tensor is the batch as it is: nothing to copy.
            if column.len() == 1 && pad_rows == 0 {
                inputs.push(column.pop()?);
                continue;
            }
            let input = Tensor::concat_rows_into(&column, pad_rows, spare.take())?;
            *spare = Some(input.clone());
            inputs.push(input);
        }
        Some(inputs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(value: f32) -> Tensor {
        Tensor::full([1, 2], value)
    }

    fn memory(t: &Tensor) -> *const f32 {
        t.as_slice::<f32>().unwrap().as_ptr()
    }

    #[test]
    fn batches_reuse_the_memory_the_last_one_let_go_of() {
        let mut assembler = BatchAssembler::new(Vec::new());
        let first = assembler.assemble(vec![vec![row(1.), row(2.), row(3.)]], 0).unwrap();
        let at = memory(&first[0]);
        drop(first);
        let second = assembler.assemble(vec![vec![row(4.), row(5.)]], 0).unwrap();
        assert_eq!(memory(&second[0]), at, "the backend let go: the same memory");
        assert_eq!(second[0].as_slice::<f32>().unwrap(), &[4., 4., 5., 5.]);
        let held = second[0].clone();
        drop(second);
        let third = assembler.assemble(vec![vec![row(6.), row(7.)]], 0).unwrap();
        assert_ne!(memory(&third[0]), at, "an answer still holds it: fresh memory");
        assert_eq!(held.as_slice::<f32>().unwrap(), &[4., 4., 5., 5.], "and it keeps its elements");
    }

    #[test]
    fn a_lone_request_is_its_own_batch_unless_it_is_padded() {
        let mut assembler = BatchAssembler::new(Vec::new());
        let alone = row(1.);
        let assembled = assembler.assemble(vec![vec![alone.clone()]], 0).unwrap();
        assert_eq!(memory(&assembled[0]), memory(&alone), "nothing copied");
        let mut padding = BatchAssembler::new(vec![1, 2, 4, 8]);
        assert_eq!(padding.pad_rows(3), 1);
        let padded = padding.assemble(vec![vec![row(1.), row(2.), row(3.)]], 1).unwrap();
        assert_eq!(padded[0].shape(), &[4, 2]);
        assert_eq!(padded[0].as_slice::<f32>().unwrap(), &[1., 1., 2., 2., 3., 3., 0., 0.]);
        assert_eq!(padding.pad_rows(8), 0);
        assert_eq!(padding.pad_rows(9), 0, "above every warmed size: run as it is");
        assert_eq!(padding.pad_rows(5), 3);
    }

    #[test]
    fn columns_that_disagree_are_refused() {
        let mut assembler = BatchAssembler::new(Vec::new());
        assert!(assembler.assemble(vec![vec![row(1.), Tensor::full([1, 3], 1f32)]], 0).is_none());
    }
}
