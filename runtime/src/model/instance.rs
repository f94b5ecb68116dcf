//! One instance of a model: its backend created and warmed up on the loader thread,
//! which yields the CPU to threads that serve.

use std::sync::Arc;
use std::time::Duration;

use super::options::{LoadPhase, PhaseCallback};
use crate::backend::{Backend, BackendFactory, ModelMetadata};
use crate::batching::BatchingConfig;
use crate::error::{BackendError, Error};
use crate::warmup::{WarmupConfig, sizes_to_warm, warm_up};

/// A backend created and warmed up, ready to serve.
pub(super) struct LoadedInstance {
    pub(super) backend: Box<dyn Backend + Send>,
    pub(super) warmup: Option<Duration>,
    /// Sizes its batches are padded up to (see [`WarmupConfig::pad_to_warmed`]).
    pub(super) pad_sizes: Vec<usize>,
}

/// Creates `count` instances' backends and warms them up, each on a loader thread of
/// the lowest priority, so that loading beside models that serve does not starve
/// them (the warm-up's batches also use the shared intra-op pool; measured, a
/// low-priority caller still slows serving far less than one of normal priority).
/// Blocks until all have loaded; if one fails, the others are let go and its error
/// is returned.
pub(super) fn load_instances(
    name: &str,
    factory: &BackendFactory,
    batching: &BatchingConfig,
    warmup: &WarmupConfig,
    count: usize,
    on_phase: Option<PhaseCallback>,
) -> Result<Vec<LoadedInstance>, Error> {
    let (loaded_tx, loaded_rx) = std::sync::mpsc::channel();
    for index in 0..count {
        let (factory, loaded) = (factory.clone(), loaded_tx.clone());
        let (name, batching, warmup, on_phase) = (name.to_string(), batching.clone(), warmup.clone(), on_phase.clone());
        spawn(format!("modelless-{name}-load-{index}"), move || {
            lower_priority();
            let _ = loaded.send(load_instance(&name, &factory, batching, &warmup, index, on_phase));
        })?;
    }
    drop(loaded_tx);
    let load_error = |source: BackendError| Error::Load { model: name.to_string(), source: Arc::new(source) };
    (0..count).map(|_| loaded_rx.recv().map_err(|_| Error::ShuttingDown)?.map_err(load_error)).collect()
}

/// Creates one instance's backend and warms it up; on the loader thread. The first
/// instance to finish creating reports the warming phase.
fn load_instance(
    name: &str,
    factory: &BackendFactory,
    batching: BatchingConfig,
    warmup: &WarmupConfig,
    index: usize,
    on_phase: Option<PhaseCallback>,
) -> Result<LoadedInstance, BackendError> {
    let mut backend = create(factory)?;
    if index == 0
        && let Some(on_phase) = on_phase
    {
        on_phase(LoadPhase::Warming);
    }
    let metadata = backend.metadata().clone();
    let max_batch_size = effective_batching(name, &metadata, batching).max_batch_size;
    let config = warmup;
    let warmup = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        warm_up(backend.as_mut(), &metadata, max_batch_size, config)
    })) {
        Ok(took) => took?,
        Err(_) => return Err(BackendError::Panicked("while warming up".into())),
    };
    let warmed =
        if warmup.is_some() { sizes_to_warm(backend.as_ref(), &metadata, max_batch_size, config) } else { Vec::new() };
    let pad_sizes = config.pad_sizes(backend.device(), &warmed);
    Ok(LoadedInstance { backend, warmup, pad_sizes })
}

/// Creates one backend, containing a panic.
fn create(factory: &BackendFactory) -> Result<Box<dyn Backend + Send>, BackendError> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| factory())) {
        Ok(result) => result,
        Err(_) => Err(BackendError::Panicked("while loading".into())),
    }
}

/// Loading and teardown yield the CPU to threads that serve. Best effort:
/// where the system refuses, they run at normal priority.
pub(crate) fn lower_priority() {
    // On Linux this applies to the calling thread only.
    if let Err(e) = rustix::process::setpriority_process(None, LOAD_NICENESS) {
        tracing::debug!(error = %e, "cannot lower the loader thread's priority");
    }
}

/// Niceness of loader threads (0 is normal, 19 the lowest priority).
const LOAD_NICENESS: i32 = 19;

pub(super) fn spawn(name: String, f: impl FnOnce() + Send + 'static) -> Result<(), Error> {
    std::thread::Builder::new()
        .name(name.clone())
        .spawn(move || {
            // `top -H` and `ps -L` cut names to 15 bytes, which leaves a model's
            // threads alike ("modelless-resne"); the id logged here tells them apart.
            let tid = rustix::thread::gettid().as_raw_nonzero();
            tracing::debug!(thread = std::thread::current().name().unwrap_or_default(), tid, "thread started");
            f()
        })
        .map(drop)
        .map_err(|e| Error::thread_start(format!("thread {name}"), e))
}

/// A model with a fixed dimension 0 runs one request per batch.
pub(super) fn effective_batching(name: &str, metadata: &ModelMetadata, mut batching: BatchingConfig) -> BatchingConfig {
    if !metadata.dynamic_batch() && batching.max_batch_size != 1 {
        tracing::info!(model = name, "dimension 0 is fixed: serving one request per batch");
        batching.max_batch_size = 1;
        batching.preferred_batch_sizes.clear();
    }
    batching
}
