//! The sandbox policies run in: one wasmtime engine; modules compiled once (and kept
//! compiled on disk, when a folder is given), told apart as core modules of ABI v1 or
//! components of the `modelless:policy` world, checked, and instantiated from a
//! pre-linked form; every call under an epoch deadline (and fuel, when asked), every
//! instance under a memory cap summed over its memories, every output under a size
//! limit. Neither kind gets a capability: core modules' WASI imports are linked with
//! nothing behind them, and components may import only the world's log.

mod compiled_cache;
mod component;
mod core_abi;
mod limits;
mod no_wasi;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use modelless_policy_abi::{ABI_VERSION, Decision, PolicyOutput, Snapshot, UnknownFields};
use wasmtime::{Config, Engine, Store, Trap};

use self::compiled_cache::{Compiled, CompiledCache};
use self::component::{ComponentInstance, ComponentModule};
use self::core_abi::{CoreInstance, CoreModule, WithInput};
use self::limits::{MemoryCap, MemoryCapReached};
use crate::error::{Cause, PolicyError};

/// Memory cap of a core module's instance, by default: the policies in Rust, C, Zig,
/// AssemblyScript and Go that ship run in a few MiB.
pub const CORE_MEMORY_LIMIT_BYTES: usize = 16 << 20;

/// Memory cap of a component's instance, by default: CPython needs 12.4 MiB to start
/// and StarlingMonkey 9 to 27 MiB (see docs/policies.md for what the shipped ones use).
pub const COMPONENT_MEMORY_LIMIT_BYTES: usize = 64 << 20;

/// Limits every policy call runs under.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// Longest a call may run.
    pub deadline: Duration,
    /// Longest instantiating a module and its `init` may take together: an
    /// interpreter's component starts in milliseconds, not in a tick's deadline.
    pub setup_deadline: Duration,
    /// Most linear memory an instance may hold, in bytes; `None`: the default of its
    /// kind ([`CORE_MEMORY_LIMIT_BYTES`], [`COMPONENT_MEMORY_LIMIT_BYTES`]).
    pub memory_limit_bytes: Option<usize>,
    /// Fuel per call, for deterministic tests; `None` for none (the deadline alone).
    pub fuel: Option<u64>,
    /// Largest output the host reads, in bytes.
    pub max_output_bytes: usize,
    /// Folder compiled modules are kept in, by the module's hash and the engine's; `None`: every
    /// load compiles.
    pub compiled_cache: Option<PathBuf>,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            deadline: Duration::from_millis(10),
            setup_deadline: Duration::from_secs(1),
            memory_limit_bytes: None,
            fuel: None,
            max_output_bytes: 1 << 20,
            compiled_cache: None,
        }
    }
}

impl HostConfig {
    /// Sets the deadline per call.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the memory cap per instance, whatever its kind.
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit_bytes = Some(bytes);
        self
    }

    /// Gives every call this much fuel.
    pub fn with_fuel(mut self, fuel: u64) -> Self {
        self.fuel = Some(fuel);
        self
    }

    /// Keeps compiled modules in `dir`.
    pub fn with_compiled_cache(mut self, dir: impl Into<PathBuf>) -> Self {
        self.compiled_cache = Some(dir.into());
        self
    }

    /// The memory cap of an instance of `kind`.
    pub fn memory_limit(&self, kind: ModuleKind) -> usize {
        self.memory_limit_bytes.unwrap_or(match kind {
            ModuleKind::Core => CORE_MEMORY_LIMIT_BYTES,
            ModuleKind::Component => COMPONENT_MEMORY_LIMIT_BYTES,
        })
    }
}

/// The folder compiled policies are kept in by default: `$XDG_CACHE_HOME/modelless/
/// policies`, or `~/.cache/modelless/policies`.
pub fn default_compiled_cache() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|home| Path::new(&home).join(".cache")))?;
    Some(base.join("modelless").join("policies"))
}

/// How often the epoch advances while a call is in flight; the deadline's resolution.
const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Log lines a policy may write per call, and bytes per line; the rest is dropped.
const MAX_LOG_LINES: usize = 64;
const MAX_LOG_BYTES: usize = 1024;

/// Which door a module came in by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModuleKind {
    /// A core module of ABI v1.
    Core,
    /// A component of the `modelless:policy` world.
    Component,
}

