//! Requests to a runtime in this process.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use modelless::policy_abi::RunTotals;
use modelless::{Error, Inputs, Slo, Tensor};

use super::images::ImageSet;
use super::record::{Outcome, Stages};
use super::runner::{Answer, Target};
use super::summary::TaskTarget;
use super::{LoadError, LoadSpec};
use modelless::Runtime;

/// A runtime in this process, asked through `submit_task`.
pub struct InProcess {
    runtime: Arc<Runtime>,
    tasks: Vec<Prepared>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for InProcess {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InProcess").finish_non_exhaustive()
    }
}

struct Prepared {
    target: TaskTarget,
    inputs: Vec<(String, Tensor)>,
    slo: Slo,
    made: Option<RequestMaker>,
    /// The input images go to and the images, where the task is sent images.
    images: Option<(String, ImageSet, AtomicUsize)>,
}

/// Makes each request of a task: its inputs and, where it names one, the variant to
/// run them on. For a client that prepares its inputs for the variant serving (each
/// variant of an image task taking its own resolution), and sends them there.
pub type RequestMaker = Arc<dyn Fn(&Runtime) -> (Option<String>, Inputs) + Send + Sync>;

impl InProcess {
    /// Prepares a request for each task of `spec`: one row of zeros per input of the
    /// task's active variant (an image input's as its preprocessing makes them); its SLO from the spec, else from the task's config.
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
                        // An image input's open sides are what the active variant makes.
                        let made = (status.image_input.as_deref() == Some(spec.name.as_str()))
                            .then(|| status.image_shape.clone())
                            .flatten();
                        let shape: Vec<usize> =
                            made.unwrap_or_else(|| spec.shape.iter().map(|d| d.unwrap_or(1)).collect());
                        (spec.name.clone(), Tensor::zeros(spec.dtype, shape))
                    })
                    .collect();
                let mut slo = Slo::default().with_latency(Duration::from_secs_f64(slo_ms / 1e3));
                if let Some(accuracy) = load.min_accuracy {
                    slo = slo.with_min_accuracy(accuracy);
                }
                let accuracies = status.variants.iter().map(|v| (v.name.clone(), v.accuracy)).collect();
                let target = TaskTarget { task: load.task.clone(), slo_ms, accuracies };
                Ok(Prepared { target, inputs, slo, made: None, images: None })
            })
            .collect::<Result<_, LoadError>>()?;
        Ok(InProcess { runtime, tasks })
    }

    /// Sends `images` in turn, one per request, to every task that takes images,
    /// instead of rows of zeros; the other tasks keep theirs. Returns the tasks that
    /// take images.
    pub fn with_images(&mut self, images: &ImageSet) -> Vec<String> {
        let mut taking = Vec::new();
        for prepared in &mut self.tasks {
            let Ok(status) = self.runtime.task_status(&prepared.target.task) else { continue };
            if let Some(input) = status.image_input {
                prepared.images = Some((input, images.clone(), AtomicUsize::new(0)));
                taking.push(prepared.target.task.clone());
            }
        }
        taking
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
fn status_of(error: &Error) -> Outcome {
    match error {
        Error::Overloaded { .. }
        | Error::WouldMissDeadline { .. }
        | Error::RequestTooLarge { .. }
        | Error::NoVariantMeetsSlo { .. } => Outcome::Rejected,
        Error::DeadlineExceeded { .. } => Outcome::Expired,
        _ => Outcome::Failed,
    }
}

fn failed(error: &Error) -> Answer {
    let reason = super::record::reason(error.kind().as_str(), &error.to_string());
    let retry_after = match error {
        Error::WouldMissDeadline { retry_after, .. } => Some(*retry_after),
        _ => None,
    };
    Answer {
        status: status_of(error),
        variant: None,
        batch_size: None,
        reason: Some(reason),
        stages: None,
        retry_after,
    }
}

impl Target for InProcess {
    fn targets(&self) -> Vec<TaskTarget> {
        self.tasks.iter().map(|t| t.target.clone()).collect()
    }

    fn send(&self, task: usize) -> Pin<Box<dyn Future<Output = Answer> + Send + 'static>> {
        let prepared = &self.tasks[task];
        let (variant, inputs) = match (&prepared.made, &prepared.images) {
            (Some(make), _) => make(&self.runtime),
            (None, Some((input, images, next))) => {
                let image = images.get(next.fetch_add(1, Ordering::Relaxed));
                (None, Inputs::default().with_images(input.clone(), [image]))
            }
            (None, None) => (None, prepared.inputs.iter().cloned().collect()),
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
                        status: Outcome::Served,
                        variant: Some(output.model.to_string()),
                        batch_size: Some(output.batch_size as u32),
                        reason: None,
                        stages: Some(Stages::from(&output.timings)),
                        retry_after: None,
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

    fn rss_bytes(&self) -> Option<u64> {
        modelless_runtime::metrics::process_rss_bytes()
    }

    fn serves_in_this_process(&self) -> bool {
        true
    }

    fn needless_refusals(&self, task: usize) -> Option<u64> {
        let status = self.runtime.task_status(&self.tasks[task].target.task).ok()?;
        Some(status.variants.iter().map(|v| v.needless_refusals).sum())
    }

    fn allocation(&self, task: usize) -> Option<super::Allocation> {
        let name = &self.tasks[task].target.task;
        let active = self.runtime.active_variant(name).ok()?;
        let serving = self.runtime.variant_snapshots(name).ok()?.into_iter().find(|v| v.name == active)?;
        let budget = self.runtime.budget();
        Some(super::Allocation {
            instances: serving.instances,
            cores: serving.share.map_or(0.0, |s| s.cores) * f64::from(serving.instances + serving.instances_starting),
            machine_cores: budget.cores - budget.cores_free,
        })
    }
}
