//! The libtorch session behind a TorchScript variant.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use half::f16;
use tch::{CModule, IValue, Kind};

use super::TorchScriptConfig;
use crate::backend::{
    Backend, BackendFactory, Batch, BatchOutput, Device, ModelMetadata, TensorSpec, load_with_fallback,
};
use crate::error::{BackendError, Cause};
use crate::tensor::{DType, Element, Tensor, with_elements};

/// One TorchScript module on one device.
pub struct TchBackend {
    module: CModule,
    metadata: ModelMetadata,
    device: Device,
    on: tch::Device,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for TchBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TchBackend").finish_non_exhaustive()
    }
}

impl TchBackend {
    /// Loads the module at `path` onto `device`.
    pub fn load(path: &Path, config: &TorchScriptConfig, device: Device) -> Result<Self, BackendError> {
        if config.inputs.is_empty() || config.outputs.is_empty() {
            return Err(BackendError::Undeclared { path: path.into() });
        }
        let on = torch_device(device)?;
        crate::backend::freed_memory::keep_freed_memory();
        if let Some(threads) = config.intra_op_threads {
            tch::set_num_threads(threads.max(1) as i32);
        }
        // Read the file ourselves so that a missing file is an I/O error.
        let bytes = std::fs::read(path).map_err(|source| BackendError::ModelFile { path: path.into(), source })?;
        let mut module = CModule::load_data_on_device(&mut bytes.as_slice(), on)
            .map_err(|e| torch_error(format!("loading {}", path.display()), e))?;
        module.set_eval();
        let metadata = ModelMetadata {
            inputs: config.inputs.iter().map(super::TensorDeclaration::spec).collect(),
            outputs: config.outputs.iter().map(super::TensorDeclaration::spec).collect(),
        };
        Ok(TchBackend { module, metadata, device, on })
    }

    /// A factory that loads `path` onto `device`; where the device cannot be had, onto
    /// the CPU if `fallback_to_cpu`, else not at all.
    pub fn factory(path: PathBuf, config: TorchScriptConfig, device: Device, fallback_to_cpu: bool) -> BackendFactory {
        Arc::new(move || {
            let load = |device| TchBackend::load(&path, &config, device);
            Ok(Box::new(load_with_fallback(device, fallback_to_cpu, &path, load)?))
        })
    }

    fn run(&self, batch: Batch) -> Result<Vec<tch::Tensor>, BackendError> {
        let inputs: Vec<IValue> = batch
            .inputs
            .iter()
            .map(|t| to_torch(t, self.on).map(IValue::Tensor))
            .collect::<Result<_, _>>()
            .map_err(|e| torch_error("copying a batch's inputs", e))?;
        let _no_grad = tch::no_grad_guard();
        let output = self.module.forward_is(&inputs).map_err(|e| torch_error("running a batch", e))?;
        let tensors = match output {
            IValue::Tensor(t) => vec![t],
            IValue::Tuple(items) | IValue::GenericList(items) => items
                .into_iter()
                .map(|item| match item {
                    IValue::Tensor(t) => Ok(t),
                    other => Err(BackendError::OutputMismatch(format!(
                        "forward returned a {} among its outputs",
                        ivalue_kind(&other)
                    ))),
                })
                .collect::<Result<_, _>>()?,
            IValue::TensorList(tensors) => tensors,
            other => {
                return Err(BackendError::OutputMismatch(format!(
                    "forward returned a {}, not tensors",
                    ivalue_kind(&other)
                )));
            }
        };
        Ok(tensors)
    }
}

/// The libtorch device for `device`, if this machine has it.
fn torch_device(device: Device) -> Result<tch::Device, BackendError> {
    let Some(index) = device.cuda_index() else { return Ok(tch::Device::Cpu) };
    let count = super::cuda_library::cuda_device_count();
    if index as i64 >= count {
        let reason = if count == 0 {
            "libtorch finds no CUDA device (no GPU, no driver, or a CPU-only PyTorch)".to_string()
        } else {
            format!("libtorch finds {count} CUDA device(s)")
        };
        return Err(BackendError::DeviceUnavailable { device: device.to_string(), reason });
    }
    Ok(tch::Device::Cuda(index as usize))
}

