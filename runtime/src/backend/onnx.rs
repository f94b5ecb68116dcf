//! [`OrtBackend`]: ONNX models on ONNX Runtime, on the CPU or on an NVIDIA GPU through
//! its CUDA execution provider.
//!
//! The CUDA provider comes with the GPU build of the library (PyPI's
//! `onnxruntime-gpu`, `onnxruntime/capi/`, with `libonnxruntime_providers_cuda.so`
//! beside it and the CUDA 13 libraries on the loader's path); point `library_path` or
//! `ORT_DYLIB_PATH` at it. A variant that asks for `cuda:N` where the library, the
//! driver or the GPU is missing fails to load with [`BackendError::DeviceUnavailable`]
//! (or loads on the CPU, when its config says `fallback_to_cpu`).
//!
//! ONNX Runtime is loaded at run time from a shared library (`ort`'s `load-dynamic`),
//! found where users install it: see [`super::onnx_library`] for the order.
//!
//! ONNX Runtime allows one environment per process, so the first runtime to need it
//! fixes its settings. Sessions share that environment's intra-op thread pool unless
//! their own config asks for threads, so that instances and loaded models do not
//! oversubscribe the cores.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ort::ep::ExecutionProvider;
use ort::session::builder::{GraphOptimizationLevel, SessionBuilder};
use ort::session::{Session, SessionInputValue};
use ort::value::{TensorElementType, ValueType};
use serde::{Deserialize, Serialize};

use super::bound_runs::BoundRuns;
use super::ort_values::{host_memory, read_outputs, view};
use super::staging::Staging;
use super::{
    Backend, BackendFactory, Batch, BatchOutput, BatchParts, CudaOptions, Device, ModelMetadata, TensorSpec,
    load_with_fallback,
};
use crate::error::BackendError;
use crate::tensor::{DType, Tensor};

/// Process-wide ONNX Runtime settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrtEnvironmentConfig {
    /// The `libonnxruntime.so` to load; see the module docs for the search order.
    pub library_path: Option<PathBuf>,
    /// Threads of the shared intra-op pool; 0 lets ONNX Runtime choose (one per core).
    pub intra_op_threads: usize,
    /// Threads of the shared inter-op pool; 0 lets ONNX Runtime choose.
    pub inter_op_threads: usize,
    /// Let idle pool threads spin briefly before sleeping (lower latency, more CPU).
    pub spinning: Option<bool>,
    /// Run one batch at a time across all sessions of the process, in the order they
    /// are ready. When the pool covers every core, batches of co-located tasks (or of
    /// a variant draining beside the one replacing it) that run at once slow each
    /// other down (a switch under load on 2 cores: one batch 10 times its time); in
    /// turns each gets the whole machine.
    pub one_run_at_a_time: bool,
}

/// Whether sessions take turns (set with the environment, process-wide like it).
static ONE_RUN_AT_A_TIME: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl OrtEnvironmentConfig {
    /// Sets the library to load.
    pub fn with_library_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.library_path = Some(path.into());
        self
    }

    /// Sets the shared intra-op pool's size.
    pub fn with_intra_op_threads(mut self, threads: usize) -> Self {
        self.intra_op_threads = threads;
        self
    }

    /// Sets whether idle pool threads spin.
    pub fn with_spinning(mut self, spinning: bool) -> Self {
        self.spinning = Some(spinning);
        self
    }

    /// Makes batches of all sessions take turns (see `one_run_at_a_time`).
    pub fn with_one_run_at_a_time(mut self, one_at_a_time: bool) -> Self {
        self.one_run_at_a_time = one_at_a_time;
        self
    }
}

/// Graph optimisation level of a session.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OptimizationLevel {
    /// No graph optimisation.
    Disable,
    /// Redundancy removal, constant folding.
    Basic,
    /// Plus node fusions.
    Extended,
    /// Everything, including layout changes.
    #[default]
    All,
}

/// Settings of one model's sessions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct OrtSessionConfig {
    /// Give each session its own intra-op pool of this size instead of the shared one.
    pub intra_op_threads: Option<usize>,
    /// Inter-op threads of the session's own pool (with `intra_op_threads`).
    pub inter_op_threads: Option<usize>,
    /// Whether the session's own pool threads spin (with `intra_op_threads`).
    pub spinning: Option<bool>,
    /// Graph optimisation level.
    pub optimization_level: OptimizationLevel,
    /// The CUDA provider's settings, for a variant on `cuda:N`.
    #[serde(skip_serializing_if = "CudaOptions::is_default")]
    pub cuda: CudaOptions,
}