impl ModuleKind {
    /// What `bytes` are, binary or text: a component's preamble has layer 1, and its
    /// text starts with `(component`.
    pub fn of(bytes: &[u8]) -> ModuleKind {
        let component = match bytes {
            [0, b'a', b's', b'm', _, _, layer_lo, layer_hi, ..] => [*layer_lo, *layer_hi] == [1, 0],
            _ => std::str::from_utf8(bytes).is_ok_and(|text| text.trim_start().starts_with("(component")),
        };
        if component { ModuleKind::Component } else { ModuleKind::Core }
    }

    /// How `policy check` names it.
    pub fn label(self) -> &'static str {
        match self {
            ModuleKind::Core => "a core module of ABI version 1",
            ModuleKind::Component => "a component of the modelless:policy@1.0.0 world",
        }
    }
}

/// The engine every policy module is compiled with, and the clock of their deadlines.
pub struct PolicyEngine {
    engine: Engine,
    config: HostConfig,
    cache: Option<CompiledCache>,
    ticker: Arc<Ticker>,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for PolicyEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyEngine").finish_non_exhaustive()
    }
}

/// Advances the engine's epoch every [`EPOCH_TICK`], only while calls are in flight:
/// idle policies cost no wakeups, and a call wakes the clock only when it is the first
/// in flight.
struct Ticker {
    in_flight: AtomicUsize,
    state: Mutex<bool>,
    wake: Condvar,
}

impl Ticker {
    fn run(&self, engine: Engine) {
        loop {
            {
                let mut stopped = self.state.lock().unwrap_or_else(PoisonError::into_inner);
                while self.in_flight.load(Ordering::Acquire) == 0 && !*stopped {
                    stopped = self.wake.wait(stopped).unwrap_or_else(PoisonError::into_inner);
                }
                if *stopped {
                    return;
                }
            }
            std::thread::sleep(EPOCH_TICK);
            engine.increment_epoch();
        }
    }

    fn begin(&self) {
        if self.in_flight.fetch_add(1, Ordering::AcqRel) == 0 {
            // Taking the lock orders this with the clock's check before it waits.
            drop(self.state.lock().unwrap_or_else(PoisonError::into_inner));
            self.wake.notify_one();
        }
    }

    fn end(&self) {
        self.in_flight.fetch_sub(1, Ordering::AcqRel);
    }

    fn stop(&self) {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = true;
        self.wake.notify_one();
    }
}

impl PolicyEngine {
    /// An engine whose calls run under `config`.
    pub fn new(config: HostConfig) -> Result<Arc<PolicyEngine>, PolicyError> {
        let mut wasm = Config::new();
        wasm.epoch_interruption(true);
        wasm.consume_fuel(config.fuel.is_some());
        wasm.wasm_component_model(true);
        let engine = Engine::new(&wasm).map_err(|e| PolicyError::Host { what: "its engine", source: cause(e) })?;
        let ticker =
            Arc::new(Ticker { in_flight: AtomicUsize::new(0), state: Mutex::new(false), wake: Condvar::new() });
        let (clock, for_ticker) = (engine.clone(), ticker.clone());
        std::thread::Builder::new()
            .name("modelless-policy-clock".into())
            .spawn(move || for_ticker.run(clock))
            .map_err(|e| PolicyError::Host { what: "its clock", source: Cause::new(e) })?;
        let cache = config.compiled_cache.as_deref().map(|dir| CompiledCache::new(dir, &engine));
        Ok(Arc::new(PolicyEngine { engine, config, cache, ticker }))
    }

    /// The limits calls run under.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Compiles a module (binary, or text format), or loads it compiled from the
    /// cache, and checks that it is a policy: a core module of this ABI version, or a
    /// component of its world.
    pub fn compile(self: &Arc<Self>, name: &str, bytes: &[u8]) -> Result<PolicyModule, PolicyError> {
        let started = Instant::now();
        let kind = ModuleKind::of(bytes);
        let component = kind == ModuleKind::Component;
        let digest = crate::source::sha256_digest(bytes);
        let cached = self.cache.as_ref().and_then(|cache| cache.load(&self.engine, &digest, component));
        let from_cache = cached.is_some();
        let compiled = match cached {
            Some(compiled) => compiled,
            None => {
                let compiled = if component {
                    wasmtime::component::Component::new(&self.engine, bytes).map(Compiled::Component)
                } else {
                    wasmtime::Module::new(&self.engine, bytes).map(Compiled::Core)
                };
                let compiled = compiled.map_err(|e| PolicyError::Invalid(cause(e)))?;
                if let Some(cache) = &self.cache {
                    cache.store(&digest, &compiled);
                }
                compiled
            }
        };
        let checked = match &compiled {
            Compiled::Core(module) => Checked::Core(CoreModule::new(&self.engine, module)?),
            Compiled::Component(component) => Checked::Component(ComponentModule::new(&self.engine, component)?),
        };
        Ok(PolicyModule {
            name: Arc::from(name),
            digest: Arc::from(digest),
            checked: Arc::new(checked),
            engine: self.clone(),
            loaded: Loaded { from_cache, took: started.elapsed(), bytes: bytes.len() },
        })
    }

