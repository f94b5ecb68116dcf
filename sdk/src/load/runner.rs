//! The open-loop driver: sends every request of a spec at its time without waiting
//! for earlier ones, records how each ended, and samples the target every second.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;
use std::time::Duration;

use modelless_runtime::metrics::{CpuSample, machine_page_faults};
use modelless_runtime::policy_abi::RunTotals;
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::time::Instant;

use super::record::{RequestRecord, Stages, Status};
use super::runs::{RunsMeter, SecondRuns};
use super::summary::{Sample, Second, Summary, TaskTarget, summarize, timeline};
use super::{LoadError, LoadSpec, Schedule};

/// How one request ended, as the target saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// How it ended.
    pub status: Status,
    /// The variant that answered.
    pub variant: Option<String>,
    /// Rows in the batch it ran in.
    pub batch_size: Option<u32>,
    /// Why it was not answered, as [`super::record::reason`] writes it.
    pub reason: Option<String>,
    /// Where the server says its time went, if it says.
    pub stages: Option<Stages>,
}

impl Answer {
    /// The record of a request to `task` sent at `sent_s` that ended with this answer.
    pub(super) fn record(self, task: String, sent_s: f64, latency_ms: f64) -> RequestRecord {
        RequestRecord {
            task,
            sent_s,
            status: self.status,
            latency_ms,
            variant: self.variant,
            batch_size: self.batch_size,
            reason: self.reason,
            stages: self.stages,
        }
    }
}

/// What a run sends requests to.
pub trait Target: Send + Sync + 'static {
    /// Each task of the spec as it is targeted: SLO and variant accuracies.
    fn targets(&self) -> Vec<TaskTarget>;
    /// Sends one request to task `task` (its index in the spec).
    fn send(&self, task: usize) -> Pin<Box<dyn Future<Output = Answer> + Send + 'static>>;
    /// The task's active variant and queue now, where the target can tell.
    fn observe(&self, task: usize) -> (Option<String>, Option<u64>);
    /// What each variant of the task ran so far (variant, totals), where the target
    /// can tell: a runtime in this process can, an endpoint cannot.
    fn run_totals(&self, _task: usize) -> Vec<(String, RunTotals)> {
        Vec::new()
    }
    /// The serving process's resident memory now, bytes, where the target can tell.
    fn rss_bytes(&self) -> Option<u64> {
        None
    }
}

/// Where a run stands, reported once a second.
#[derive(Clone, Debug)]
pub struct Progress {
    /// Seconds done.
    pub second: u32,
    /// Seconds in the run.
    pub duration_s: u32,
    /// Requests sent so far.
    pub sent: u64,
    /// Requests that ended so far.
    pub ended: u64,
    /// What each task looked like at the end of this second.
    pub samples: Vec<Sample>,
}

/// Everything a run recorded.
#[derive(Clone, Debug, Default)]
pub struct RunResult {
    /// The tasks as targeted.
    pub targets: Vec<TaskTarget>,
    /// Every request, in the order they were sent.
    pub records: Vec<RequestRecord>,
    /// Every task at the end of every second.
    pub samples: Vec<Sample>,
    /// The batches each variant ran, second by second, where the target tells.
    pub runs: Vec<SecondRuns>,
    /// Length of the run, s.
    pub duration_s: u32,
}

impl RunResult {
    /// A summary per task, and over all of them when there are several.
    pub fn summaries(&self) -> Vec<Summary> {
        summarize(&self.records, &self.targets, &self.samples, f64::from(self.duration_s))
    }

    /// The run second by second.
    pub fn timeline(&self) -> Vec<Second> {
        timeline(&self.records, &self.targets, &self.samples, self.duration_s)
    }
}

/// How long requests still under way at the end of the run get before they are
/// counted as failed.
pub(super) const DRAIN: Duration = Duration::from_secs(60);