impl OrtSessionConfig {
    /// Gives each session its own intra-op pool of `threads`.
    pub fn with_intra_op_threads(mut self, threads: usize) -> Self {
        self.intra_op_threads = Some(threads);
        self
    }

    /// Sets the graph optimisation level.
    pub fn with_optimization_level(mut self, level: OptimizationLevel) -> Self {
        self.optimization_level = level;
        self
    }

    /// Sets the CUDA provider's settings.
    pub fn with_cuda(mut self, cuda: CudaOptions) -> Self {
        self.cuda = cuda;
        self
    }
}

static ENVIRONMENT: Mutex<Option<ort::environment::Environment>> = Mutex::new(None);

/// The process's ONNX Runtime environment, created on first use with `config`.
/// Later calls get the same environment whatever their config says.
pub fn environment(config: &OrtEnvironmentConfig) -> Result<ort::environment::Environment, BackendError> {
    let mut slot = ENVIRONMENT.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some(env) = slot.as_ref() {
        return Ok(env.clone());
    }
    let library = super::onnx_library::find_library(config.library_path.as_deref())?;
    let ort_err = |context: &str| {
        let context = context.to_string();
        move |source: ort::Error| BackendError::Ort { context, source }
    };
    let builder = ort::init_from(&library).map_err(|e| BackendError::Ort {
        context: format!("loading {}", library.display()),
        source: ort::Error::new(e.to_string()),
    })?;
    let mut pool = ort::environment::GlobalThreadPoolOptions::default()
        .with_intra_threads(config.intra_op_threads)
        .and_then(|p| p.with_inter_threads(config.inter_op_threads))
        .map_err(ort_err("configuring the thread pool"))?;
    if let Some(spin) = config.spinning {
        pool = pool.with_spin_control(spin).map_err(ort_err("configuring spinning"))?;
    }
    let env = builder
        .with_name("modelless")
        .with_global_thread_pool(pool)
        .build()
        .map_err(ort_err("creating the environment"))?;
    ONE_RUN_AT_A_TIME.store(config.one_run_at_a_time, std::sync::atomic::Ordering::Relaxed);
    *slot = Some(env.clone());
    Ok(env)
}

/// One ONNX Runtime session.
pub struct OrtBackend {
    session: Session,
    metadata: ModelMetadata,
    device: Device,
    /// Where batches are joined before the session reads them, where they are: pinned
    /// memory, or host memory of the session's own for runs on kept device tensors.
    staging: Option<Staging>,
    /// The tensors batches run on, kept per batch size, where runs are captured as CUDA
    /// graphs.
    bound: Option<BoundRuns>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for OrtBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OrtBackend").finish_non_exhaustive()
    }
}

impl OrtBackend {
    /// Loads `path` into a new session of `env` on `device`.
    pub fn load(
        env: &ort::environment::Environment,
        path: &Path,
        config: &OrtSessionConfig,
        device: Device,
    ) -> Result<Self, BackendError> {
        // Read the file ourselves so that a missing file is an I/O error, not an ORT one.
        let bytes = std::fs::read(path).map_err(|source| BackendError::ModelFile { path: path.into(), source })?;
        let context = format!("loading {}", path.display());
        let ort_err = |source| BackendError::Ort { context: context.clone(), source };
        let builder = configure(Session::builder(env).map_err(ort_err)?, config).map_err(ort_err)?;
        let session = on_device(builder, device, &config.cuda)?.commit_from_memory(&bytes).map_err(ort_err)?;
        let metadata = ModelMetadata {
            inputs: session.inputs().iter().map(|o| spec("input", o.name(), o.dtype())).collect::<Result<_, _>>()?,
            outputs: session.outputs().iter().map(|o| spec("output", o.name(), o.dtype())).collect::<Result<_, _>>()?,
        };
        let bound = match device.cuda_index().filter(|_| config.cuda.cuda_graph == Some(true)) {
            // Every run of a session that captures graphs must name one, so without its
            // kept tensors the session cannot serve.
            Some(index) => Some(device_runs(&session, index, &metadata).map_err(ort_err)?),
            None => None,
        };
        let staging = match pinned_staging(&session, device, &config.cuda) {
            Some(pinned) => Some(pinned),
            // Kept device tensors are filled from tensors the session allocated.
            None if bound.is_some() => Some(host_staging(&session)?),
            None => None,
        };
        Ok(OrtBackend { session, metadata, device, staging, bound })
    }

