//! The runtime's scheduling policy: a Wasm module that decides, every tick, which
//! variant serves each task, with what batching knobs and instances; started from
//! the config or by call, reloaded by call or when its file changes. It steers the
//! tasks of a registry within the machine's budget, and knows nothing else of the
//! runtime that holds it.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use modelless_runtime::policy::{
    ControlConfig, ControlLoop, ControlStatus, KeepConfigured, ListTasks, PolicyEngine, ResourceTotals,
};
use modelless_runtime::{Error, Registry};

use crate::policy_config::PolicyConfig;

/// The policy steering a registry's tasks, when one runs.
pub(crate) struct Steering {
    registry: Arc<Registry>,
    resources: ResourceTotals,
    running: Mutex<Option<RunningPolicy>>,
}

/// A policy that runs.
struct RunningPolicy {
    engine: Arc<PolicyEngine>,
    control: ControlLoop,
}

/// How often a watched module file is checked.
const WATCH_EVERY: Duration = Duration::from_millis(100);

impl Steering {
    /// No policy yet, for the tasks of `registry` on a budget of `resources`.
    pub(crate) fn new(registry: Arc<Registry>, resources: ResourceTotals) -> Self {
        Steering { registry, resources, running: Mutex::new(None) }
    }

    /// Starts the policy `config` names, replacing any before it; each task's knobs
    /// now are what the native fallback keeps.
    pub(crate) fn start(&self, config: PolicyConfig) -> Result<(), Error> {
        config.validate()?;
        let engine = PolicyEngine::new(config.host_config()).map_err(|e| Error::policy("start", e))?;
        let module = engine.compile_file(&config.module).map_err(|e| Error::policy("compile", e))?;
        let tasks: ListTasks = {
            let registry = self.registry.clone();
            Arc::new(move || registry.tasks())
        };
        let fallback = KeepConfigured::new(self.registry.tasks().iter().map(|t| (t.name().to_string(), t.serving().0)));
        let tick = Duration::from_millis(config.tick_ms.max(1));
        let mut control_config = ControlConfig::default().with_tick(tick).with_resources(self.resources.clone());
        control_config.record = config.record.clone();
        control_config.early_tick = config.early_tick();
        let control = ControlLoop::start(tasks, module, config.parameters, fallback, control_config)?;
        if config.watch {
            control.watch(config.module.clone(), engine.clone(), WATCH_EVERY)?;
        }
        *self.lock() = Some(RunningPolicy { engine, control });
        Ok(())
    }

    /// Replaces the running policy with the module at `path`, with `parameters` or,
    /// `None`, the old ones. Returns how long it took.
    pub(crate) fn reload(&self, path: &Path, parameters: Option<serde_json::Value>) -> Result<Duration, Error> {
        let started = Instant::now();
        let guard = self.lock();
        let running = guard.as_ref().ok_or_else(no_policy)?;
        let module = running.engine.compile_file(path).map_err(|e| Error::policy("compile", e))?;
        running.control.reload(module, parameters)?;
        Ok(started.elapsed())
    }

    /// Runs the module at `path` in shadow (`None` stops the shadow).
    pub(crate) fn shadow(&self, path: Option<&Path>, parameters: Option<serde_json::Value>) -> Result<(), Error> {
        let guard = self.lock();
        let running = guard.as_ref().ok_or_else(no_policy)?;
        let module =
            path.map(|p| running.engine.compile_file(p)).transpose().map_err(|e| Error::policy("compile", e))?;
        running.control.set_shadow(module.map(|m| (m, parameters)))
    }

    /// What the running policy has done, if one runs.
    pub(crate) fn status(&self) -> Option<ControlStatus> {
        self.lock().as_ref().map(|p| p.control.status())
    }

    /// Stops the running policy.
    pub(crate) fn stop(&self) {
        self.lock().take();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Option<RunningPolicy>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The error of a call that needs a running policy when none runs.
fn no_policy() -> Error {
    Error::Precondition("no policy is running: start one first".into())
}
