//! Requests to a runtime in this process.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use modelless_runtime::policy_abi::RunTotals;
use modelless_runtime::{Error, Inputs, Slo, Tensor};

use super::record::Status;
use super::runner::{Answer, Target};
use super::summary::TaskTarget;
use super::{LoadError, LoadSpec};
use crate::Runtime;

/// A runtime in this process, asked through `submit_task`.
pub struct InProcess {
    runtime: Arc<Runtime>,
    tasks: Vec<Prepared>,
}

struct Prepared {
    target: TaskTarget,
    inputs: Vec<(String, Tensor)>,
    slo: Slo,
    made: Option<RequestMaker>,
}

/// Makes each request of a task: its inputs and, where it names one, the variant to
/// run them on. For a client that prepares its inputs for the variant serving (each
/// variant of an image task taking its own resolution), and sends them there.
pub type RequestMaker = Arc<dyn Fn(&Runtime) -> (Option<String>, Inputs) + Send + Sync>;

impl InProcess {
    /// Prepares a request for each task of `spec`: one row of zeros per input of the
    /// task's active variant; its SLO from the spec, else from the task's config.
    pub fn new(runtime: Arc<Runtime>, spec: &LoadSpec) -> Result<Self, LoadError> {
        let tasks = spec
            .tasks
            .iter()
            .map(|load| {
                let refused = |e: Error| LoadError::Target(format!("task `{}`: {e}", load.task));
                let status = runtime.task_status(&load.task).map_err(refused)?;
                let metadata = runtime.task_metadata(&load.task).map_err(refused)?;
                let slo_ms = load.slo_ms_or(status.latency_slo_ms)?;
                let inputs = metadata
                    .inputs
                    .iter()
                    .map(|spec| {
                        let shape: Vec<usize> = spec.shape.iter().map(|d| d.unwrap_or(1)).collect();
                        (spec.name.clone(), Tensor::zeros(spec.dtype, shape))
                    })
                    .collect();
                let mut slo = Slo::default().with_latency(Duration::from_secs_f64(slo_ms / 1e3));
                if let Some(accuracy) = load.min_accuracy {
                    slo = slo.with_min_accuracy(accuracy);
                }
                let accuracies = status.variants.iter().map(|v| (v.name.clone(), v.accuracy)).collect();
                let target = TaskTarget { task: load.task.clone(), slo_ms, accuracies };
                Ok(Prepared { target, inputs, slo, made: None })
            })
            .collect::<Result<_, LoadError>>()?;
        Ok(InProcess { runtime, tasks })
    }

    /// Makes the requests of `task` with `make` instead of rows of zeros.
    pub fn with_requests(mut self, task: &str, make: RequestMaker) -> Result<Self, LoadError> {
        let prepared = self.tasks.iter_mut().find(|t| t.target.task == task);
        let prepared = prepared.ok_or_else(|| LoadError::Target(format!("task `{task}` is not in the load")))?;
        prepared.made = Some(make);
        Ok(self)
    }
}

/// How an error of the runtime counts in a run.
fn status_of(error: &Error) -> Status {
    match error {
        Error::Overloaded { .. } | Error::RequestTooLarge { .. } | Error::NoVariantMeetsSlo { .. } => Status::Rejected,
        Error::DeadlineExceeded { .. } => Status::Expired,
        _ => Status::Failed,
    }
}

fn failed(error: &Error) -> Answer {
    let reason = super::record::reason(error.kind(), &error.to_string());
    Answer { status: status_of(error), variant: None, batch_size: None, reason: Some(reason) }
}

impl Target for InProcess {
    fn targets(&self) -> Vec<TaskTarget> {
        self.tasks.iter().map(|t| t.target.clone()).collect()
    }

    fn send(&self, task: usize) -> Pin<Box<dyn Future<Output = Answer> + Send + 'static>> {
        let prepared = &self.tasks[task];
        let (variant, inputs) = match &prepared.made {
            Some(make) => make(&self.runtime),
            None => (None, prepared.inputs.iter().cloned().collect()),
        };
        let name = &prepared.target.task;
        let ticket = match variant {
            Some(variant) => self.runtime.submit_variant(name, &variant, inputs, prepared.slo),
            None => self.runtime.submit_task(name, inputs, prepared.slo),
        };
        Box::pin(async move {
            match ticket {
                Ok(ticket) => match ticket.await_answer().await {
                    Ok(output) => Answer {
                        status: Status::Ok,
                        variant: Some(output.model.to_string()),
                        batch_size: Some(output.batch_size as u32),
                        reason: None,
                    },
                    Err(e) => failed(&e),
                },
                Err(e) => failed(&e),
            }
        })
    }

    fn observe(&self, task: usize) -> (Option<String>, Option<u64>) {
        match self.runtime.task_status(&self.tasks[task].target.task) {
            Ok(status) => (Some(status.active), Some(status.queue_length)),
            Err(_) => (None, None),
        }
    }

    fn run_totals(&self, task: usize) -> Vec<(String, RunTotals)> {
        let snapshots = self.runtime.variant_snapshots(&self.tasks[task].target.task).unwrap_or_default();
        snapshots.into_iter().filter_map(|v| Some((v.name, v.runs?))).collect()
    }
}
