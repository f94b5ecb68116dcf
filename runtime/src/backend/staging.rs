//! Batch inputs staged in host memory the GPU reads directly (CUDA's pinned memory),
//! for a session on `cuda:N` whose config asks for it (`pinned_inputs`).
//!
//! From pageable memory the driver copies a batch through a buffer of its own, on the
//! calling thread and in pieces, before the device can read it; from pinned memory the
//! transfer is the device's alone. Pinning memory costs far more than copying into it,
//! so the staging tensors are kept, one per input and shape (batches on a GPU come in
//! the few sizes they are padded to; see [`MAX_STAGED`]), and each batch is copied
//! into them on up to four threads.

use std::collections::HashMap;

use ort::memory::{AllocationDevice, Allocator, AllocatorType, MemoryInfo, MemoryType};
use ort::session::Session;
use ort::value::DynTensor;

use super::ort_values::{element_type, fill};
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

    /// Copies each of `inputs` into the staging tensor of its input and shape, made on
    /// first use, and gives those tensors back in order.
    pub fn stage(&mut self, inputs: &[Tensor]) -> Result<Vec<&DynTensor>, ort::Error> {
        for (index, input) in inputs.iter().enumerate() {
            let key = (index, input.shape().to_vec());
            if self.tensors.len() >= MAX_STAGED && !self.tensors.contains_key(&key) {
                self.tensors.clear();
            }
            let staged = match self.tensors.entry(key) {
                std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
                std::collections::hash_map::Entry::Vacant(entry) => {
                    let tensor = DynTensor::new(&self.allocator, element_type(input.dtype()), input.shape().to_vec())?;
                    entry.insert(tensor)
                }
            };
            fill(staged, input)?;
        }
        Ok(inputs
            .iter()
            .enumerate()
            .filter_map(|(index, input)| self.tensors.get(&(index, input.shape().to_vec())))
            .collect())
    }
}
