//! A loaded model: its instance threads, its batcher, and admission in front of them.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use arc_swap::ArcSwap;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::admission::admit;
use crate::backend::onnx::OrtSessionConfig;
use crate::backend::{BackendFactory, ModelMetadata};
use crate::batching::BatchingConfig;
use crate::batching::queue::{Queue, timer_task};
use crate::batching::worker::{ModelNames, Pending, worker_task};
use crate::error::{BackendError, Error};
use crate::request::{Inputs, Output};

/// How to load and serve one ONNX model.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// Name requests use.
    pub name: String,
    /// The `.onnx` file.
    pub path: PathBuf,
    /// Sessions serving it, each on its own thread; batches are spread across them.
    #[serde(default = "one")]
    pub instances: usize,
    /// Dynamic batching knobs.
    #[serde(default)]
    pub batching: BatchingConfig,
    /// ONNX Runtime session settings.
    #[serde(default)]
    pub onnx: OrtSessionConfig,
}

fn one() -> usize {
    1
}

impl ModelConfig {
    /// A model called `name` loaded from `path`, with default settings.
    pub fn new(name: impl Into<String>, path: impl Into<PathBuf>) -> Self {
        ModelConfig {
            name: name.into(),
            path: path.into(),
            instances: 1,
            batching: BatchingConfig::default(),
            onnx: OrtSessionConfig::default(),
        }
    }

    /// Sets the number of instances.
    pub fn with_instances(mut self, instances: usize) -> Self {
        self.instances = instances;
        self
    }

    /// Sets the batching knobs.
    pub fn with_batching(mut self, batching: BatchingConfig) -> Self {
        self.batching = batching;
        self
    }

    /// Sets the session settings.
    pub fn with_onnx(mut self, onnx: OrtSessionConfig) -> Self {
        self.onnx = onnx;
        self
    }
}

/// A model that serves requests.
pub struct Model {
    name: Arc<str>,
    metadata: ModelMetadata,
    instances: usize,
    batching: ArcSwap<BatchingConfig>,
    queue: Arc<Queue>,
}