    /// Reads and compiles a module file.
    pub fn compile_file(self: &Arc<Self>, path: &Path) -> Result<PolicyModule, PolicyError> {
        let bytes =
            std::fs::read(path).map_err(|e| PolicyError::Read { path: path.to_path_buf(), source: Arc::new(e) })?;
        let name = path.file_stem().map_or_else(|| "policy".into(), |s| s.to_string_lossy().into_owned());
        self.compile(&name, &bytes)
    }
}

impl Drop for PolicyEngine {
    fn drop(&mut self) {
        self.ticker.stop();
    }
}

/// A module checked as one kind or the other.
enum Checked {
    Core(CoreModule),
    Component(ComponentModule),
}

/// How a module came to be compiled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Loaded {
    /// Whether its compiled form came from the cache.
    pub from_cache: bool,
    /// Compiling (or loading) and checking it took.
    pub took: Duration,
    /// Its size.
    pub bytes: usize,
}

/// A compiled policy module, ready to instantiate.
#[derive(Clone)]
pub struct PolicyModule {
    name: Arc<str>,
    digest: Arc<str>,
    checked: Arc<Checked>,
    engine: Arc<PolicyEngine>,
    loaded: Loaded,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for PolicyModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyModule").field("name", &self.name).field("digest", &self.digest).finish_non_exhaustive()
    }
}

impl PolicyModule {
    /// Its name (the file's stem, or what it was compiled as).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its digest: `sha256:` and the hex SHA-256 of its bytes, as a registry names it.
    pub fn digest(&self) -> &str {
        &self.digest
    }

    /// Which kind of module it is.
    pub fn kind(&self) -> ModuleKind {
        match *self.checked {
            Checked::Core(_) => ModuleKind::Core,
            Checked::Component(_) => ModuleKind::Component,
        }
    }

    /// How it was compiled.
    pub fn loaded(&self) -> Loaded {
        self.loaded
    }

    /// Whether it can carry state across reloads: a core module that exports
    /// `save_state` and `load_state`, or any component (the world has both).
    pub fn carries_state(&self) -> bool {
        match &*self.checked {
            Checked::Core(core) => core.has_state,
            Checked::Component(_) => true,
        }
    }

    /// The memory cap of its instances.
    pub fn memory_limit(&self) -> usize {
        self.engine.config.memory_limit(self.kind())
    }

    /// A fresh instance; `parameters` go to its `init` when it has one. Instantiating
    /// and `init` run under the setup deadline.
    pub fn instantiate(&self, parameters: Option<&serde_json::Value>) -> Result<PolicyInstance, PolicyError> {
        let limit = self.memory_limit();
        let state = HostState { cap: MemoryCap::new(limit), logs: Vec::new(), wasi: no_wasi::NoWasi::default() };
        let mut store = Store::new(&self.engine.engine, state);
        store.limiter(|s| &mut s.cap);
        let setup = self.engine.config.setup_deadline;
        let live = match &*self.checked {
            Checked::Core(core) => {
                Live::Core(Box::new(guarded(&self.engine, &mut store, setup, limit, |store| core.instantiate(store))??))
            }
            Checked::Component(component) => {
                Live::Component(guarded(&self.engine, &mut store, setup, limit, |store| component.instantiate(store))??)
            }
        };
        let mut policy = PolicyInstance { module: self.clone(), store, live };
        if let Some(parameters) = parameters {
            let json = serde_json::to_vec(parameters).map_err(|e| encode("the parameters", e))?;
            let out = policy.call(Call::Init, &json, setup)?;
            status(&out)?;
        }
        Ok(policy)
    }
}

/// What a store holds besides the instance.
struct HostState {
    cap: MemoryCap,
    logs: Vec<PolicyLog>,
    wasi: no_wasi::NoWasi,
}