    /// Joins every batch in host memory of ONNX Runtime's own before the session reads
    /// it, as a session on `cuda:N` with `pinned_inputs` joins it in pinned memory: the
    /// same path, where there is no GPU.
    pub fn with_host_staging(mut self) -> Result<Self, BackendError> {
        self.staging = Some(host_staging(&self.session)?);
        Ok(self)
    }

    /// Runs every batch on input and output tensors kept per batch size, as a session on
    /// `cuda:N` with `cuda_graph` runs them on device tensors: the same path, in host
    /// memory, where there is no GPU. ONNX Runtime copies batches into them and answers
    /// out of them, as it does on a device.
    pub fn with_bound_runs(mut self) -> Result<Self, BackendError> {
        let memory = host_memory();
        let bound = memory
            .and_then(|memory| BoundRuns::new(&self.session, memory, &self.metadata.inputs, &self.metadata.outputs));
        let bound = bound.map_err(|source| BackendError::Ort { context: "keeping tensors for runs".into(), source })?;
        self.bound = Some(bound);
        if self.staging.is_none() {
            self.staging = Some(host_staging(&self.session)?);
        }
        Ok(self)
    }

    /// A factory that loads `path` with `config` in the shared environment, on the CPU.
    pub fn factory(env_config: OrtEnvironmentConfig, path: PathBuf, config: OrtSessionConfig) -> BackendFactory {
        OrtBackend::factory_on(env_config, path, config, Device::Cpu, false)
    }

    /// A factory that loads `path` with `config` on `device`; where the device cannot
    /// be had, on the CPU if `fallback_to_cpu`, else not at all.
    pub fn factory_on(
        env_config: OrtEnvironmentConfig,
        path: PathBuf,
        config: OrtSessionConfig,
        device: Device,
        fallback_to_cpu: bool,
    ) -> BackendFactory {
        // The environment's thread pool is made here, on the caller's thread, rather
        // than by the factory on a loader thread: threads take the priority of the
        // thread that starts them, and a loader's is the lowest, so every batch the
        // pool ran would have yielded to any other work. Where it cannot be made yet,
        // the factory says why.
        let _ = environment(&env_config);
        Arc::new(move || {
            let env = environment(&env_config)?;
            let load = |device| OrtBackend::load(&env, &path, &config, device);
            Ok(Box::new(load_with_fallback(device, fallback_to_cpu, &path, load)?))
        })
    }
}

/// Staging in pinned memory for a session on `cuda:N` whose settings ask for it. Where
/// the provider cannot give such memory, batches are read from their own, as without
/// the setting, and the log says why.
fn pinned_staging(session: &Session, device: Device, cuda: &CudaOptions) -> Option<Staging> {
    let index = device.cuda_index().filter(|_| cuda.pinned_inputs == Some(true))?;
    Staging::pinned(session, index)
        .inspect_err(
            |e| tracing::warn!(%device, error = %e, "no pinned memory for batches: reading them where they are"),
        )
        .ok()
}

/// Staging in plain host memory.
fn host_staging(session: &Session) -> Result<Staging, BackendError> {
    let staging = host_memory().and_then(|memory| Staging::in_memory(session, memory));
    staging.map_err(|source| BackendError::Ort { context: "staging in host memory".into(), source })
}

/// Runs on tensors in the memory of CUDA device `index`, for a session that captures
/// CUDA graphs.
fn device_runs(session: &Session, index: u32, metadata: &ModelMetadata) -> Result<BoundRuns, ort::Error> {
    let index = i32::try_from(index).map_err(|e| ort::Error::new(e.to_string()))?;
    let memory = ort::memory::MemoryInfo::new(
        ort::memory::AllocationDevice::CUDA,
        index,
        ort::memory::AllocatorType::Device,
        ort::memory::MemoryType::Default,
    )?;
    BoundRuns::new(session, memory, &metadata.inputs, &metadata.outputs)
}