impl Model {
    /// Starts `instances` backends made by `factory`, each on its own thread, and the
    /// batcher in front of them. Blocks until every instance has loaded; if one fails,
    /// the others are let go and the error is returned.
    pub fn start(
        name: &str,
        factory: BackendFactory,
        instances: usize,
        batching: BatchingConfig,
    ) -> Result<Model, Error> {
        if instances == 0 {
            return Err(Error::Config(format!("model `{name}`: instances must be at least 1")));
        }
        batching.validate()?;
        let load_error = |source: BackendError| Error::Load { model: name.to_string(), source: Arc::new(source) };
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (start_tx, start_rx) = crossbeam_channel::bounded::<(Arc<ModelNames>, Arc<Queue>)>(instances);
        let mut job_senders = Vec::with_capacity(instances);
        for index in 0..instances {
            let (job_tx, job_rx) = crossbeam_channel::bounded(1);
            job_senders.push(job_tx);
            let (factory, ready, start) = (factory.clone(), ready_tx.clone(), start_rx.clone());
            std::thread::Builder::new()
                .name(format!("modelless-{name}-{index}"))
                .spawn(move || {
                    let backend = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| factory())) {
                        Ok(Ok(backend)) => backend,
                        Ok(Err(e)) => return drop(ready.send(Err(e))),
                        Err(_) => {
                            return drop(ready.send(Err(BackendError::Panicked("while loading".into()))));
                        }
                    };
                    if ready.send(Ok(backend.metadata().clone())).is_err() {
                        return;
                    }
                    if let Ok((names, queue)) = start.recv() {
                        worker_task(names, backend, job_rx, queue, index);
                    }
                })
                .map_err(|e| Error::Config(format!("cannot start a thread for model `{name}`: {e}")))?;
        }
        drop(ready_tx);
        let mut metadata = None;
        for _ in 0..instances {
            let loaded = ready_rx.recv().map_err(|_| Error::ShuttingDown)?.map_err(load_error)?;
            if metadata.as_ref().is_some_and(|m| *m != loaded) {
                return Err(load_error(BackendError::OutputMismatch(
                    "instances disagree on the model's inputs".into(),
                )));
            }
            metadata = Some(loaded);
        }
        let metadata = metadata.ok_or(Error::ShuttingDown)?;
        let batching = effective_batching(name, &metadata, batching);
        let names = Arc::new(ModelNames {
            model: Arc::from(name),
            outputs: metadata.outputs.iter().map(|o| o.name.clone()).collect(),
        });
        let queue = Queue::new(names.model.clone(), batching.clone(), job_senders);
        for _ in 0..instances {
            start_tx.send((names.clone(), queue.clone())).map_err(|_| Error::ShuttingDown)?;
        }
        let timer_queue = queue.clone();
        std::thread::Builder::new()
            .name(format!("modelless-{name}-timer"))
            .spawn(move || timer_task(timer_queue))
            .map_err(|e| Error::Config(format!("cannot start a thread for model `{name}`: {e}")))?;
        Ok(Model { name: names.model.clone(), metadata, instances, batching: ArcSwap::from_pointee(batching), queue })
    }

    /// The model's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Inputs and outputs.
    pub fn metadata(&self) -> &ModelMetadata {
        &self.metadata
    }

    /// Number of instances.
    pub fn instances(&self) -> usize {
        self.instances
    }

    /// The batching knobs in force.
    pub fn batching(&self) -> BatchingConfig {
        self.batching.load().as_ref().clone()
    }

    /// Changes the batching knobs; they apply from the next batch on.
    pub fn configure(&self, batching: BatchingConfig) -> Result<(), Error> {
        batching.validate()?;
        let batching = effective_batching(&self.name, &self.metadata, batching);
        self.batching.store(Arc::new(batching.clone()));
        self.queue.configure(batching);
        Ok(())
    }

    /// Checks and queues a request; the ticket resolves to its answer. Refused at once
    /// when the inputs do not fit the model or the queue is full.
    pub fn submit(&self, inputs: Inputs, deadline: Option<Instant>) -> Result<Ticket, Error> {
        let admitted_at = Instant::now();
        let admitted = admit(&self.name, &self.metadata, self.batching.load().max_batch_size, inputs)?;
        let (reply, answer) = oneshot::channel();
        let pending = Pending {
            tensors: admitted.tensors,
            rows: admitted.rows,
            key: admitted.key,
            deadline,
            admitted: admitted_at,
            reply,
        };
        self.queue.submit(pending)?;
        Ok(Ticket { answer })
    }

    /// Runs one request and waits for its answer.
    pub async fn infer(&self, inputs: Inputs, deadline: Option<Instant>) -> Result<Output, Error> {
        self.submit(inputs, deadline)?.await_answer().await
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        self.queue.close();
    }
}

/// A model with a fixed dimension 0 runs one request per batch.
fn effective_batching(name: &str, metadata: &ModelMetadata, mut batching: BatchingConfig) -> BatchingConfig {
    if !metadata.dynamic_batch() && batching.max_batch_size != 1 {
        tracing::info!(model = name, "dimension 0 is fixed: serving one request per batch");
        batching.max_batch_size = 1;
        batching.preferred_batch_sizes.clear();
    }
    batching
}

/// The answer to a submitted request, to wait for. Dropping it withdraws the request
/// if it has not run yet.
#[must_use = "dropping a ticket withdraws its request"]
pub struct Ticket {
    answer: oneshot::Receiver<Result<Output, Error>>,
}

impl Ticket {
    /// Waits for the answer.
    pub async fn await_answer(self) -> Result<Output, Error> {
        self.answer.await.map_err(|_| Error::ShuttingDown)?
    }

    /// Waits for the answer, blocking the thread. Do not call it on an async executor.
    pub fn wait(self) -> Result<Output, Error> {
        self.answer.blocking_recv().map_err(|_| Error::ShuttingDown)?
    }
}
