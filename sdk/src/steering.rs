//! The runtime's scheduling policy: a Wasm module that decides, every tick, which
//! variant serves each task and with what batching knobs; started from the config or
//! by call, reloaded by call or when its file changes.

use std::path::Path;
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use modelless_runtime::Error;
use modelless_runtime::policy::{ControlConfig, ControlLoop, ControlStatus, KeepConfigured, ListTasks, PolicyEngine};

use crate::policy_config::PolicyConfig;
use crate::runtime::Runtime;

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