fn ivalue_kind(value: &IValue) -> &'static str {
    match value {
        IValue::None => "None",
        IValue::Bool(_) => "bool",
        IValue::Int(_) => "int",
        IValue::Double(_) => "float",
        IValue::String(_) => "string",
        IValue::GenericDict(_) => "dict",
        _ => "value of another kind",
    }
}

/// libtorch's `error` while doing `context`.
fn torch_error(context: impl Into<String>, error: tch::TchError) -> BackendError {
    BackendError::Torch { context: context.into(), source: Cause::new(error) }
}

/// A copy of `tensor` on `on`. Read where it is: the worker keeps the batch's memory
/// for its next batch, so taking the elements out would copy them once more.
fn to_torch(tensor: &Tensor, on: tch::Device) -> Result<tch::Tensor, tch::TchError> {
    let dims: Vec<i64> = tensor.shape().iter().map(|&d| d as i64).collect();
    let flat = with_elements!(tensor.data(), v => tch::Tensor::f_from_slice(v))?;
    flat.f_reshape(&dims).and_then(|t| t.f_to_device(on))
}

fn from_torch(tensor: &tch::Tensor, spec: &TensorSpec) -> Result<Tensor, BackendError> {
    fn extract<T: Element + tch::kind::Element>(tensor: &tch::Tensor, name: &str) -> Result<Tensor, BackendError> {
        let reading = || format!("reading output `{name}`");
        let tensor = tensor.f_to_device(tch::Device::Cpu).map_err(|e| torch_error(reading(), e))?.contiguous();
        let shape: Vec<usize> = tensor.size().iter().map(|&d| d.max(0) as usize).collect();
        let numel = shape.iter().product::<usize>();
        let mut values = vec![<T as tch::kind::Element>::ZERO; numel];
        tensor.f_copy_data(&mut values, numel).map_err(|e| torch_error(reading(), e))?;
        Tensor::new(shape, T::into_data(values)).map_err(|source| BackendError::Shape { what: reading(), source })
    }
    let declared = spec.dtype;
    let actual = tensor.kind();
    // A declared type is what answers carry; the module's own must be that type.
    let matches = matches!(
        (declared, actual),
        (DType::F32, Kind::Float)
            | (DType::F16, Kind::Half)
            | (DType::I64, Kind::Int64)
            | (DType::I32, Kind::Int)
            | (DType::U8, Kind::Uint8)
            | (DType::Bool, Kind::Bool)
    );
    if !matches {
        return Err(BackendError::OutputMismatch(format!(
            "output `{}` is {actual:?}, declared {declared:?}",
            spec.name
        )));
    }
    match declared {
        DType::F32 => extract::<f32>(tensor, &spec.name),
        DType::F16 => extract::<f16>(tensor, &spec.name),
        DType::I64 => extract::<i64>(tensor, &spec.name),
        DType::I32 => extract::<i32>(tensor, &spec.name),
        DType::U8 => extract::<u8>(tensor, &spec.name),
        DType::Bool => extract::<bool>(tensor, &spec.name),
    }
}

impl Backend for TchBackend {
    fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    fn device(&self) -> Device {
        self.device
    }

    fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError> {
        let tensors = self.run(batch)?;
        if tensors.len() != self.metadata.outputs.len() {
            return Err(BackendError::OutputMismatch(format!(
                "forward returned {} tensors, the config declares {} outputs",
                tensors.len(),
                self.metadata.outputs.len()
            )));
        }
        let outputs = tensors
            .iter()
            .zip(&self.metadata.outputs)
            .map(|(tensor, spec)| from_torch(tensor, spec))
            .collect::<Result<_, _>>()?;
        Ok(BatchOutput::new(outputs))
    }
}
