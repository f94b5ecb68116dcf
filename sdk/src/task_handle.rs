//! [`TaskHandle`]: one task of a runtime, reached without naming it on every call.

use std::sync::Arc;

use modelless_runtime::{Error, Inputs, Output, Slo, SwitchReport, Task, TaskStatus, Ticket};

use crate::off_thread::off_thread;

/// One task of a [`crate::Runtime`] ([`crate::Runtime::task`]): ask it for answers,
/// switch its variant, set its instances, read its status. Cheap to clone; it stays
/// valid while the runtime serves the task, and calls on it after the task is removed
/// fail with [`Error::ShuttingDown`].
#[derive(Clone)]
pub struct TaskHandle {
    task: Arc<Task>,
}

// Its parts (sessions, queues, threads) print nothing useful.
impl std::fmt::Debug for TaskHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TaskHandle").field("name", &self.task.name()).finish_non_exhaustive()
    }
}

impl TaskHandle {
    pub(crate) fn new(task: Arc<Task>) -> Self {
        TaskHandle { task }
    }

    /// The task's name.
    pub fn name(&self) -> &str {
        self.task.name()
    }

    /// An answer meeting `slo`; the runtime picks the variant. Refused at once, with
    /// the reason, when it cannot be answered in time.
    pub async fn infer(&self, inputs: impl Into<Inputs>, slo: Slo) -> Result<Output, Error> {
        self.submit(inputs, slo)?.await_answer().await
    }

    /// Like [`TaskHandle::infer`], blocking the thread. Do not call it on an async
    /// executor.
    pub fn infer_blocking(&self, inputs: impl Into<Inputs>, slo: Slo) -> Result<Output, Error> {
        self.submit(inputs, slo)?.wait()
    }

    /// Checks and queues a request without waiting for its answer.
    pub fn submit(&self, inputs: impl Into<Inputs>, slo: Slo) -> Result<Ticket, Error> {
        self.task.submit(inputs.into(), &slo)
    }

    /// Makes `variant` the one serving, loading and warming it first if need be (on a
    /// thread of its own: the caller's executor keeps running). No request fails
    /// because of a switch.
    pub async fn switch(&self, variant: &str) -> Result<SwitchReport, Error> {
        let (task, variant) = (self.task.clone(), variant.to_string());
        off_thread("modelless-switch", move || task.switch_to(&variant)).await
    }

    /// Serves `variant` with `instances` instances (at least one), added ones loaded and warmed before they take
    /// batches, removed ones finishing theirs; for a variant not loaded, the instances
    /// it loads with.
    pub async fn set_instances(&self, variant: &str, instances: usize) -> Result<(), Error> {
        let (task, variant) = (self.task.clone(), variant.to_string());
        off_thread("modelless-scale", move || {
            if task.want_instances(&variant, instances)? {
                task.scale_instances(&variant)?;
            }
            Ok(())
        })
        .await
    }

    /// Its variants, versions, instances and their states.
    pub fn status(&self) -> TaskStatus {
        self.task.status()
    }
}
