//! The control loop: every tick a snapshot of every task and of the machine goes to the
//! controller ([`Controller`]), and the actions it makes of the policy's decision are
//! carried out ([`super::apply`]): batching knobs at once, switches, loads and unloads
//! on a thread of their own so that loading a variant never holds up the next tick.
//! What cannot be applied is reported, never fatal.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};

use super::apply::Applier;
use super::budget::ResourceTotals;
use super::control_status::ControlStatus;
use super::controller::Controller;
use super::guard::{DecidedBy, GuardedPolicy, KeepConfigured, Reloaded, RollbackPoint};
use super::host::{PolicyEngine, PolicyModule};
use super::reading::{pool_snapshot, snapshot};
use super::record::Recorder;
use super::watch::{History, TickServed, Verdict, WatchConfig, WatchOutcome, WatchStatus, judge};
use crate::error::Error;
use crate::error::PolicyError;
use crate::metrics::{CpuSample, serving_metrics};
use crate::registry::Task;

/// Lists the tasks the loop steers, every tick.
pub type ListTasks = Arc<dyn Fn() -> Vec<Arc<Task>> + Send + Sync>;

/// How the loop runs.
#[derive(Clone, Debug, PartialEq)]
pub struct ControlConfig {
    /// Time between ticks.
    pub tick: Duration,
    /// Consecutive failures after which the native fallback decides.
    pub max_failures: u32,
    /// A JSON Lines file every tick's snapshot and decision is appended to.
    pub record: Option<PathBuf>,
    /// Tick before the tick is due when a queue grows, if set.
    pub early_tick: Option<EarlyTick>,
    /// What the tasks' instances may hold: the snapshot carries the budget, and a
    /// decision is held to it. `None`: no budget is kept.
    pub resources: Option<ResourceTotals>,
    /// How a policy that went live by a reload is watched and rolled back if it
    /// serves worse than the one it replaced; `None`: not watched.
    pub watch: Option<WatchConfig>,
}

/// When the loop ticks early: a task's queue reached `queue_length`, or the task
/// turned a request away because its queue could not take it (full, or it would have
/// answered it late: admission keeps such a queue short), and the last tick is at
/// least `min_gap` old. A flash crowd is answered within a fraction of a tick, and a
/// busy queue costs at most one decision every `min_gap`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EarlyTick {
    /// Requests queued for a task's active variant that call a tick.
    pub queue_length: u64,
    /// Least time between two ticks.
    pub min_gap: Duration,
}

/// How often queues are looked at when early ticks are on.
const EARLY_TICK_POLL: Duration = Duration::from_millis(10);

impl Default for ControlConfig {
    fn default() -> Self {
        ControlConfig {
            tick: Duration::from_secs(1),
            max_failures: super::guard::DEFAULT_MAX_FAILURES,
            record: None,
            early_tick: None,
            resources: None,
            watch: None,
        }
    }
}

impl ControlConfig {
    /// Sets the time between ticks.
    pub fn with_tick(mut self, tick: Duration) -> Self {
        self.tick = tick;
        self
    }

    /// Records every tick to `path` (JSON Lines, appended).
    pub fn with_record(mut self, path: impl Into<PathBuf>) -> Self {
        self.record = Some(path.into());
        self
    }

    /// Holds decisions to `totals` (see [`ResourceTotals`]).
    pub fn with_resources(mut self, totals: ResourceTotals) -> Self {
        self.resources = Some(totals);
        self
    }

    /// Watches each policy that goes live by a reload (see [`WatchConfig`]).
    pub fn with_watch(mut self, watch: WatchConfig) -> Self {
        self.watch = Some(watch);
        self
    }

    /// Ticks early when a queue grows (see [`EarlyTick`]).
    pub fn with_early_tick(mut self, early_tick: EarlyTick) -> Self {
        self.early_tick = Some(early_tick);
        self
    }
}

enum Command {
    Reload { module: PolicyModule, parameters: Option<serde_json::Value>, reply: Sender<Result<Reloaded, PolicyError>> },
    Shadow(Option<Box<GuardedPolicy>>),
    Stop,
}

fn reload(
    commands: &Sender<Command>,
    module: PolicyModule,
    parameters: Option<serde_json::Value>,
) -> Result<Reloaded, Error> {
    let (reply, answer) = crossbeam_channel::bounded(1);
    commands.send(Command::Reload { module, parameters, reply }).map_err(|_| Error::ShuttingDown)?;
    answer.recv().map_err(|_| Error::ShuttingDown)?.map_err(|e| Error::policy("reload", e))
}

