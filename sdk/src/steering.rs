//! The runtime's scheduling policy: a Wasm module that decides, every tick, which
//! variant serves each task and with what batching knobs; started from the config or
//! by call, reloaded by call or when its file changes.

use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use modelless_runtime::Error;
use modelless_runtime::policy::{
    ControlConfig, ControlLoop, ControlStatus, EarlyTick, HostConfig, KeepConfigured, ListTasks, PolicyEngine,
};
use serde::{Deserialize, Serialize};

use crate::runtime::Runtime;

/// The policy section of the config.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyConfig {
    /// The module (`.wasm`, or `.wat` text).
    pub module: PathBuf,
    /// Parameters for its `init`.
    #[serde(default)]
    pub parameters: Option<serde_json::Value>,
    /// Time between decisions, in ms.
    #[serde(default = "default_tick_ms")]
    pub tick_ms: u64,
    /// Longest one decision may take, in ms.
    #[serde(default = "default_deadline_ms")]
    pub deadline_ms: u64,
    /// Most memory the module may have, in MiB.
    #[serde(default = "default_memory_limit_mib")]
    pub memory_limit_mib: usize,
    /// Reload the module when its file changes.
    #[serde(default)]
    pub watch: bool,
    /// Append every tick's snapshot and decision to this JSON Lines file, for
    /// `modelless policy replay`.
    #[serde(default)]
    pub record: Option<PathBuf>,
    /// Tick early when a task's queue reaches this many requests (off when absent).
    #[serde(default)]
    pub early_tick_queue_length: Option<u64>,
    /// Least time between an early tick and the tick before it, in ms.
    #[serde(default = "default_early_tick_gap_ms")]
    pub early_tick_gap_ms: u64,
}

/// The longest tick (and early-tick gap): an hour.
const MAX_TICK_MS: u64 = 3_600_000;
/// The longest a decision may take: a minute.
const MAX_DEADLINE_MS: u64 = 60_000;
/// A 32-bit module addresses 4 GiB at most.
const MAX_MEMORY_MIB: u64 = 4096;

fn default_early_tick_gap_ms() -> u64 {
    200
}

fn default_tick_ms() -> u64 {
    1000
}

fn default_deadline_ms() -> u64 {
    10
}

fn default_memory_limit_mib() -> usize {
    16
}

impl PolicyConfig {
    /// The module at `path` with default settings.
    pub fn new(module: impl Into<PathBuf>) -> Self {
        PolicyConfig {
            module: module.into(),
            parameters: None,
            tick_ms: default_tick_ms(),
            deadline_ms: default_deadline_ms(),
            memory_limit_mib: default_memory_limit_mib(),
            watch: false,
            record: None,
            early_tick_queue_length: None,
            early_tick_gap_ms: default_early_tick_gap_ms(),
        }
    }

    /// Checks that the tick, the deadline, the memory and the early-tick gap are
    /// within bounds a sandboxed module can run with; the error names the setting.
    pub fn validate(&self) -> Result<(), Error> {
        let bounds = [
            ("tick_ms", self.tick_ms, MAX_TICK_MS),
            ("deadline_ms", self.deadline_ms, MAX_DEADLINE_MS),
            ("memory_limit_mib", self.memory_limit_mib as u64, MAX_MEMORY_MIB),
            ("early_tick_gap_ms", self.early_tick_gap_ms, MAX_TICK_MS),
        ];
        match bounds.iter().find(|(_, value, most)| !(1..=*most).contains(value)) {
            Some((name, value, most)) => Err(Error::Config(format!("policy.{name} {value} is outside 1..={most}"))),
            None => Ok(()),
        }
    }

    /// The sandbox it asks for.
    pub fn host_config(&self) -> HostConfig {
        HostConfig::default()
            .with_deadline(Duration::from_millis(self.deadline_ms.clamp(1, MAX_DEADLINE_MS)))
            .with_memory_limit((self.memory_limit_mib as u64).clamp(1, MAX_MEMORY_MIB) as usize * (1 << 20))
    }

    /// The early ticks it asks for, if any.
    pub fn early_tick(&self) -> Option<EarlyTick> {
        let queue_length = self.early_tick_queue_length?;
        Some(EarlyTick { queue_length, min_gap: Duration::from_millis(self.early_tick_gap_ms) })
    }

    /// Ticks early when a task's queue reaches `queue_length`, at most every `min_gap`.
    pub fn with_early_tick(mut self, queue_length: u64, min_gap: Duration) -> Self {
        self.early_tick_queue_length = Some(queue_length);
        self.early_tick_gap_ms = min_gap.as_millis() as u64;
        self
    }

