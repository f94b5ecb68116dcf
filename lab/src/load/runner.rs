//! The open-loop driver: sends every request of a spec at its time without waiting
//! for earlier ones, records how each ended, and samples the target every second.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use modelless::policy_abi::RunTotals;
use modelless_runtime::metrics::{CpuSample, machine_page_faults};
use tokio::sync::mpsc::{UnboundedSender, unbounded_channel};
use tokio::time::Instant;

use super::record::{Outcome, RequestRecord, Stages};
use super::runs::{RunsMeter, SecondRuns};
use super::summary::{Sample, Second, Summary, TaskTarget, summarize, timeline};
use super::{Arrival, LoadError, LoadSpec, Schedule};

/// How one request ended, as the target saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Answer {
    /// How it ended.
    pub status: Outcome,
    /// The variant that answered.
    pub variant: Option<String>,
    /// Rows in the batch it ran in.
    pub batch_size: Option<u32>,
    /// Why it was not answered, as [`super::record::reason`] writes it.
    pub reason: Option<String>,
    /// Where the server says its time went, if it says.
    pub stages: Option<Stages>,
    /// When a refusal says a retry could be answered in time: after this long.
    pub retry_after: Option<Duration>,
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
    /// Whether it serves in this process, so that this process's CPU time is its.
    fn serves_in_this_process(&self) -> bool {
        false
    }
    /// What the task holds of the machine now, where the target can tell.
    fn allocation(&self, _task: usize) -> Option<super::Allocation> {
        None
    }
    /// Refusals of the task's variants so far that they had the time to serve, where
    /// the target can tell.
    fn needless_refusals(&self, _task: usize) -> Option<u64> {
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
    let sent = Arc::new(Sent {
        slots: Mutex::new(vec![None; arrivals.len()]),
        count: AtomicU64::new(0),
        under_way: AtomicU64::new(0),
    });
    let mut sampler = Sampler::new(target.clone(), &targets);
    let (seconds_tx, mut seconds_rx) = unbounded_channel();
    let pacer = Pacer {
        target: target.clone(),
        tasks: targets.iter().map(|t| t.task.clone()).collect(),
        arrivals: arrivals.clone(),
        duration_s,
        start: std::time::Instant::now(),
        runtime: tokio::runtime::Handle::current(),
        sent: sent.clone(),
        seconds: seconds_tx,
    };
    std::thread::Builder::new()
        .name("modelless-loadgen-pacer".into())
        .spawn(move || pacer.pace())
        .map_err(|e| LoadError::Target(format!("cannot start the pacer thread: {e}")))?;
    let (mut samples, mut runs) = (Vec::new(), Vec::new());
    while let Some(second) = seconds_rx.recv().await {
        let (now, ran) = sampler.sample(second - 1);
        let count = sent.count.load(Ordering::Relaxed);
        let ended = count - sent.under_way.load(Ordering::Relaxed);
        progress(&Progress { second, duration_s, sent: count, ended, samples: now.clone() });
        samples.extend(now);
        runs.extend(ran);
    }
    let give_up = Instant::now() + DRAIN;
    while sent.under_way.load(Ordering::Relaxed) > 0 && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let slots = std::mem::take(&mut *sent.slots.lock().map_err(|_| LoadError::Target("a sender panicked".into()))?);
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

/// What was sent and how it ended, shared by the pacer and the tasks that await
/// answers.
struct Sent {
    /// Each request's record, in its own slot; a slot still empty after the drain is
    /// a request that never ended.
    slots: Mutex<Vec<Option<RequestRecord>>>,
    /// Requests sent so far.
    count: AtomicU64,
    /// Requests sent and not yet ended.
    under_way: AtomicU64,
}

impl Sent {
    fn record(&self, index: usize, record: RequestRecord) {
        if let Ok(mut slots) = self.slots.lock() {
            slots[index] = Some(record);
        }
    }
}

/// Sends each arrival when it is due, from a thread of its own that sleeps to each
/// to the microsecond: the async timer's millisecond ticks would add up to a
/// millisecond to every latency (measured from when a request was due), and a hop
/// to the async runtime per request would wake its workers, on the cores the
/// target computes on, for every refusal.
struct Pacer {
    target: Arc<dyn Target>,
    tasks: Vec<String>,
    arrivals: Vec<Arrival>,
    duration_s: u32,
    start: std::time::Instant,
    /// Where answers still to come are awaited.
    runtime: tokio::runtime::Handle,
    sent: Arc<Sent>,
    /// Each second's end (1 is the end of the first), for the sampler.
    seconds: UnboundedSender<u32>,
}

impl Pacer {
    fn pace(self) {
        let mut next_second = 1u32;
        for (index, arrival) in self.arrivals.iter().enumerate() {
            while arrival.at_s > f64::from(next_second) {
                if !self.second_ended(next_second) {
                    return;
                }
                next_second += 1;
            }
            self.send(index, *arrival);
        }
        while next_second <= self.duration_s {
            if !self.second_ended(next_second) {
                return;
            }
            next_second += 1;
        }
    }

    fn at(&self, seconds: f64) -> std::time::Instant {
        self.start + Duration::from_secs_f64(seconds)
    }

    fn wait_until(&self, seconds: f64) {
        std::thread::sleep(self.at(seconds).saturating_duration_since(std::time::Instant::now()));
    }

    /// Says `second` ended, when it has; false once nobody listens.
    fn second_ended(&self, second: u32) -> bool {
        self.wait_until(f64::from(second));
        self.seconds.send(second).is_ok()
    }

    /// Sends `arrival` when it is due. An answer the call already holds (a refusal)
    /// is recorded here and now; the others are awaited on the async runtime.
    fn send(&self, index: usize, arrival: Arrival) {
        self.wait_until(arrival.at_s);
        let due = self.at(arrival.at_s);
        let name = self.tasks[arrival.task].clone();
        // From when it was due, so that a late sender shows as latency.
        let record = move |answer: Answer| answer.record(name, arrival.at_s, due.elapsed().as_secs_f64() * 1e3);
        self.sent.count.fetch_add(1, Ordering::Relaxed);
        // In the runtime's context: a target may start I/O on its reactor.
        let _context = self.runtime.enter();
        let mut answer = self.target.send(arrival.task);
        // Polled once with a waker that does nothing: the task it is handed to below
        // polls it again with its own.
        if let Poll::Ready(answer) = answer.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            self.sent.record(index, record(answer));
            return;
        }
        self.sent.under_way.fetch_add(1, Ordering::Relaxed);
        let sent = self.sent.clone();
        self.runtime.spawn(async move {
            sent.record(index, record(answer.await));
            sent.under_way.fetch_sub(1, Ordering::Relaxed);
        });
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
    /// Each task's needless refusals as last read.
    needless: Vec<Option<u64>>,
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
            needless: Vec::new(),
        };
        sampler.needless = (0..tasks.len()).map(|i| sampler.target.needless_refusals(i)).collect();
        sampler.runs.second(0, sampler.run_totals());
        sampler
    }

    /// What every task looked like at the end of `second`, and the batches run in it.
    pub(super) fn sample(&mut self, second: u32) -> (Vec<Sample>, Vec<SecondRuns>) {
        let now = CpuSample::now();
        let used = now.zip(self.cpu).and_then(|(now, before)| now.since(&before));
        let cpu = used.map(|u| u.host_percent);
        let process_cpu_s = used.filter(|_| self.target.serves_in_this_process()).map(|u| u.process_seconds);
        self.cpu = now;
        let faults_now = machine_page_faults();
        let page_faults = faults_now.zip(self.page_faults).map(|(now, before)| now.saturating_sub(before));
        self.page_faults = faults_now;
        let rss_bytes = self.target.rss_bytes();
        let tasks = self.tasks;
        let samples = tasks
            .iter()
            .enumerate()
            .map(|(index, task)| {
                let (active, queue_length) = self.target.observe(index);
                let needless = self.target.needless_refusals(index);
                let before = std::mem::replace(&mut self.needless[index], needless);
                Sample {
                    second,
                    task: task.task.clone(),
                    active,
                    queue_length,
                    cpu_percent: cpu,
                    process_cpu_s,
                    page_faults,
                    rss_bytes,
                    allocation: self.target.allocation(index),
                    needless_refusals: needless.map(|n| n.saturating_sub(before.unwrap_or(0))),
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