/// A file's modification time and length, to notice it changed.
fn modified(path: &Path) -> Option<(SystemTime, u64)> {
    let metadata = std::fs::metadata(path).ok()?;
    Some((metadata.modified().ok()?, metadata.len()))
}

/// A handle that reloads a loop's policy from another thread (a followed tag's);
/// once the loop is gone, its reloads answer [`Error::ShuttingDown`].
#[derive(Clone)]
pub struct Reloader {
    commands: Sender<Command>,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

impl Reloader {
    /// As [`ControlLoop::reload`].
    pub fn reload(&self, module: PolicyModule, parameters: Option<serde_json::Value>) -> Result<Reloaded, Error> {
        reload(&self.commands, module, parameters)
    }
}

/// A running control loop; dropping it stops the loop.
pub struct ControlLoop {
    commands: Sender<Command>,
    status: Arc<Mutex<ControlStatus>>,
    thread: Option<JoinHandle<()>>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for ControlLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlLoop").finish_non_exhaustive()
    }
}

impl ControlLoop {
    /// Starts steering the tasks `tasks` lists with `module`; `fallback` holds each
    /// task's configured knobs.
    pub fn start(
        tasks: ListTasks,
        module: PolicyModule,
        parameters: Option<serde_json::Value>,
        fallback: KeepConfigured,
        config: ControlConfig,
    ) -> Result<ControlLoop, Error> {
        let (commands, inbox) = crossbeam_channel::unbounded();
        let status = Arc::new(Mutex::new(ControlStatus {
            policy: module.name().to_string(),
            policy_digest: module.digest().to_string(),
            ..Default::default()
        }));
        let policy = GuardedPolicy::new(module, parameters, fallback).with_max_failures(config.max_failures);
        let mut controller = Controller::new(policy);
        if let Some(path) = &config.record {
            controller = controller.with_recorder(Recorder::open(path).map_err(|e| Error::io("record to", path, e))?);
        }
        let state = LoopState {
            tasks,
            interval_digest: controller.policy().module().digest().to_string(),
            controller,
            status: status.clone(),
            applier: Applier::new(status.clone()),
            config,
            started: Instant::now(),
            history: History::default(),
            watching: None,
        };
        let thread = std::thread::Builder::new()
            .name("modelless-control".into())
            .spawn(move || state.run(inbox))
            .map_err(|e| Error::thread_start("the control loop", e))?;
        Ok(ControlLoop { commands, status, thread: Some(thread) })
    }

    /// Replaces the policy (see [`GuardedPolicy::replace`]); `parameters` `None` keeps
    /// the current ones. Blocks until the loop has done it, between two ticks.
    pub fn reload(&self, module: PolicyModule, parameters: Option<serde_json::Value>) -> Result<Reloaded, Error> {
        reload(&self.commands, module, parameters)
    }

    /// A handle that reloads the policy from another thread.
    pub fn reloader(&self) -> Reloader {
        Reloader { commands: self.commands.clone() }
    }

