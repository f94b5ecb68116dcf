//! Conversions between the runtime's tensors and ONNX Runtime's values, for the ONNX
//! backend and the tensors it keeps (staging, bound runs).

use half::f16;
use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{SessionInputValue, SessionOutputs};
use ort::value::{DynTensor, TensorElementType, TensorRef, TensorValueTypeMarker, Value};

use super::TensorSpec;
use crate::tensor::{DType, Element, Tensor, copy_joined, with_elements};

/// A view of `tensor` as a session input: ONNX Runtime reads the elements in place.
pub(super) fn view(tensor: &Tensor) -> Result<SessionInputValue<'_>, ort::Error> {
    let shape = tensor.shape();
    with_elements!(tensor.data(), v => Ok(TensorRef::from_array_view((shape, v.as_slice()))?.into_dyn().into()))
}

/// A copy of host tensor `value`, whose elements are `dtype`.
pub(super) fn read<V: TensorValueTypeMarker + ?Sized>(value: &Value<V>, dtype: DType) -> Result<Tensor, ort::Error> {
    fn copy<T: Element + ort::value::PrimitiveTensorElementType, V: TensorValueTypeMarker + ?Sized>(
        value: &Value<V>,
    ) -> Result<Tensor, ort::Error> {
        let (shape, elements) = value.try_extract_tensor::<T>()?;
        let shape: Vec<usize> = shape.iter().map(|&d| d.max(0) as usize).collect();
        Tensor::new(shape, T::into_data(elements.to_vec())).map_err(|e| ort::Error::new(e.to_string()))
    }
    match dtype {
        DType::F32 => copy::<f32, V>(value),
        DType::F16 => copy::<f16, V>(value),
        DType::I64 => copy::<i64, V>(value),
        DType::I32 => copy::<i32, V>(value),
        DType::U8 => copy::<u8, V>(value),
        DType::Bool => copy::<bool, V>(value),
    }
}

/// Copies `parts`' elements one after another into host tensor `into`, of their type,
/// and zeroes the rest of it (on several threads where they are many).
pub(super) fn fill_joined(into: &mut DynTensor, parts: &[Tensor]) -> Result<(), ort::Error> {
    fn copy<T: Element + Default + ort::value::PrimitiveTensorElementType + std::fmt::Debug>(
        into: &mut DynTensor,
        parts: &[Tensor],
    ) -> Result<(), ort::Error> {
        let elements = parts.iter().map(Tensor::as_slice::<T>).collect::<Option<Vec<_>>>();
        let elements = elements.ok_or_else(|| ort::Error::new("the tensors of an input disagree on their type"))?;
        let (_, into) = into.try_extract_tensor_mut::<T>()?;
        copy_joined(&elements, into).ok_or_else(|| ort::Error::new("more elements than the tensor holds"))
    }
    match parts.first().map(Tensor::dtype) {
        None => Ok(()),
        Some(DType::F32) => copy::<f32>(into, parts),
        Some(DType::F16) => copy::<f16>(into, parts),
        Some(DType::I64) => copy::<i64>(into, parts),
        Some(DType::I32) => copy::<i32>(into, parts),
        Some(DType::U8) => copy::<u8>(into, parts),
        Some(DType::Bool) => copy::<bool>(into, parts),
    }
}

/// The outputs `specs` of a run, copied out of `outputs` (in host memory).
pub(super) fn read_outputs(outputs: &SessionOutputs<'_>, specs: &[TensorSpec]) -> Result<Vec<Tensor>, ort::Error> {
    specs
        .iter()
        .map(|spec| {
            let value =
                outputs.get(&spec.name).ok_or_else(|| ort::Error::new(format!("output `{}` missing", spec.name)))?;
            read(value, spec.dtype)
        })
        .collect()
}

/// Plain host memory, as the CPU provider allocates it.
pub(super) fn host_memory() -> Result<MemoryInfo<'static>, ort::Error> {
    MemoryInfo::new(AllocationDevice::CPU, 0, AllocatorType::Device, MemoryType::Default)
}

/// ONNX Runtime's name for `dtype`.
pub(super) fn element_type(dtype: DType) -> TensorElementType {
    match dtype {
        DType::F32 => TensorElementType::Float32,
        DType::F16 => TensorElementType::Float16,
        DType::I64 => TensorElementType::Int64,
        DType::I32 => TensorElementType::Int32,
        DType::U8 => TensorElementType::Uint8,
        DType::Bool => TensorElementType::Bool,
    }
}