/// The device a variant configured for `device` is profiled and loaded on: the CPU where
/// it asks for a GPU this ONNX Runtime library has no provider for and may fall back.
pub fn device_to_load(env_config: &OrtEnvironmentConfig, device: Device, fallback_to_cpu: bool) -> Device {
    let has_cuda =
        || environment(env_config).is_ok() && <ort::ep::CUDA as ExecutionProvider>::is_available().unwrap_or(false);
    if device.cuda_index().is_some() && fallback_to_cpu && !has_cuda() { Device::Cpu } else { device }
}

/// Registers the execution provider of `device`. ONNX Runtime would quietly run on the
/// CPU where the provider fails to register; a variant configured for a GPU must not.
fn on_device(mut builder: SessionBuilder, device: Device, cuda: &CudaOptions) -> Result<SessionBuilder, BackendError> {
    let Some(index) = device.cuda_index() else { return Ok(builder) };
    let unavailable = |reason: String| BackendError::DeviceUnavailable { device: device.to_string(), reason };
    if !<ort::ep::CUDA as ExecutionProvider>::is_available().unwrap_or(false) {
        return Err(unavailable(
            "this ONNX Runtime library has no CUDA execution provider; load the GPU build \
             (PyPI's onnxruntime-gpu) through `library_path` or ORT_DYLIB_PATH"
                .into(),
        ));
    }
    cuda.provider(index).register(&mut builder).map_err(|e| unavailable(e.to_string()))?;
    Ok(builder)
}

fn configure(builder: SessionBuilder, config: &OrtSessionConfig) -> Result<SessionBuilder, ort::Error> {
    let level = match config.optimization_level {
        OptimizationLevel::Disable => GraphOptimizationLevel::Disable,
        OptimizationLevel::Basic => GraphOptimizationLevel::Level1,
        OptimizationLevel::Extended => GraphOptimizationLevel::Level2,
        OptimizationLevel::All => GraphOptimizationLevel::All,
    };
    let mut builder = builder.with_optimization_level(level)?;
    if let Some(threads) = config.intra_op_threads {
        builder = builder.with_independent_thread_pool()?.with_intra_threads(threads)?;
        if let Some(inter) = config.inter_op_threads {
            builder = builder.with_inter_threads(inter)?;
        }
        if let Some(spin) = config.spinning {
            builder = builder.with_intra_op_spinning(spin)?;
        }
    }
    Ok(builder)
}

fn spec(what: &'static str, name: &str, ty: &ValueType) -> Result<TensorSpec, BackendError> {
    let unsupported = || BackendError::UnsupportedType { what, name: name.into(), ty: format!("{ty:?}") };
    let ValueType::Tensor { ty: element, shape, .. } = ty else {
        return Err(unsupported());
    };
    let dtype = match element {
        TensorElementType::Float32 => DType::F32,
        TensorElementType::Float16 => DType::F16,
        TensorElementType::Int64 => DType::I64,
        TensorElementType::Int32 => DType::I32,
        TensorElementType::Uint8 => DType::U8,
        TensorElementType::Bool => DType::Bool,
        _ => return Err(unsupported()),
    };
    let shape: Vec<Option<usize>> = shape.iter().map(|&d| usize::try_from(d).ok()).collect();
    Ok(TensorSpec::new(name, dtype, shape))
}

impl Backend for OrtBackend {
    fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    fn warmup_batch_sizes(&self, max_batch_size: usize) -> Vec<usize> {
        let mut sizes = arena_warmup_sizes(max_batch_size);
        // A size's graph is captured at its second run (its first lays out its memory);
        // every other size is run twice already.
        if self.bound.is_some() {
            sizes.push(1);
        }
        sizes
    }

    fn device(&self) -> Device {
        self.device
    }