    /// Watches `path` and reloads the policy from it whenever it changes (checked every
    /// `every`); a module that fails to compile or to dry-run is reported and the one
    /// deciding stays. The watch ends with the loop.
    pub fn watch(&self, path: PathBuf, engine: Arc<PolicyEngine>, every: Duration) -> Result<(), Error> {
        // A weak handle: once the loop is gone, so is the watch.
        let (commands, status) = (self.commands.clone(), Arc::downgrade(&self.status));
        let mut seen = modified(&path);
        let shown = path.display().to_string();
        std::thread::Builder::new()
            .name("modelless-policy-watch".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    if status.strong_count() == 0 {
                        return;
                    }
                    let now = modified(&path);
                    if now == seen {
                        continue;
                    }
                    seen = now;
                    let reloaded = engine.compile_file(&path).map_err(|e| Error::policy("compile", e));
                    let reloaded = reloaded.and_then(|module| reload(&commands, module, None));
                    let Some(status) = status.upgrade() else { return };
                    let mut status = status.lock().unwrap_or_else(PoisonError::into_inner);
                    match reloaded {
                        Ok(_) => status.last_watched_reload = now.and_then(|m| m.0.elapsed().ok()),
                        Err(Error::ShuttingDown) => return,
                        Err(e) => status.reports.push(format!("reload from {} refused: {e}", path.display())),
                    }
                }
            })
            .map(drop)
            .map_err(|e| Error::thread_start(format!("the watch of {shown}"), e))
    }

    /// Runs `module` in shadow from the next tick: it decides on every snapshot, its
    /// decisions are kept in the status (and the recording), never applied. `None`
    /// stops the shadow.
    pub fn set_shadow(&self, module: Option<(PolicyModule, Option<serde_json::Value>)>) -> Result<(), Error> {
        let shadow =
            module.map(|(module, parameters)| GuardedPolicy::new(module, parameters, KeepConfigured::default()));
        self.commands.send(Command::Shadow(shadow.map(Box::new))).map_err(|_| Error::ShuttingDown)
    }

    /// What the loop has done so far.
    pub fn status(&self) -> ControlStatus {
        self.status.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

impl Drop for ControlLoop {
    fn drop(&mut self) {
        let _ = self.commands.send(Command::Stop);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

struct LoopState {
    tasks: ListTasks,
    controller: Controller,
    status: Arc<Mutex<ControlStatus>>,
    applier: Applier,
    config: ControlConfig,
    /// The loop's clock starts here.
    started: Instant,
    /// What each tick served, for the watch.
    history: History,
    /// The digest of the policy that decided since the last tick: the one the next
    /// snapshot's figures are of.
    interval_digest: String,
    /// The policy that went live last, watched until its window ends, and what a
    /// rollback puts back.
    watching: Option<RollbackPoint>,
}

impl LoopState {
    fn run(mut self, inbox: Receiver<Command>) {
        let started = self.started;
        let mut next_tick = started + self.config.tick;
        let mut last_tick = started;
        let mut cpu = CpuSample::now();
        let mut last_pool = (self.tasks)().first().map(|t| t.preprocess_pool().read());
        loop {
            let wake = match self.config.early_tick {
                Some(_) => next_tick.min(Instant::now() + EARLY_TICK_POLL),
                None => next_tick,
            };
            match inbox.recv_timeout(wake.saturating_duration_since(Instant::now())) {
                Ok(Command::Stop) | Err(RecvTimeoutError::Disconnected) => return,
                Ok(Command::Shadow(shadow)) => {
                    let mut status = self.lock_status();
                    status.shadow = shadow.as_ref().map(|s| s.module().name().to_string());
                    status.shadow_digest = shadow.as_ref().map(|s| s.module().digest().to_string());
                    status.shadow_decision = None;
                    drop(status);
                    self.controller.set_shadow(shadow.map(|shadow| *shadow));
                }
                Ok(Command::Reload { module, parameters, reply }) => {
                    let (name, digest) = (module.name().to_string(), module.digest().to_string());
                    let previous = self.config.watch.map(|_| self.controller.rollback_point());
                    let result = self.controller.replace(module, parameters);
                    if result.is_ok() {
                        let since = started.elapsed();
                        let watch = previous.filter(|p| p.module.digest() != digest).map(|previous| {
                            let status = WatchStatus {
                                live: digest.clone(),
                                previous: previous.module.digest().to_string(),
                                since,
                                outcome: WatchOutcome::Watching,
                                judgement: None,
                            };
                            (status, previous)
                        });
                        let mut status = self.status.lock().unwrap_or_else(PoisonError::into_inner);
                        if let Some((watched, previous)) = watch {
                            status.watch = Some(watched);
                            self.watching = Some(previous);
                        }
                        (status.policy, status.policy_digest) = (name, digest);
                        status.reloads += 1;
                    }
                    let _ = reply.send(result);
                }
                Err(RecvTimeoutError::Timeout) => {
                    let at = Instant::now();
                    let early = at < next_tick && self.queue_grew(at.duration_since(last_tick));
                    if at < next_tick && !early {
                        continue;
                    }
                    next_tick = if early { at + self.config.tick } else { next_tick + self.config.tick };
                    last_tick = at;
                    let now = CpuSample::now();
                    let tasks = (self.tasks)();
                    let pool = tasks.first().map(|t| t.preprocess_pool().read());
                    let mut snapshot = snapshot(&tasks, now.zip(cpu), self.config.resources.as_ref());
                    snapshot.system.preprocessing =
                        pool.zip(last_pool).map(|(now, before)| pool_snapshot(&now, &before));
                    (cpu, last_pool) = (now, pool);
                    self.tick(&tasks, at.duration_since(started), snapshot, early);
                }
            }
        }
    }

    /// Runs one tick of the controller on `snapshot` and carries out its actions.
    fn tick(&mut self, tasks: &[Arc<Task>], now: Duration, snapshot: modelless_policy_abi::Snapshot, early: bool) {
        let ticked = self.controller.tick(now, snapshot);
        let failure = match &ticked.by {
            DecidedBy::Discarded(e) => Some(e.kind()),
            _ => None,
        };
        let policy = self.controller.policy();
        let digest = policy.module().digest();
        serving_metrics().policy_decided(digest, ticked.decided_in, failure, ticked.by == DecidedBy::Fallback);
        let mut reports = self.applier.apply(tasks, ticked.plan);
        reports.extend(ticked.warnings.into_iter().map(|warning| policy_warning(digest, warning)));
        if let (Some(watch), Some(snapshot)) = (self.config.watch, self.controller.last_snapshot()) {
            let served = TickServed::of(now, &self.interval_digest, snapshot);
            self.history.push(served, watch.history);
            self.judge(now, &watch);
        }
        self.interval_digest = self.controller.policy().module().digest().to_string();
        let policy = self.controller.policy();
        let mut status = self.lock_status();
        status.ticks = self.controller.ticks();
        status.early_ticks += u64::from(early);
        status.failures = policy.failures().clone();
        status.on_fallback = ticked.by == DecidedBy::Fallback;
        status.last_decision = ticked.decision;
        status.shadow_decision = ticked.shadow;
        status.cpu_host_percent = self.controller.last_snapshot().and_then(|s| s.system.cpu_host_percent);
        status.reports.extend(reports);
        let excess = status.reports.len().saturating_sub(32);
        status.reports.drain(..excess);
    }

    /// Judges the policy watched, if its window is over: keeps it, or puts the previous
    /// one back when it serves worse.
    fn judge(&mut self, now: Duration, config: &WatchConfig) {
        if self.watching.is_none() {
            return;
        }
        let Some(watched) = self.lock_status().watch.clone().filter(|w| w.outcome == WatchOutcome::Watching) else {
            return;
        };
        let (outcome, judgement) = match judge(&self.history, &watched.live, watched.since, now, config) {
            Verdict::Watching => return,
            Verdict::Unjudged => (WatchOutcome::Unjudged, None),
            Verdict::Judged(judgement) if judgement.regression.is_none() => (WatchOutcome::Kept, Some(judgement)),
            Verdict::Judged(judgement) => {
                let why = judgement.regression.clone().unwrap_or_default();
                let outcome = match self.watching.take().map(|point| self.controller.restore(point)) {
                    Some(Ok(())) => {
                        tracing::warn!(from = %watched.live, to = %watched.previous, %why, "policy rolled back");
                        serving_metrics().policy_rolled_back(&watched.live, &watched.previous);
                        WatchOutcome::RolledBack
                    }
                    Some(Err(error)) => {
                        tracing::warn!(policy_digest = %watched.live, %error, %why, "the rollback failed");
                        WatchOutcome::RollbackFailed(error.to_string())
                    }
                    None => WatchOutcome::RollbackFailed("nothing to put back".into()),
                };
                (outcome, Some(judgement))
            }
        };
        self.watching = None;
        let mut status = self.lock_status();
        if outcome == WatchOutcome::RolledBack {
            let policy = self.controller.policy().module();
            (status.policy, status.policy_digest) = (policy.name().to_string(), policy.digest().to_string());
            status.rollbacks += 1;
        }
        status.watch = Some(WatchStatus { outcome, judgement, ..watched });
    }

    /// Whether a queue calls an early tick, `since_last` after the last tick.
    fn queue_grew(&self, since_last: Duration) -> bool {
        let Some(early) = self.config.early_tick else { return false };
        since_last >= early.min_gap
            && (self.tasks)().iter().any(|t| t.serving().1 >= early.queue_length || t.traffic().turned_away() > 0)
    }

    fn lock_status(&self) -> std::sync::MutexGuard<'_, ControlStatus> {
        self.status.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A warning the policy of `digest` logged, as the status reports it (and the log
/// says it).
fn policy_warning(digest: &str, message: String) -> String {
    tracing::warn!(policy_digest = digest, %message, "the policy warns");
    format!("policy: {message}")
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use modelless_policy_abi::ServingKnobs;

    use super::*;
    use crate::backend::fake::{BatchLog, FakeBackend, FakeConfig};
    use crate::batching::BatchingConfig;
    use crate::policy::host::{HostConfig, PolicyEngine};
    use crate::policy::test_modules::{answering, answering_once};
    use crate::registry::{MakeBackend, TaskConfig, VariantConfig};
    use crate::request::{Inputs, Slo};
    use crate::tensor::Tensor;
    use crate::warmup::WarmupConfig;

    const TICK: Duration = Duration::from_millis(20);

    /// Task `classify`: v0 (active) and v1, both fake, batches of up to 8.
    fn task() -> Arc<Task> {
        let fake = FakeConfig { per_batch: Duration::from_millis(1), ..FakeConfig::default() };
        let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
        let variant =
            |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
        let config = TaskConfig::new("classify").with_variant(variant("v0", 60.0)).with_variant(variant("v1", 70.0));
        Arc::new(Task::start(config, make).unwrap())
    }

    fn fallback() -> KeepConfigured {
        let configured = ServingKnobs { variant: "v0".into(), max_batch_size: 8, max_queue_delay_us: 0, instances: 1 };
        KeepConfigured::new([("classify".to_string(), configured)])
    }

    fn start(task: &Arc<Task>, wat: &str, host: HostConfig) -> ControlLoop {
        let module = PolicyEngine::new(host).unwrap().compile("test", wat.as_bytes()).unwrap();
        let tasks: ListTasks = {
            let task = task.clone();
            Arc::new(move || vec![task.clone()])
        };
        ControlLoop::start(tasks, module, None, fallback(), ControlConfig::default().with_tick(TICK)).unwrap()
    }

    fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
        let until = Instant::now() + Duration::from_secs(10);
        while !done() {
            assert!(Instant::now() < until, "timed out waiting for {what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn request(task: &Task) -> Result<crate::request::Output, Error> {
        let input = Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        task.submit(input, &Slo::default()).and_then(|t| t.wait())
    }

    #[test]
    fn decisions_switch_variants_and_set_knobs_clamped_to_the_configured_ones() {
        let task = task();
        let json = r#"{"tasks":[{"task":"classify","variant":"v1","max_batch_size":99,"max_queue_delay_us":250,"warm":true},{"task":"nope"}]}"#;
        let control = start(&task, &answering(json), HostConfig::default());
        wait_for("the switch", || task.serving().0.variant == "v1");
        wait_for("the knobs", || task.serving().0.max_queue_delay_us == 250);
        assert_eq!(task.serving().0.max_batch_size, 8, "clamped to what v1 was configured with");
        let status = control.status();
        assert!(status.switches >= 1 && status.failures.is_empty(), "{status:?}");
        assert!(status.reports.iter().any(|r| r.contains("clamped to 8")), "{:?}", status.reports);
        assert!(status.reports.iter().any(|r| r.contains("unknown task `nope`")), "{:?}", status.reports);
        // A field this host does not know is said, not dropped silently.
        let unknown = "decision field `warm` of task `classify` is not known to this host";
        assert!(status.reports.iter().any(|r| r.contains(unknown)), "{:?}", status.reports);
        assert_eq!(request(&task).unwrap().model.as_ref(), "v1");
    }

    #[test]
    fn a_decision_made_once_that_switches_and_sets_knobs_sets_them_on_the_variant_switched_to() {
        let task = task();
        let json = r#"{"tasks":[{"task":"classify","variant":"v1","max_batch_size":1}]}"#;
        let control = start(&task, &answering_once(json), HostConfig::default());
        wait_for("the switch", || task.serving().0.variant == "v1");
        // The ticks after it decide nothing: what the one decision set must stay set.
        let ticked = control.status().ticks;
        wait_for("two more ticks", || control.status().ticks >= ticked + 2);
        assert!(control.status().last_decision.tasks.is_empty());
        assert_eq!(task.serving().0.max_batch_size, 1, "the knobs belong to the variant switched to");
        let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        let tickets: Vec<_> = (0..8).map(|_| task.submit(input(), &Slo::default()).unwrap()).collect();
        let served: Vec<(String, usize)> =
            tickets.into_iter().map(|t| t.wait().map(|out| (out.model.to_string(), out.batch_size)).unwrap()).collect();
        assert_eq!(served, vec![("v1".to_string(), 1); 8], "eight requests at once, each a batch of its own");
    }

    #[test]
    fn a_hostile_policy_never_stops_serving_and_the_fallback_restores_the_configured_knobs() {
        let task = task();
        task.switch_to("v1").unwrap();
        let endless = crate::policy::test_modules::policy("(loop $forever (br $forever)) (unreachable)", "");
        let control = start(&task, &endless, HostConfig::default().with_deadline(Duration::from_millis(5)));
        let mut served = 0;
        while !control.status().on_fallback {
            assert!(request(&task).is_ok());
            served += 1;
            assert!(served < 100_000, "no fallback");
        }
        wait_for("the configured variant", || task.serving().0.variant == "v0");
        assert_eq!(control.status().failures.get("timeout"), Some(&3));
        assert!(request(&task).is_ok());
    }

    /// A loop steering `task` with the module in the file at `path`, which it watches.
    fn watching(task: &Arc<Task>, path: &Path) -> ControlLoop {
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let tasks: ListTasks = {
            let task = task.clone();
            Arc::new(move || vec![task.clone()])
        };
        let module = engine.compile_file(path).unwrap();
        let control =
            ControlLoop::start(tasks, module, None, fallback(), ControlConfig::default().with_tick(TICK)).unwrap();
        control.watch(path.to_path_buf(), engine, Duration::from_millis(10)).unwrap();
        control
    }

    /// A policy that switches `classify` to a variant whose batches take 60 ms, under a
    /// 20 ms SLO, after one that kept the 1 ms variant: the watch sees it miss at the
    /// same load and puts the first one back.
    #[test]
    fn a_reloaded_policy_that_serves_worse_at_the_same_load_is_rolled_back() {
        let make: MakeBackend = Arc::new(|variant: &VariantConfig, _: &std::path::Path| {
            let per_batch = Duration::from_millis(if variant.name == "v1" { 60 } else { 1 });
            FakeBackend::factory(FakeConfig { per_batch, ..FakeConfig::default() }, BatchLog::default())
        });
        let variant =
            |name: &str, accuracy| VariantConfig::new(name, "fake", accuracy).with_warmup(WarmupConfig::disabled());
        let config = TaskConfig::new("classify")
            .with_latency_slo_ms(20.0)
            .with_variant(variant("v0", 60.0))
            .with_variant(variant("v1", 61.0));
        let task = Arc::new(Task::start(config, make).unwrap());
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let keep = engine.compile("keep v0", answering(r#"{"tasks":[{"task":"classify","variant":"v0"}]}"#).as_bytes());
        let tasks: ListTasks = {
            let task = task.clone();
            Arc::new(move || vec![task.clone()])
        };
        let watch = WatchConfig { window: Duration::from_millis(400), ..WatchConfig::default() };
        let control_config = ControlConfig::default().with_tick(TICK).with_watch(watch);
        let control = ControlLoop::start(tasks, keep.unwrap(), None, fallback(), control_config).unwrap();

        // Steady load from two callers throughout.
        let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let callers: Vec<_> = (0..2)
            .map(|_| {
                let (task, stop) = (task.clone(), stop.clone());
                std::thread::spawn(move || {
                    let slo = Slo::default().with_latency(Duration::from_millis(20));
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        let input = Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
                        let _ = task.submit(input, &slo).and_then(|t| t.wait());
                        std::thread::sleep(Duration::from_millis(2));
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_millis(400));
        let slow =
            engine.compile("switch to v1", answering(r#"{"tasks":[{"task":"classify","variant":"v1"}]}"#).as_bytes());
        let (slow_digest, keep_digest) = (slow.as_ref().unwrap().digest().to_string(), control.status().policy_digest);
        control.reload(slow.unwrap(), None).unwrap();
        wait_for("the watch's verdict", || control.status().watch.is_some_and(|w| w.outcome != WatchOutcome::Watching));
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        callers.into_iter().for_each(|c| c.join().unwrap());

        let status = control.status();
        let watch = status.watch.clone().unwrap();
        assert_eq!(watch.outcome, WatchOutcome::RolledBack, "{watch:?}");
        assert_eq!((watch.live.as_str(), watch.previous.as_str()), (slow_digest.as_str(), keep_digest.as_str()));
        let judged = watch.judgement.unwrap();
        assert!(judged.live.share_within_slo < judged.before.share_within_slo, "{judged:?}");
        assert!(judged.regression.is_some_and(|why| why.contains("within the SLO")));
        assert_eq!((status.policy_digest, status.rollbacks), (keep_digest, 1), "the first policy decides again");
        wait_for("v0 serving again", || task.serving().0.variant == "v0");
    }

    #[test]
    fn a_watched_file_reloads_when_it_changes() {
        let task = task();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("policy.wat");
        let (first, second) =
            (answering(r#"{"tasks":[]}"#), answering(r#"{"tasks":[{"task":"classify","variant":"v1"}]}"#));
        std::fs::write(&path, &first).unwrap();
        let control = watching(&task, &path);
        let digest_of =
            |wat: &str| PolicyEngine::new(HostConfig::default()).unwrap().compile("p", wat.as_bytes()).unwrap();
        assert_eq!(control.status().policy_digest, digest_of(&first).digest());
        std::fs::write(&path, "not a module").unwrap();
        wait_for("the refusal", || control.status().reports.iter().any(|r| r.contains("refused")));
        std::fs::write(&path, &second).unwrap();
        wait_for("the reload", || control.status().reloads == 1);
        wait_for("the new policy's switch", || task.serving().0.variant == "v1");
        let status = control.status();
        assert!(status.last_watched_reload.is_some());
        assert_eq!(status.policy_digest, digest_of(&second).digest(), "the status names the module now deciding");
    }

    #[test]
    fn a_shadow_decides_every_tick_without_being_applied_and_ticks_are_recorded() {
        let task = task();
        let dir = tempfile::tempdir().unwrap();
        let record = dir.path().join("control-record.jsonl");
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let module = engine.compile("keep", answering(r#"{"tasks":[]}"#).as_bytes()).unwrap();
        let tasks: ListTasks = {
            let task = task.clone();
            Arc::new(move || vec![task.clone()])
        };
        let config = ControlConfig::default().with_tick(TICK).with_record(&record);
        let control = ControlLoop::start(tasks, module, None, fallback(), config).unwrap();
        let candidate = answering(r#"{"tasks":[{"task":"classify","variant":"v1"}]}"#);
        let candidate = engine.compile("candidate", candidate.as_bytes()).unwrap();
        let candidate_digest = candidate.digest().to_string();
        control.set_shadow(Some((candidate, None))).unwrap();
        wait_for("a shadow decision", || control.status().shadow_decision.is_some());
        assert_eq!(control.status().shadow_digest, Some(candidate_digest));
        std::thread::sleep(TICK * 3);
        assert_eq!(task.serving().0.variant, "v0", "a shadow's decisions are never applied");
        let status = control.status();
        assert_eq!(status.shadow.as_deref(), Some("candidate"));
        assert_eq!(status.shadow_decision.unwrap().tasks[0].variant.as_deref(), Some("v1"));
        drop(control);
        let ticks: Vec<crate::policy::RecordedTick> =
            std::fs::read_to_string(&record).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert!(ticks.len() >= 3 && ticks.iter().all(|t| t.by == "module" && t.decision.tasks.is_empty()));
        assert!(ticks.iter().any(|t| t.shadow.is_some()) && ticks[0].snapshot.tasks[0].name == "classify");
    }

    #[test]
    fn under_every_kind_of_hostile_module_requests_keep_being_served_and_the_failure_is_counted_by_kind() {
        use crate::policy::test_modules::policy;
        let hostile = [
            ("timeout", policy("(loop $forever (br $forever)) (unreachable)", "")),
            ("memory_limit", policy("(drop (memory.grow (i32.const 16384))) (i64.const 0)", "")),
            ("trap", policy("(call $decide (local.get $ptr) (local.get $len))", "")),
            ("trap", policy("(unreachable)", "")),
            ("invalid_output", policy("(i64.or (i64.shl (i64.const 1100) (i64.const 32)) (i64.const 8))", "")),
            ("oversized_output", policy("(i64.const 100000000)", "")),
        ];
        for (kind, wat) in hostile {
            let task = task();
            task.switch_to("v1").unwrap();
            // Only the endless loop meets the short deadline: on a loaded machine a
            // fresh instance of another module could miss it and fail as a timeout.
            let deadline = Duration::from_millis(if kind == "timeout" { 5 } else { 2_000 });
            let control = start(&task, &wat, HostConfig::default().with_deadline(deadline));
            let until = Instant::now() + Duration::from_secs(30);
            while !control.status().on_fallback {
                assert!(Instant::now() < until, "{kind}: no fallback yet: {:?}", control.status());
                assert!(request(&task).is_ok(), "{kind}: a request failed");
            }
            let failures = control.status().failures;
            assert_eq!(failures, BTreeMap::from([(kind, 3)]), "{kind}: the three failures are counted by kind");
            wait_for("the configured variant", || task.serving().0.variant == "v0");
            assert!(request(&task).is_ok(), "{kind}");
        }
        // Modules that are no policy at all never get to decide: a reload to one, from
        // the file the loop watches, is refused, and the policy deciding stays.
        let task = task();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("test.wat");
        let good = answering(r#"{"tasks":[]}"#);
        std::fs::write(&path, &good).unwrap();
        let control = watching(&task, &path);
        let refusals = || control.status().reports.iter().filter(|r| r.contains("refused")).count();
        for (i, refused) in [
            b"not wasm at all".to_vec(),
            good.replace("modelless_policy_abi_v1", "modelless_policy_abi_v9 ").into_bytes(),
            good.replace(r#"(export "decide")"#, "").into_bytes(),
        ]
        .into_iter()
        .enumerate()
        {
            std::fs::write(&path, &refused).unwrap();
            wait_for("the refusal", || refusals() > i);
            assert!(request(&task).is_ok());
        }
        let status = control.status();
        assert_eq!((status.policy.as_str(), status.reloads), ("test", 0), "{:?}", status.reports);
        let ticks = status.ticks;
        wait_for("the policy deciding on", || control.status().ticks > ticks + 2);
    }

    /// Task `classify` (`variant` on a fake backend whose batches take 50 ms) under a
    /// policy that keeps everything, ticking hourly and early once a queue holds
    /// `queue_length`.
    fn ticking_early(variant: VariantConfig, queue_length: u64) -> (Arc<Task>, ControlLoop) {
        let fake = FakeConfig { per_batch: Duration::from_millis(50), ..FakeConfig::default() };
        let make: MakeBackend = Arc::new(move |_, _| FakeBackend::factory(fake.clone(), BatchLog::default()));
        let variant = variant.with_warmup(WarmupConfig::disabled());
        let task = Arc::new(Task::start(TaskConfig::new("classify").with_variant(variant), make).unwrap());
        let module =
            PolicyEngine::new(HostConfig::default()).unwrap().compile("keep", answering(r#"{"tasks":[]}"#).as_bytes());
        let tasks: ListTasks = {
            let task = task.clone();
            Arc::new(move || vec![task.clone()])
        };
        let early = EarlyTick { queue_length, min_gap: Duration::from_millis(20) };
        let config = ControlConfig::default().with_tick(Duration::from_secs(3600)).with_early_tick(early);
        let control = ControlLoop::start(tasks, module.unwrap(), None, fallback(), config).unwrap();
        (task, control)
    }

    #[test]
    fn a_growing_queue_calls_a_tick_before_it_is_due() {
        let (task, control) = ticking_early(VariantConfig::new("v0", "fake", 60.0), 8);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(control.status().ticks, 0, "nothing queued, and the tick is an hour away");
        let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        let tickets: Vec<_> = (0..64).map(|_| task.submit(input(), &Slo::default()).unwrap()).collect();
        wait_for("an early tick", || control.status().early_ticks > 0);
        let status = control.status();
        assert_eq!(status.ticks, status.early_ticks);
        assert!(tickets.into_iter().all(|t| t.wait().is_ok()));
        let settled = control.status().ticks;
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(control.status().ticks, settled, "an empty queue calls no tick");
    }

    #[test]
    fn a_request_turned_away_by_a_full_queue_calls_a_tick_before_it_is_due() {
        // A queue of 2 refuses most of a burst: admission keeps it short, so only the
        // refusals show the crowd.
        let batching = BatchingConfig { max_batch_size: 1, max_queue_size: 2, ..BatchingConfig::default() };
        let (task, control) = ticking_early(VariantConfig::new("v0", "fake", 60.0).with_batching(batching), 1_000);
        let input = || Inputs::from(Tensor::new([1, 4], vec![1.0f32; 4]).unwrap());
        let refused = (0..16).filter(|_| task.submit(input(), &Slo::default()).is_err()).count();
        assert!(refused > 0, "the queue holds 2");
        wait_for("an early tick", || control.status().early_ticks > 0);
        let settled = control.status().ticks;
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(control.status().ticks, settled, "a tick took the refusals: no more until the next");
    }

    #[test]
    fn a_reload_swaps_the_policy_between_ticks() {
        let task = task();
        let control = start(&task, &answering(r#"{"tasks":[]}"#), HostConfig::default());
        wait_for("a tick", || control.status().ticks > 0);
        let engine = PolicyEngine::new(HostConfig::default()).unwrap();
        let switching = answering(r#"{"tasks":[{"task":"classify","variant":"v1"}]}"#);
        let module = engine.compile("switching", switching.as_bytes()).unwrap();
        control.reload(module, None).unwrap();
        assert_eq!(control.status().policy, "switching");
        wait_for("the new policy's switch", || task.serving().0.variant == "v1");
        assert_eq!(control.status().reloads, 1);
        let broken = engine.compile("broken", answering("not json").as_bytes()).unwrap();
        assert!(control.reload(broken, None).is_err(), "a reload that fails its dry run is refused");
        assert_eq!(control.status().policy, "switching");
    }
}