/// Keeps a line a policy logged, within [`MAX_LOG_LINES`] a call.
fn push_log(state: &mut HostState, log: PolicyLog) {
    if state.logs.len() < MAX_LOG_LINES {
        tracing::debug!(level = log.level, message = %log.message, "policy log");
        state.logs.push(log);
    }
}

/// A line a policy logged (through `modelless.log`, the world's `host.log`, or, for a
/// core module that imports WASI, what it wrote to stdout and stderr).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyLog {
    /// Its level: 0 error, 1 warn, 2 info, 3 debug, 4 trace.
    pub level: i32,
    /// The text.
    pub message: String,
}

/// An instance of either kind.
enum Live {
    // Its typed exports are many handles: boxed, an instance of either kind is small.
    Core(Box<CoreInstance>),
    Component(ComponentInstance),
}

/// Which call to make.
#[derive(Clone, Copy)]
enum Call {
    Init,
    Decide,
    LoadState,
}

/// A live instance of a policy module.
pub struct PolicyInstance {
    module: PolicyModule,
    store: Store<HostState>,
    live: Live,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for PolicyInstance {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyInstance").finish_non_exhaustive()
    }
}

impl PolicyInstance {
    /// The module it is an instance of.
    pub fn module(&self) -> &PolicyModule {
        &self.module
    }

    /// The decision for `snapshot`.
    pub fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, PolicyError> {
        let json = serde_json::to_vec(snapshot).map_err(|e| encode("the snapshot", e))?;
        self.decide_json(&json)
    }

    /// The decision for a snapshot already encoded as JSON.
    /// Fields of the decision this host does not know are ignored, and said: logged
    /// at warning level (so the policy's status and `policy check` show them) and
    /// counted in `/metrics`.
    pub fn decide_json(&mut self, snapshot: &[u8]) -> Result<Decision, PolicyError> {
        let deadline = self.module.engine.config.deadline;
        let out = self.call(Call::Decide, snapshot, deadline)?;
        let (decision, unknown) = decision_from_output(&out)?;
        if unknown.count > 0 {
            crate::metrics::serving_metrics().policy_wrote_unknown_fields(self.module.digest(), unknown.count);
        }
        let unnamed = unknown.count - unknown.named.len();
        for field in unknown.named {
            let message = format!("decision field {field} is not known to this host (ABI {ABI_VERSION}): ignored");
            push_log(self.store.data_mut(), PolicyLog { level: 1, message });
        }
        if unnamed > 0 {
            let message = format!("{unnamed} more decision fields not known to this host: ignored");
            push_log(self.store.data_mut(), PolicyLog { level: 1, message });
        }
        Ok(decision)
    }

    /// The policy's own state, when it carries any.
    pub fn save_state(&mut self) -> Result<Option<serde_json::Value>, PolicyError> {
        let PolicyInstance { module, store, live } = self;
        let engine = &module.engine;
        let (deadline, limit, cap) = (engine.config.deadline, engine.config.max_output_bytes, module.memory_limit());
        let out = match live {
            Live::Core(core) => match guarded(engine, store, deadline, cap, |store| core.save_state(store, limit))? {
                Some(out) => out?,
                None => return Ok(None),
            },
            Live::Component(component) => {
                guarded(engine, store, deadline, cap, |store| component.save_state(store, limit))??
            }
        };
        serde_json::from_slice(&out).map_err(|e| unreadable("state", e))
    }

    /// The JSON Schema of its parameters, where it exports one (`parameters_schema`,
    /// which the Rust kit adds); `None` where it does not, and for components.
    pub fn parameters_schema(&mut self) -> Result<Option<serde_json::Value>, PolicyError> {
        let PolicyInstance { module, store, live } = self;
        let Live::Core(core) = live else { return Ok(None) };
        let engine = &module.engine;
        let (deadline, limit, cap) =
            (engine.config.setup_deadline, engine.config.max_output_bytes, module.memory_limit());
        match guarded(engine, store, deadline, cap, |store| core.parameters_schema(store, limit))? {
            Some(out) => serde_json::from_slice(&out?).map(Some).map_err(|e| unreadable("parameters schema", e)),
            None => Ok(None),
        }
    }

    /// Hands it the state a module it replaces saved; `false` when it does not take
    /// state.
    pub fn load_state(&mut self, state: &serde_json::Value) -> Result<bool, PolicyError> {
        if !self.module.carries_state() {
            return Ok(false);
        }
        let json = serde_json::to_vec(state).map_err(|e| encode("the state", e))?;
        let setup = self.module.engine.config.setup_deadline;
        status(&self.call(Call::LoadState, &json, setup)?)?;
        Ok(true)
    }