    fn takes_turns(&self) -> bool {
        ONE_RUN_AT_A_TIME.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn joins_batches(&self) -> bool {
        self.staging.is_some()
    }

    fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError> {
        if self.staging.is_some() {
            let columns: Vec<&[Tensor]> = batch.inputs.iter().map(std::slice::from_ref).collect();
            return self.infer_staged(&columns, 0);
        }
        // Views of the batch's memory, which the instance reuses for its next batch.
        let names = self.metadata.inputs.iter().map(|spec| std::borrow::Cow::from(spec.name.as_str()));
        let inputs = names
            .zip(batch.inputs.iter())
            .map(|(name, tensor)| Ok((name, view(tensor)?)))
            .collect::<Result<Vec<_>, ort::Error>>()
            .map_err(run_err)?;
        // The worker serving it holds the turn already; warm-up and profiling runs take
        // one here.
        let turn = self.takes_turns().then(|| super::turns::RUN_TURNS.take());
        let outputs = self.session.run(inputs).map_err(run_err)?;
        drop(turn);
        Ok(BatchOutput::new(read_outputs(&outputs, &self.metadata.outputs).map_err(run_err)?))
    }

    fn infer_parts(&mut self, parts: BatchParts) -> Result<BatchOutput, BackendError> {
        if self.staging.is_none() {
            return self.infer(parts.join()?);
        }
        let columns: Vec<&[Tensor]> = parts.columns.iter().map(Vec::as_slice).collect();
        self.infer_staged(&columns, parts.pad_rows)
    }
}

impl OrtBackend {
    /// Joins each input's `columns` and `pad_rows` rows of zeros in the staging
    /// tensors, and runs the session on them (on its kept tensors, where it keeps any).
    fn infer_staged(&mut self, columns: &[&[Tensor]], pad_rows: usize) -> Result<BatchOutput, BackendError> {
        let takes_turns = self.takes_turns();
        let staging = self.staging.as_mut().ok_or_else(|| run_err(ort::Error::new("no staging tensors")))?;
        let staged = staging.stage(columns, pad_rows)?;
        let turn = takes_turns.then(|| super::turns::RUN_TURNS.take());
        let outputs = match &mut self.bound {
            Some(bound) => bound.run(&mut self.session, &staged),
            None => {
                let names = self.metadata.inputs.iter().map(|spec| std::borrow::Cow::from(spec.name.as_str()));
                let inputs: Vec<_> = names.zip(staged.into_iter().map(SessionInputValue::from)).collect();
                self.session.run(inputs).and_then(|outputs| read_outputs(&outputs, &self.metadata.outputs))
            }
        };
        drop(turn);
        Ok(BatchOutput::new(outputs.map_err(run_err)?))
    }
}

/// The error of a run that failed in ONNX Runtime.
fn run_err(source: ort::Error) -> BackendError {
    BackendError::Ort { context: "running a batch".into(), source }
}

/// Batch sizes after which no batch up to `max_batch_size` grows the session's memory
/// arena: each size from the largest down to 1, then back up.
///
/// ONNX Runtime lays out a new input shape's buffers afresh, and its arena grows where
/// the free space left by earlier shapes does not fit: at the second run of the
/// largest batch, and at the first run of some middle sizes after it. Growth is fresh
/// memory, every page of it faulted in during the run: MobileNetV2-1.4 at batch 8,
/// 2 cores, about 22 000 pages, and the batch ran 52 ms instead of 32 alone, 200 ms
/// instead of 42 beside other tasks' work on a virtual machine. Warmed at the largest
/// size and 1 only, 300 batches of random size served afterwards faulted 28 500 pages
/// in; warmed at these sizes, 6.
///
/// Above [`EVERY_SIZE_UP_TO`] the sizes thin out to powers of two and the largest, so
/// that a large `max_batch_size` does not square the warm-up's cost.
fn arena_warmup_sizes(max_batch_size: usize) -> Vec<usize> {
    let max = max_batch_size.max(1);
    let ascending: Vec<usize> =
        (1..=max).filter(|&b| b <= EVERY_SIZE_UP_TO || b.is_power_of_two() || b == max).collect();
    ascending.iter().rev().chain(&ascending[1..]).copied().collect()
}

/// Batch sizes up to which [`arena_warmup_sizes`] runs every size.
const EVERY_SIZE_UP_TO: usize = 16;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_arena_warms_up_down_to_one_and_back_up() {
        assert_eq!(arena_warmup_sizes(4), vec![4, 3, 2, 1, 2, 3, 4]);
        assert_eq!(arena_warmup_sizes(1), vec![1]);
        assert_eq!(arena_warmup_sizes(0), vec![1]);
    }

    #[test]
    fn above_sixteen_the_warm_up_keeps_powers_of_two_and_the_largest() {
        let sizes = arena_warmup_sizes(40);
        let down: Vec<usize> = [40, 32].into_iter().chain((1..=16).rev()).collect();
        let up: Vec<usize> = (2..=16).chain([32, 40]).collect();
        assert_eq!(sizes, [down, up].concat());
    }
}
