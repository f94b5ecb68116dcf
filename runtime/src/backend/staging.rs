//! Batch inputs staged in host memory the GPU reads directly (CUDA's pinned memory),
//! for a session on `cuda:N` whose config asks for it (`pinned_inputs`).
//!
//! From pageable memory the driver copies a batch through a buffer of its own, on the
//! calling thread and in pieces, before the device can read it; from pinned memory the
//! transfer is the device's alone. Pinning memory costs far more than copying into it,
//! so the staging tensors are kept, one per input and shape (batches on a GPU come in
//! the few sizes they are padded to; see [`MAX_STAGED`]). Each batch's requests are
//! joined straight into them, on up to four threads: a row is copied once on the host.

use std::collections::HashMap;

use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::Session;
use ort::value::DynTensor;

use super::ort_values::{element_type, fill_joined};
use super::parts_disagree;
use crate::error::BackendError;
use crate::tensor::Tensor;

/// The most staging tensors a session keeps. Padded GPU batches come in about twenty
/// shapes; a model whose other sides vary too (pages of any size) would otherwise
/// pin a tensor for every shape it ever met, so past this many all are let go.
const MAX_STAGED: usize = 32;

/// The staging tensors of one session.
pub(crate) struct Staging {
    allocator: Allocator,
    /// By input and shape.
    tensors: HashMap<(usize, Vec<usize>), DynTensor>,
}

impl Staging {
    /// Staging in pinned memory of CUDA device `index`, from `session`'s provider.
    pub fn pinned(session: &Session, index: u32) -> Result<Self, ort::Error> {
        let index = i32::try_from(index).map_err(|e| ort::Error::new(e.to_string()))?;
        let memory =
            MemoryInfo::new(AllocationDevice::CUDA_PINNED, index, AllocatorType::Device, MemoryType::CPUInput)?;
        Staging::in_memory(session, memory)
    }

    /// Staging in `memory` (any the CPU can write).
    pub fn in_memory(session: &Session, memory: MemoryInfo) -> Result<Self, ort::Error> {
        Ok(Staging { allocator: Allocator::new(session, memory)?, tensors: HashMap::new() })
    }

    /// Joins each input's tensors (`columns[i]` holds input `i`'s, in the batch's order),
    /// then `pad_rows` rows of zeros, into the staging tensor of its input and joined
    /// shape, made on first use, and gives those tensors back in order. An input
    /// mismatch where a column's tensors disagree on dtype or trailing dimensions.
    pub fn stage(&mut self, columns: &[&[Tensor]], pad_rows: usize) -> Result<Vec<&DynTensor>, BackendError> {
        let ort_err = |source| BackendError::Ort { context: "staging a batch".into(), source };
        let (mut keys, mut dtypes) = (Vec::with_capacity(columns.len()), Vec::with_capacity(columns.len()));
        for (index, column) in columns.iter().enumerate() {
            let (dtype, shape) = Tensor::joined_shape(column, pad_rows).ok_or_else(parts_disagree)?;
            keys.push((index, shape));
            dtypes.push(dtype);
        }
        // Let go of all before the batch rather than during it, which would drop the
        // tensors of its first inputs.
        let new = keys.iter().filter(|key| !self.tensors.contains_key(key)).count();
        if self.tensors.len() + new > MAX_STAGED {
            self.tensors.clear();
        }
        for ((key, dtype), column) in keys.iter().zip(dtypes).zip(columns) {
            let staged = match self.tensors.entry(key.clone()) {
                std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::hash_map::Entry::Vacant(entry) => {
                    let tensor = DynTensor::new(&self.allocator, element_type(dtype), key.1.clone());
                    entry.insert(tensor.map_err(ort_err)?)
                }
            };
            fill_joined(staged, column).map_err(ort_err)?;
        }
        Ok(keys.iter().filter_map(|key| self.tensors.get(key)).collect())
    }
}