/// Runs `spec` against `target`, calling `progress` once a second.
pub async fn run(
    target: Arc<dyn Target>,
    spec: &LoadSpec,
    progress: &mut (dyn FnMut(&Progress) + Send),
) -> Result<RunResult, LoadError> {
    let Schedule { arrivals, duration_s } = spec.schedule()?;
    let targets = target.targets();
    // Each request's record lands in its own slot; a slot still empty after the drain
    // is a request that never ended.
    let ended: Arc<Mutex<Vec<Option<RequestRecord>>>> = Arc::new(Mutex::new(vec![None; arrivals.len()]));
    let under_way = Arc::new(AtomicU64::new(0));
    let (mut samples, mut runs) = (Vec::new(), Vec::new());
    let mut sampler = Sampler::new(target.clone(), &targets);
    let start = Instant::now();
    let at = |s: f64| start + Duration::from_secs_f64(s);
    // Samples the second that just ended and reports it.
    let mut report = |second: u32, sent: u64| {
        let (now, ran) = sampler.sample(second - 1);
        let ended = sent - under_way.load(Ordering::Relaxed);
        progress(&Progress { second, duration_s, sent, ended, samples: now.clone() });
        samples.extend(now);
        runs.extend(ran);
    };
    let (due_tx, mut due_rx) = unbounded_channel();
    let times: Vec<f64> = arrivals.iter().map(|a| a.at_s).collect();
    let pacer_start = start.into_std();
    std::thread::Builder::new()
        .name("modelless-loadgen-pacer".into())
        .spawn(move || pace(&times, duration_s, pacer_start, &due_tx))
        .map_err(|e| LoadError::Target(format!("cannot start the pacer thread: {e}")))?;
    let mut sent = 0u64;
    while let Some(due) = due_rx.recv().await {
        let index = match due {
            Due::SecondEnded(second) => {
                report(second, sent);
                continue;
            }
            Due::Arrival(index) => index,
        };
        sent += 1;
        let arrival = arrivals[index];
        let due = at(arrival.at_s);
        let (task, name) = (arrival.task, targets[arrival.task].task.clone());
        let mut answer = target.send(task);
        // An answer the call already holds (a refusal) is recorded now: waiting for a
        // task of its own to be scheduled would add the load generator's delay to it.
        let answered = std::future::poll_fn(|cx| Poll::Ready(answer.as_mut().poll(cx))).await;
        // From when it was due, so that a late sender shows as latency.
        let record = move |answer: Answer| answer.record(name, arrival.at_s, due.elapsed().as_secs_f64() * 1e3);
        if let Poll::Ready(answer) = answered {
            if let Ok(mut ended) = ended.lock() {
                ended[index] = Some(record(answer));
            }
            continue;
        }
        let (ended, under_way) = (ended.clone(), under_way.clone());
        under_way.fetch_add(1, Ordering::Relaxed);
        tokio::spawn(async move {
            let record = record(answer.await);
            if let Ok(mut ended) = ended.lock() {
                ended[index] = Some(record);
            }
            under_way.fetch_sub(1, Ordering::Relaxed);
        });
    }
    let give_up = Instant::now() + DRAIN;
    while under_way.load(Ordering::Relaxed) > 0 && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let slots = std::mem::take(&mut *ended.lock().map_err(|_| LoadError::Target("a sender panicked".into()))?);
    let records = slots
        .into_iter()
        .zip(&arrivals)
        .map(|(slot, arrival)| {
            slot.unwrap_or_else(|| {
                RequestRecord::unanswered(&targets[arrival.task].task, arrival.at_s, DRAIN.as_secs_f64() * 1e3)
            })
        })
        .collect();
    Ok(RunResult { targets, records, samples, runs, duration_s })
}

/// What the pacer says is due.
enum Due {
    /// The arrival of this index.
    Arrival(usize),
    /// The end of this second (1 is the end of the first).
    SecondEnded(u32),
}

/// Says each arrival (of `times`, seconds from `start`, in order) and each second's
/// end when it is due, to the microsecond: a thread of its own sleeps to each, where
/// the async timer's millisecond ticks would add up to a millisecond to every
/// latency, measured from when a request was due.
fn pace(times: &[f64], duration_s: u32, start: std::time::Instant, due: &UnboundedSender<Due>) {
    let wait_until = |seconds: f64| {
        let at = start + Duration::from_secs_f64(seconds);
        std::thread::sleep(at.saturating_duration_since(std::time::Instant::now()));
    };
    let mut next_second = 1u32;
    for (index, &at_s) in times.iter().enumerate() {
        while at_s > f64::from(next_second) {
            wait_until(f64::from(next_second));
            if due.send(Due::SecondEnded(next_second)).is_err() {
                return;
            }
            next_second += 1;
        }
        wait_until(at_s);
        if due.send(Due::Arrival(index)).is_err() {
            return;
        }
    }
    while next_second <= duration_s {
        wait_until(f64::from(next_second));
        if due.send(Due::SecondEnded(next_second)).is_err() {
            return;
        }
        next_second += 1;
    }
}

/// Samples each task, what its variants ran, and the machine's CPU and page faults at
/// the end of a second.
pub(super) struct Sampler<'a> {
    target: Arc<dyn Target>,
    cpu: Option<CpuSample>,
    page_faults: Option<u64>,
    tasks: &'a [TaskTarget],
    runs: RunsMeter,
}

impl<'a> Sampler<'a> {
    /// Starts sampling `tasks` of `target`, from what its sessions ran so far: what
    /// they ran before the run (another load, in the same process) is not the run's.
    pub(super) fn new(target: Arc<dyn Target>, tasks: &'a [TaskTarget]) -> Self {
        let mut sampler = Sampler {
            target,
            cpu: CpuSample::now(),
            page_faults: machine_page_faults(),
            tasks,
            runs: RunsMeter::default(),
        };
        sampler.runs.second(0, sampler.run_totals());
        sampler
    }

    /// What every task looked like at the end of `second`, and the batches run in it.
    pub(super) fn sample(&mut self, second: u32) -> (Vec<Sample>, Vec<SecondRuns>) {
        let now = CpuSample::now();
        let cpu = now.zip(self.cpu).and_then(|(now, before)| now.since(&before)).map(|u| u.host_percent);
        self.cpu = now;
        let faults_now = machine_page_faults();
        let page_faults = faults_now.zip(self.page_faults).map(|(now, before)| now.saturating_sub(before));
        self.page_faults = faults_now;
        let rss_bytes = self.target.rss_bytes();
        let samples = self
            .tasks
            .iter()
            .enumerate()
            .map(|(index, task)| {
                let (active, queue_length) = self.target.observe(index);
                Sample {
                    second,
                    task: task.task.clone(),
                    active,
                    queue_length,
                    cpu_percent: cpu,
                    page_faults,
                    rss_bytes,
                }
            })
            .collect();
        let totals = self.run_totals();
        (samples, self.runs.second(second, totals))
    }

    /// What each variant of each task ran so far: (task, variant, totals).
    fn run_totals(&self) -> Vec<(String, String, RunTotals)> {
        (0..self.tasks.len())
            .flat_map(|index| {
                let task = &self.tasks[index].task;
                self.target.run_totals(index).into_iter().map(move |(variant, totals)| (task.clone(), variant, totals))
            })
            .collect()
    }
}