    /// Linear memory it holds now, over all its memories.
    pub fn memory_bytes(&self) -> usize {
        self.store.data().cap.held_bytes()
    }

    /// What it logged since the last call of this.
    pub fn take_logs(&mut self) -> Vec<PolicyLog> {
        std::mem::take(&mut self.store.data_mut().logs)
    }

    /// Calls an export that takes JSON, within `deadline`; its output.
    fn call(&mut self, call: Call, input: &[u8], deadline: Duration) -> Result<Vec<u8>, PolicyError> {
        let PolicyInstance { module, store, live } = self;
        let engine = &module.engine;
        let (limit, cap) = (engine.config.max_output_bytes, module.memory_limit());
        match live {
            Live::Core(core) => {
                let export = match call {
                    Call::Init => WithInput::Init,
                    Call::Decide => WithInput::Decide,
                    Call::LoadState => WithInput::LoadState,
                };
                guarded(engine, store, deadline, cap, |store| core.call_with_input(store, export, input, limit))?
            }
            Live::Component(component) => guarded(engine, store, deadline, cap, |store| match call {
                Call::Init => component.init(store, input),
                Call::Decide => component.decide(store, input, limit),
                Call::LoadState => component.load_state(store, input),
            })?,
        }
    }
}

/// Runs one call with its deadline and fuel set, the clock running while it runs.
fn guarded<R>(
    engine: &PolicyEngine,
    store: &mut Store<HostState>,
    deadline: Duration,
    memory_limit: usize,
    f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
) -> Result<R, PolicyError> {
    let config = &engine.config;
    let ticks = deadline.as_micros().div_ceil(EPOCH_TICK.as_micros()) as u64 + 1;
    store.set_epoch_deadline(ticks);
    store.epoch_deadline_trap();
    if let Some(fuel) = config.fuel {
        store.set_fuel(fuel).map_err(|e| PolicyError::Instantiate(cause(e)))?;
    }
    engine.ticker.begin();
    let result = f(store);
    engine.ticker.end();
    result.map_err(|e| classify(e, deadline, memory_limit))
}

/// The failure a wasmtime error stands for.
fn classify(error: wasmtime::Error, deadline: Duration, memory_limit: usize) -> PolicyError {
    if error.chain().any(|e| e.downcast_ref::<MemoryCapReached>().is_some()) {
        return PolicyError::MemoryLimit { limit_bytes: memory_limit };
    }
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            PolicyError::Timeout { deadline_ms: deadline.as_millis().try_into().unwrap_or(u64::MAX) }
        }
        Some(Trap::OutOfFuel) => PolicyError::OutOfFuel,
        _ => PolicyError::Trap(cause(error)),
    }
}

/// The decision a module's `decide` wrote, or the error it reported.
/// The decision a module wrote, with the fields of it this host does not know (read
/// only from a decision that decoded).
pub(crate) fn decision_from_output(out: &[u8]) -> Result<(Decision, UnknownFields), PolicyError> {
    match serde_json::from_slice::<PolicyOutput>(out) {
        Ok(PolicyOutput::Decision(decision)) => Ok((decision, UnknownFields::of(out))),
        Ok(PolicyOutput::Error { error }) => Err(PolicyError::Reported(error)),
        Err(e) => Err(unreadable("a decision", e)),
    }
}

/// A wasmtime error kept whole, with its context.
fn cause(error: wasmtime::Error) -> Cause {
    Cause::boxed(error.into())
}

/// JSON the module wrote that is not `what` it should be.
fn unreadable(what: &'static str, error: serde_json::Error) -> PolicyError {
    PolicyError::UnreadableOutput { what, source: Cause::new(error) }
}

/// `what` the host could not write as JSON for the module.
fn encode(what: &'static str, error: serde_json::Error) -> PolicyError {
    PolicyError::Encode { what, source: Cause::new(error) }
}

/// `{}` from `init` or `load_state` means it took what it was given.
pub(crate) fn status(out: &[u8]) -> Result<(), PolicyError> {
    match serde_json::from_slice::<serde_json::Value>(out) {
        Ok(serde_json::Value::Object(o)) => match o.get("error") {
            Some(error) => Err(PolicyError::Reported(error.as_str().unwrap_or_default().to_string())),
            None => Ok(()),
        },
        _ => Err(PolicyError::InvalidOutput(format!("expected {{}} or {{\"error\": …}}, got {} bytes", out.len()))),
    }
}
