//! The runtime's scheduling policy: a Wasm module that decides, every tick, which
//! variant serves each task, with what batching knobs and instances; started from
//! the config or by call, reloaded by call or when its file changes. It steers the
//! tasks of a registry within the machine's budget, and knows nothing else of the
//! runtime that holds it.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use modelless_runtime::policy::{
    ControlConfig, ControlLoop, ControlStatus, KeepConfigured, ListTasks, PolicyEngine, PolicyModule, ResourceTotals,
};
use modelless_runtime::source::{ArtifactKind, Source};
#[cfg(feature = "oci")]
use modelless_runtime::source::{Fetched, Follow, FollowStatus};
use modelless_runtime::{Error, Registry};

use crate::policy_config::PolicyConfig;
use crate::sources::{Local, Sources};

/// The policy steering a registry's tasks, when one runs.
pub(crate) struct Steering {
    registry: Arc<Registry>,
    resources: ResourceTotals,
    sources: Arc<Sources>,
    running: Mutex<Option<RunningPolicy>>,
}

/// A policy that runs.
struct RunningPolicy {
    engine: Arc<PolicyEngine>,
    // Declared before the loop: dropped first, so no reload comes to a loop stopped.
    #[cfg(feature = "oci")]
    follow: Option<Follow>,
    control: ControlLoop,
}

/// How often a watched module file is checked.
const WATCH_EVERY: Duration = Duration::from_millis(100);

impl Steering {
    /// No policy yet, for the tasks of `registry` on a budget of `resources`.
    pub(crate) fn new(registry: Arc<Registry>, resources: ResourceTotals, sources: Arc<Sources>) -> Self {
        Steering { registry, resources, sources, running: Mutex::new(None) }
    }

    /// Starts the policy `config` names, replacing any before it; each task's knobs
    /// now are what the native fallback keeps.
    pub(crate) fn start(&self, config: PolicyConfig) -> Result<(), Error> {
        config.validate()?;
        let engine = PolicyEngine::new(config.host_config()).map_err(|e| Error::policy("start", e))?;
        let local = self.sources.fetch(&config.module, config.sha256.as_deref(), ArtifactKind::Policy)?;
        let module = compile(&engine, &config.module, &local)?;
        let tasks: ListTasks = {
            let registry = self.registry.clone();
            Arc::new(move || registry.tasks())
        };
        let fallback = KeepConfigured::new(self.registry.tasks().iter().map(|t| (t.name().to_string(), t.serving().0)));
        let tick = Duration::from_millis(config.tick_ms.max(1));
        let mut control_config = ControlConfig::default().with_tick(tick).with_resources(self.resources.clone());
        control_config.record = config.record.clone();
        control_config.early_tick = config.early_tick();
        control_config.watch = config.watch();
        let control = ControlLoop::start(tasks, module, config.parameters, fallback, control_config)?;
        let source = Source::of_path(&config.module)?;
        if config.watch && !source.is_remote() {
            control.watch(config.module.clone(), engine.clone(), WATCH_EVERY)?;
        }
        #[cfg(feature = "oci")]
        let follow = match (source.followed(), &local.fetched) {
            (Some(reference), Some(fetched)) => Some(self.follow(reference.clone(), fetched, &engine, &control)?),
            _ => None,
        };
        *self.lock() = Some(RunningPolicy {
            engine,
            #[cfg(feature = "oci")]
            follow,
            control,
        });
        Ok(())
    }

    /// Follows the tag `reference`: each new digest is compiled and reloaded, as a
    /// changed file is; one that fails to compile or to dry-run is refused.
    #[cfg(feature = "oci")]
    fn follow(
        &self,
        reference: modelless_runtime::source::OciReference,
        fetched: &Fetched,
        engine: &Arc<PolicyEngine>,
        control: &ControlLoop,
    ) -> Result<Follow, Error> {
        let (engine, reloader, name) = (engine.clone(), control.reloader(), reference.to_string());
        let apply = Box::new(move |fetched: &Fetched| {
            reloader.reload(compile_as(&engine, &name, &fetched.path)?, None).map(drop)
        });
        let fetcher = self.sources.fetcher()?;
        Follow::start(fetcher, reference, ArtifactKind::Policy, fetched, self.sources.poll_interval(), apply)
    }

    /// What the followed tag of the running policy serves, if it follows one.
    #[cfg(feature = "oci")]
    pub(crate) fn followed(&self) -> Option<FollowStatus> {
        self.lock().as_ref().and_then(|p| p.follow.as_ref()).map(Follow::status)
    }

    /// Replaces the running policy with the module at `path`, with `parameters` or,
    /// `None`, the old ones. Returns how long it took.
    pub(crate) fn reload(&self, path: &Path, parameters: Option<serde_json::Value>) -> Result<Duration, Error> {
        let started = Instant::now();
        let guard = self.lock();
        let running = guard.as_ref().ok_or_else(no_policy)?;
        let local = self.sources.fetch(path, None, ArtifactKind::Policy)?;
        let module = compile(&running.engine, path, &local)?;
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

/// Compiles the module `named` names, now the file `local`: a remote one under its
/// reference, so that the status and the logs name where it came from.
fn compile(engine: &Arc<PolicyEngine>, named: &Path, local: &Local) -> Result<PolicyModule, Error> {
    if local.path == named {
        return engine.compile_file(named).map_err(|e| Error::policy("compile", e));
    }
    compile_as(engine, &named.display().to_string(), &local.path)
}

/// Compiles the module in the file at `path` under the name `name`.
fn compile_as(engine: &Arc<PolicyEngine>, name: &str, path: &Path) -> Result<PolicyModule, Error> {
    let bytes = std::fs::read(path).map_err(|e| Error::io("read", path, e))?;
    engine.compile(name, &bytes).map_err(|e| Error::policy("compile", e))
}

/// The error of a call that needs a running policy when none runs.
fn no_policy() -> Error {
    Error::Precondition("no policy is running: start one first".into())
}