    /// Sets the time between decisions.
    pub fn with_tick(mut self, tick: Duration) -> Self {
        self.tick_ms = tick.as_millis() as u64;
        self
    }

    /// Reloads the module when its file changes.
    pub fn with_watch(mut self, watch: bool) -> Self {
        self.watch = watch;
        self
    }

    /// Sets the module's parameters.
    pub fn with_parameters(mut self, parameters: serde_json::Value) -> Self {
        self.parameters = Some(parameters);
        self
    }
}

/// The policy a runtime runs.
pub(crate) struct RunningPolicy {
    engine: Arc<PolicyEngine>,
    control: ControlLoop,
}

/// How often a watched module file is checked.
const WATCH_EVERY: Duration = Duration::from_millis(100);

impl Runtime {
    /// Starts steering every task with the policy `config` names (replacing any before
    /// it). The configured knobs each task has now are what the native fallback keeps
    /// should the module fail repeatedly.
    pub fn start_policy(&self, config: PolicyConfig) -> Result<(), Error> {
        config.validate()?;
        let engine = PolicyEngine::new(config.host_config()).map_err(|e| Error::policy("start", e))?;
        let module = engine.compile_file(&config.module).map_err(|e| Error::policy("compile", e))?;
        let tasks: ListTasks = {
            let registry = self.registry.clone();
            Arc::new(move || registry.tasks())
        };
        let fallback = KeepConfigured::new(self.registry.tasks().iter().map(|t| (t.name().to_string(), t.serving().0)));
        let tick = Duration::from_millis(config.tick_ms.max(1));
        let mut control_config = ControlConfig::default().with_tick(tick);
        control_config.record = config.record.clone();
        control_config.early_tick = config.early_tick();
        let control = ControlLoop::start(tasks, module, config.parameters, fallback, control_config)?;
        if config.watch {
            control.watch(config.module.clone(), engine.clone(), WATCH_EVERY)?;
        }
        *self.policy.lock().unwrap_or_else(PoisonError::into_inner) = Some(RunningPolicy { engine, control });
        Ok(())
    }

    /// Replaces the running policy with the module at `path` (compiled, dry-run on the
    /// last snapshot, handed the old one's state), keeping its parameters; the old one
    /// stays if that fails. Returns how long it took.
    pub fn reload_policy(&self, path: impl AsRef<Path>) -> Result<Duration, Error> {
        self.reload(path.as_ref(), None)
    }

    /// Like [`Runtime::reload_policy`], with new parameters for the new module.
    pub fn reload_policy_with(&self, path: impl AsRef<Path>, parameters: serde_json::Value) -> Result<Duration, Error> {
        self.reload(path.as_ref(), Some(parameters))
    }

    fn reload(&self, path: &Path, parameters: Option<serde_json::Value>) -> Result<Duration, Error> {
        let started = Instant::now();
        let guard = self.policy.lock().unwrap_or_else(PoisonError::into_inner);
        let running = guard.as_ref().ok_or_else(no_policy)?;
        let module = running.engine.compile_file(path).map_err(|e| Error::policy("compile", e))?;
        running.control.reload(module, parameters)?;
        Ok(started.elapsed())
    }

    /// Runs the module at `path` in shadow beside the running policy: it decides every
    /// tick, and its decisions show in the status (and the recording) but are never
    /// applied. `None` stops the shadow.
    pub fn shadow_policy(&self, path: Option<&Path>) -> Result<(), Error> {
        self.shadow(path, None)
    }

    /// Like [`Runtime::shadow_policy`], with parameters for the shadow module.
    pub fn shadow_policy_with(&self, path: &Path, parameters: serde_json::Value) -> Result<(), Error> {
        self.shadow(Some(path), Some(parameters))
    }

    fn shadow(&self, path: Option<&Path>, parameters: Option<serde_json::Value>) -> Result<(), Error> {
        let guard = self.policy.lock().unwrap_or_else(PoisonError::into_inner);
        let running = guard.as_ref().ok_or_else(no_policy)?;
        let module =
            path.map(|p| running.engine.compile_file(p)).transpose().map_err(|e| Error::policy("compile", e))?;
        running.control.set_shadow(module.map(|m| (m, parameters)))
    }

    /// What the running policy has done, if one runs.
    pub fn policy_status(&self) -> Option<ControlStatus> {
        self.policy.lock().unwrap_or_else(PoisonError::into_inner).as_ref().map(|p| p.control.status())
    }

    /// Stops the running policy; tasks keep the knobs they have.
    pub fn stop_policy(&self) {
        self.policy.lock().unwrap_or_else(PoisonError::into_inner).take();
    }
}

/// The error of a call that needs a running policy when none runs.
fn no_policy() -> Error {
    Error::Precondition("no policy is running: start one first".into())
}
