//! A fake backend for tests of batching, concurrency and failure handling: it echoes
//! its f32 input `input` [N, width] (or rows of another shape) as `output`, takes a configurable time per batch,
//! records the batch sizes it ran, and fails or panics on marked rows.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Backend, BackendFactory, Batch, BatchOutput, BatchParts, ModelMetadata, TensorSpec};
use crate::error::BackendError;
use crate::tensor::DType;

/// A row whose first element is this value makes the batch fail.
pub const FAIL_ROW: f32 = -1.0;
/// A row whose first element is this value makes the backend panic.
pub const PANIC_ROW: f32 = -2.0;

/// How the fake behaves.
#[derive(Clone, Debug)]
pub struct FakeConfig {
    /// Elements per row.
    pub width: usize,
    /// Whether dimension 0 is open (batchable) or fixed at 1.
    pub dynamic_batch: bool,
    /// Time every batch takes.
    pub per_batch: Duration,
    /// Time each row adds.
    pub per_row: Duration,
    /// Fail loading instead of creating a backend.
    pub fail_load: bool,
    /// Memory each row of a batch holds while it runs, as [`BatchLog`]'s probe reports.
    pub memory_per_row: u64,
    /// Whether its runs take the process's turns, as sessions that run one at a time do.
    pub takes_turns: bool,
    /// Dimensions of a row, when not `[width]` (an image's `[3, H, W]`, say).
    pub row_shape: Option<Vec<usize>>,
    /// Whether it takes batches unjoined, as a session staging them does.
    pub joins_batches: bool,
}

impl Default for FakeConfig {
    fn default() -> Self {
        FakeConfig {
            width: 4,
            dynamic_batch: true,
            per_batch: Duration::ZERO,
            per_row: Duration::ZERO,
            fail_load: false,
            memory_per_row: 0,
            takes_turns: false,
            row_shape: None,
            joins_batches: false,
        }
    }
}

/// The batches the fake's instances ran, in order: (instance, rows, first element);
/// and, as a memory probe, the most memory a batch held.
#[derive(Clone, Debug, Default)]
pub struct BatchLog {
    batches: Arc<Mutex<Vec<(usize, usize, f32)>>>,
    peak_memory: Arc<AtomicU64>,
    unjoined: Arc<AtomicUsize>,
}

impl BatchLog {
    /// The most memory a batch held so far (the fake's memory probe reads it).
    pub fn peak_memory(&self) -> u64 {
        self.peak_memory.load(Ordering::Relaxed)
    }

    /// How many batches it was handed unjoined.
    pub fn unjoined(&self) -> usize {
        self.unjoined.load(Ordering::Relaxed)
    }

    /// Rows of each batch run so far.
    pub fn sizes(&self) -> Vec<usize> {
        self.entries().into_iter().map(|(_, rows, _)| rows).collect()
    }

    /// Which instance ran each batch.
    pub fn instances(&self) -> Vec<usize> {
        self.entries().into_iter().map(|(instance, ..)| instance).collect()
    }

    /// The first element of each batch, which tells whose request led it.
    pub fn leaders(&self) -> Vec<f32> {
        self.entries().into_iter().map(|(.., first)| first).collect()
    }

    fn entries(&self) -> Vec<(usize, usize, f32)> {
        self.batches.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

/// The fake backend.
pub struct FakeBackend {
    config: FakeConfig,
    metadata: ModelMetadata,
    log: BatchLog,
    instance: usize,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for FakeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBackend").finish_non_exhaustive()
    }
}

impl FakeBackend {
    /// A factory of fakes that all record into `log`.
    pub fn factory(config: FakeConfig, log: BatchLog) -> BackendFactory {
        // A fresh counter per factory, so instance numbers start at 0 for each model.
        let created = AtomicUsize::new(0);
        Arc::new(move || {
            if config.fail_load {
                return Err(BackendError::Injected("fake load failure".into()));
            }
            let dim0 = if config.dynamic_batch { None } else { Some(1) };
            let row = config.row_shape.clone().unwrap_or_else(|| vec![config.width]);
            let shape: Vec<Option<usize>> = std::iter::once(dim0).chain(row.into_iter().map(Some)).collect();
            let spec = |name: &str| TensorSpec::new(name, DType::F32, shape.clone());
            let metadata = ModelMetadata { inputs: vec![spec("input")], outputs: vec![spec("output")] };
            let instance = created.fetch_add(1, Ordering::Relaxed);
            Ok(Box::new(FakeBackend { config: config.clone(), metadata, log: log.clone(), instance }))
        })
    }
}

impl Backend for FakeBackend {
    fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    fn takes_turns(&self) -> bool {
        self.config.takes_turns
    }

    fn joins_batches(&self) -> bool {
        self.config.joins_batches
    }

    fn infer_parts(&mut self, parts: BatchParts) -> Result<BatchOutput, BackendError> {
        self.log.unjoined.fetch_add(1, Ordering::Relaxed);
        self.infer(parts.join()?)
    }

    fn infer(&mut self, batch: Batch) -> Result<BatchOutput, BackendError> {
        let _turn = self.config.takes_turns.then(|| super::turns::RUN_TURNS.take());
        let input = batch.inputs.into_iter().next().ok_or_else(|| BackendError::Injected("no input".into()))?;
        let rows = input.rows();
        let values = input.as_slice::<f32>().unwrap_or_default();
        self.log.peak_memory.fetch_max(rows as u64 * self.config.memory_per_row, Ordering::Relaxed);
        if let Ok(mut log) = self.log.batches.lock() {
            log.push((self.instance, rows, values.first().copied().unwrap_or(f32::NAN)));
        }
        std::thread::sleep(self.config.per_batch + self.config.per_row * rows as u32);
        for row in values.chunks(self.config.width.max(1)) {
            match row.first() {
                Some(&FAIL_ROW) => {
                    return Err(BackendError::Injected("fake failure on a marked row".into()));
                }
                Some(&PANIC_ROW) => panic!("fake panic on a marked row"),
                _ => {}
            }
        }
        Ok(BatchOutput::new(vec![input]))
    }
}
