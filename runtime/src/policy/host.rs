//! The sandbox policies run in: one wasmtime engine; modules compiled once, checked for
//! the ABI's marker and exports, and instantiated from an `InstancePre`; every call
//! under an epoch deadline (and fuel, when asked), every instance under a memory cap,
//! every output under a size limit.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Duration;

use modelless_policy_abi::guest::unpack;
use modelless_policy_abi::{ABI_VERSION, Decision, MARKER_EXPORT, PolicyOutput, Snapshot};
use wasmtime::{
    Caller, Config, Engine, ExternType, InstancePre, Linker, Memory, Module, Store, StoreLimits, StoreLimitsBuilder,
    Trap, TypedFunc,
};

use crate::error::{Cause, PolicyError};

/// Limits every policy call runs under.
#[derive(Clone, Debug, PartialEq)]
pub struct HostConfig {
    /// Longest a call may run.
    pub deadline: Duration,
    /// Most linear memory an instance may have, in bytes.
    pub memory_limit_bytes: usize,
    /// Fuel per call, for deterministic tests; `None` for none (the deadline alone).
    pub fuel: Option<u64>,
    /// Largest output the host reads, in bytes.
    pub max_output_bytes: usize,
}

impl Default for HostConfig {
    fn default() -> Self {
        HostConfig {
            deadline: Duration::from_millis(10),
            memory_limit_bytes: 16 << 20,
            fuel: None,
            max_output_bytes: 1 << 20,
        }
    }
}

impl HostConfig {
    /// Sets the deadline per call.
    pub fn with_deadline(mut self, deadline: Duration) -> Self {
        self.deadline = deadline;
        self
    }

    /// Sets the memory cap per instance.
    pub fn with_memory_limit(mut self, bytes: usize) -> Self {
        self.memory_limit_bytes = bytes;
        self
    }

    /// Gives every call this much fuel.
    pub fn with_fuel(mut self, fuel: u64) -> Self {
        self.fuel = Some(fuel);
        self
    }
}

/// How often the epoch advances while a call is in flight; the deadline's resolution.
const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Log lines a policy may write per call, and bytes per line; the rest is dropped.
const MAX_LOG_LINES: usize = 64;
const MAX_LOG_BYTES: usize = 1024;

/// The engine every policy module is compiled with, and the clock of their deadlines.
pub struct PolicyEngine {
    engine: Engine,
    config: HostConfig,
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
        let engine = Engine::new(&wasm).map_err(|e| PolicyError::Host { what: "its engine", source: cause(e) })?;
        let ticker =
            Arc::new(Ticker { in_flight: AtomicUsize::new(0), state: Mutex::new(false), wake: Condvar::new() });
        let (clock, for_ticker) = (engine.clone(), ticker.clone());
        std::thread::Builder::new()
            .name("modelless-policy-clock".into())
            .spawn(move || for_ticker.run(clock))
            .map_err(|e| PolicyError::Host { what: "its clock", source: Cause::new(e) })?;
        Ok(Arc::new(PolicyEngine { engine, config, ticker }))
    }

    /// The limits calls run under.
    pub fn config(&self) -> &HostConfig {
        &self.config
    }

    /// Compiles a module (binary, or text format) and checks that it is a policy of
    /// this ABI version.
    pub fn compile(self: &Arc<Self>, name: &str, bytes: &[u8]) -> Result<PolicyModule, PolicyError> {
        let module = Module::new(&self.engine, bytes).map_err(|e| PolicyError::Invalid(cause(e)))?;
        let is_func = |name: &str| matches!(module.get_export(name), Some(ExternType::Func(_)));
        if !is_func(MARKER_EXPORT) {
            return Err(PolicyError::WrongAbi { marker: MARKER_EXPORT, version: ABI_VERSION });
        }
        if !matches!(module.get_export("memory"), Some(ExternType::Memory(_))) {
            return Err(PolicyError::MissingExport { name: "memory".into(), expected: "a memory" });
        }
        for export in ["alloc", "dealloc", "decide"] {
            if !is_func(export) {
                return Err(PolicyError::MissingExport { name: export.into(), expected: "a function" });
            }
        }
        let mut linker = Linker::new(&self.engine);
        linker
            .func_wrap("modelless", "log", log)
            .map_err(|e| PolicyError::Instantiate(cause(e.context("cannot define `modelless.log`"))))?;
        let pre = linker.instantiate_pre(&module).map_err(|e| PolicyError::Instantiate(cause(e)))?;
        Ok(PolicyModule {
            name: Arc::from(name),
            pre,
            engine: self.clone(),
            has_init: is_func("init"),
            has_state: is_func("save_state") && is_func("load_state"),
        })
    }

    /// Reads and compiles a module file.
    pub fn compile_file(self: &Arc<Self>, path: &std::path::Path) -> Result<PolicyModule, PolicyError> {
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

/// A compiled policy module, ready to instantiate.
#[derive(Clone)]
pub struct PolicyModule {
    name: Arc<str>,
    pre: InstancePre<HostState>,
    engine: Arc<PolicyEngine>,
    has_init: bool,
    has_state: bool,
}

// Its parts (sessions, threads, closures, channels) print nothing useful.
impl std::fmt::Debug for PolicyModule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PolicyModule").field("name", &self.name).finish_non_exhaustive()
    }
}

impl PolicyModule {
    /// Its name (the file's stem, or what it was compiled as).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether it exports `save_state` and `load_state`.
    pub fn carries_state(&self) -> bool {
        self.has_state
    }

    /// A fresh instance; `parameters` go to its `init` when it exports one.
    pub fn instantiate(&self, parameters: Option<&serde_json::Value>) -> Result<PolicyInstance, PolicyError> {
        let limits = StoreLimitsBuilder::new()
            .memory_size(self.engine.config.memory_limit_bytes)
            .instances(1)
            .trap_on_grow_failure(true)
            .build();
        let mut store = Store::new(&self.engine.engine, HostState { limits, logs: Vec::new() });
        store.limiter(|s| &mut s.limits);
        let instance = guarded(&self.engine, &mut store, |store| self.pre.instantiate(store))?;
        let func = |name: &str| PolicyError::MissingExport { name: name.into(), expected: "of the ABI's type" };
        let memory = instance.get_memory(&mut store, "memory").ok_or_else(|| func("memory"))?;
        let alloc = instance.get_typed_func(&mut store, "alloc").map_err(|_| func("alloc"))?;
        let dealloc = instance.get_typed_func(&mut store, "dealloc").map_err(|_| func("dealloc"))?;
        let decide = instance.get_typed_func(&mut store, "decide").map_err(|_| func("decide"))?;
        let init = optional_func(&instance, &mut store, "init", self.has_init)?;
        let save_state = optional_func(&instance, &mut store, "save_state", self.has_state)?;
        let load_state = optional_func(&instance, &mut store, "load_state", self.has_state)?;
        let mut policy = PolicyInstance {
            module: self.clone(),
            store,
            memory,
            alloc,
            dealloc,
            decide,
            init,
            save_state,
            load_state,
        };
        if let (Some(parameters), Some(init)) = (parameters, policy.init.clone()) {
            let json = serde_json::to_vec(parameters).map_err(|e| encode("the parameters", e))?;
            policy.call_with_input(init, &json).and_then(|out| status(&out))?;
        }
        Ok(policy)
    }
}

/// An export the ABI allows a module to leave out, typed, when the module has it.
fn optional_func<P: wasmtime::WasmParams, R: wasmtime::WasmResults>(
    instance: &wasmtime::Instance,
    store: &mut Store<HostState>,
    name: &str,
    present: bool,
) -> Result<Option<TypedFunc<P, R>>, PolicyError> {
    if !present {
        return Ok(None);
    }
    let func = instance.get_typed_func(store, name);
    func.map(Some).map_err(|_| PolicyError::MissingExport { name: name.into(), expected: "of the ABI's type" })
}

/// What a store holds besides the instance.
struct HostState {
    limits: StoreLimits,
    logs: Vec<PolicyLog>,
}

/// A line a policy logged through `modelless.log`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyLog {
    /// Its level: 0 error, 1 warn, 2 info, 3 debug, 4 trace.
    pub level: i32,
    /// The text.
    pub message: String,
}

/// The `modelless.log(level, ptr, len)` import.
fn log(mut caller: Caller<'_, HostState>, level: i32, ptr: i32, len: i32) {
    if caller.data().logs.len() >= MAX_LOG_LINES {
        return;
    }
    let Some(wasmtime::Extern::Memory(memory)) = caller.get_export("memory") else { return };
    let mut bytes = vec![0u8; (len.max(0) as usize).min(MAX_LOG_BYTES)];
    if memory.read(&caller, ptr.max(0) as usize, &mut bytes).is_err() {
        return;
    }
    let message = String::from_utf8_lossy(&bytes).into_owned();
    tracing::debug!(level, %message, "policy log");
    caller.data_mut().logs.push(PolicyLog { level, message });
}

/// A live instance of a policy module.
pub struct PolicyInstance {
    module: PolicyModule,
    store: Store<HostState>,
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    dealloc: TypedFunc<(i32, i32), ()>,
    decide: TypedFunc<(i32, i32), i64>,
    init: Option<TypedFunc<(i32, i32), i64>>,
    save_state: Option<TypedFunc<(), i64>>,
    load_state: Option<TypedFunc<(i32, i32), i64>>,
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
    pub fn decide_json(&mut self, snapshot: &[u8]) -> Result<Decision, PolicyError> {
        let out = self.call_with_input(self.decide.clone(), snapshot)?;
        decision_from_output(&out)
    }

    /// The policy's own state, when it exports `save_state` and has any.
    pub fn save_state(&mut self) -> Result<Option<serde_json::Value>, PolicyError> {
        let Some(save) = self.save_state.clone() else { return Ok(None) };
        let (memory, dealloc) = (self.memory, self.dealloc.clone());
        let limit = self.module.engine.config.max_output_bytes;
        let out = self.call(|store| {
            let packed = save.call(&mut *store, ())?;
            take_output(store, memory, &dealloc, packed, limit)
        })??;
        serde_json::from_slice(&out).map_err(|e| unreadable("state", e))
    }

    /// Hands it the state a module it replaces saved; `false` when it does not take
    /// state.
    pub fn load_state(&mut self, state: &serde_json::Value) -> Result<bool, PolicyError> {
        let Some(load) = self.load_state.clone() else { return Ok(false) };
        let json = serde_json::to_vec(state).map_err(|e| encode("the state", e))?;
        status(&self.call_with_input(load, &json)?)?;
        Ok(true)
    }

    /// What it logged since the last call of this.
    pub fn take_logs(&mut self) -> Vec<PolicyLog> {
        std::mem::take(&mut self.store.data_mut().logs)
    }

    /// Copies `input` into a buffer of the guest's, calls `func` on it, and returns
    /// the output it points to; both buffers are freed after. One deadline covers it all.
    fn call_with_input(&mut self, func: TypedFunc<(i32, i32), i64>, input: &[u8]) -> Result<Vec<u8>, PolicyError> {
        let len = i32::try_from(input.len())
            .map_err(|_| PolicyError::InvalidOutput(format!("input of {} bytes is too large", input.len())))?;
        let (memory, alloc, dealloc) = (self.memory, self.alloc.clone(), self.dealloc.clone());
        let limit = self.module.engine.config.max_output_bytes;
        self.call(|store| {
            let ptr = alloc.call(&mut *store, len)?;
            if memory.write(&mut *store, ptr as u32 as usize, input).is_err() {
                return Ok(Err(PolicyError::InvalidOutput(format!("alloc gave {ptr}, outside its memory"))));
            }
            let packed = func.call(&mut *store, (ptr, len))?;
            let out = take_output(store, memory, &dealloc, packed, limit)?;
            dealloc.call(&mut *store, (ptr, len))?;
            Ok(out)
        })?
    }

    fn call<R>(&mut self, f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<R>) -> Result<R, PolicyError> {
        guarded(&self.module.engine, &mut self.store, f)
    }
}

/// Reads the output `packed` points to, within `limit`, and frees it.
fn take_output(
    store: &mut Store<HostState>,
    memory: Memory,
    dealloc: &TypedFunc<(i32, i32), ()>,
    packed: i64,
    limit: usize,
) -> wasmtime::Result<Result<Vec<u8>, PolicyError>> {
    let (ptr, len) = unpack(packed);
    if len as usize > limit {
        return Ok(Err(PolicyError::OversizedOutput { len: u64::from(len), limit }));
    }
    let mut out = vec![0u8; len as usize];
    if memory.read(&*store, ptr as usize, &mut out).is_err() {
        return Ok(Err(PolicyError::InvalidOutput(format!("output at {ptr}, {len} bytes, is outside its memory"))));
    }
    dealloc.call(&mut *store, (ptr as i32, len as i32))?;
    Ok(Ok(out))
}

/// Runs one call with its deadline and fuel set, the clock running while it runs.
fn guarded<R>(
    engine: &PolicyEngine,
    store: &mut Store<HostState>,
    f: impl FnOnce(&mut Store<HostState>) -> wasmtime::Result<R>,
) -> Result<R, PolicyError> {
    let config = &engine.config;
    let ticks = config.deadline.as_micros().div_ceil(EPOCH_TICK.as_micros()) as u64 + 1;
    store.set_epoch_deadline(ticks);
    store.epoch_deadline_trap();
    if let Some(fuel) = config.fuel {
        store.set_fuel(fuel).map_err(|e| PolicyError::Instantiate(cause(e)))?;
    }
    engine.ticker.begin();
    let result = f(store);
    engine.ticker.end();
    result.map_err(|e| classify(e, config))
}

/// The failure a wasmtime error stands for.
fn classify(error: wasmtime::Error, config: &HostConfig) -> PolicyError {
    match error.downcast_ref::<Trap>() {
        Some(Trap::Interrupt) => {
            PolicyError::Timeout { deadline_ms: config.deadline.as_millis().try_into().unwrap_or(u64::MAX) }
        }
        Some(Trap::OutOfFuel) => PolicyError::OutOfFuel,
        _ if message(&error).contains("forcing trap when growing memory") => {
            PolicyError::MemoryLimit { limit_bytes: config.memory_limit_bytes }
        }
        _ => PolicyError::Trap(cause(error)),
    }
}

/// The decision a module's `decide` wrote, or the error it reported.
pub(crate) fn decision_from_output(out: &[u8]) -> Result<Decision, PolicyError> {
    match serde_json::from_slice::<PolicyOutput>(out) {
        Ok(PolicyOutput::Decision(decision)) => Ok(decision),
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

/// An error and its causes, on one line.
fn message(error: &wasmtime::Error) -> String {
    error.chain().map(|e| e.to_string()).collect::<Vec<_>>().join(": ")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_modules::{EMPTY_DECISION, policy};

    fn engine() -> Arc<PolicyEngine> {
        PolicyEngine::new(HostConfig::default()).unwrap()
    }

    fn decide(engine: &Arc<PolicyEngine>, wat: &str) -> Result<Decision, PolicyError> {
        engine.compile("test", wat.as_bytes())?.instantiate(None)?.decide(&Snapshot::default())
    }

    #[test]
    fn a_well_formed_module_decides() {
        assert_eq!(decide(&engine(), &policy(EMPTY_DECISION, "")), Ok(Decision::default()));
    }

    #[test]
    fn an_endless_loop_is_stopped_at_the_deadline() {
        let engine = PolicyEngine::new(HostConfig::default().with_deadline(Duration::from_millis(20))).unwrap();
        let result = decide(&engine, &policy("(loop $forever (br $forever)) (unreachable)", ""));
        assert_eq!(result, Err(PolicyError::Timeout { deadline_ms: 20 }));
    }

    #[test]
    fn with_fuel_an_endless_loop_runs_out_of_it() {
        let engine = PolicyEngine::new(HostConfig::default().with_fuel(100_000)).unwrap();
        let result = decide(&engine, &policy("(loop $forever (br $forever)) (unreachable)", ""));
        assert_eq!(result, Err(PolicyError::OutOfFuel));
    }

    #[test]
    fn growing_memory_to_a_gibibyte_hits_the_cap() {
        let grow = "(drop (memory.grow (i32.const 16384))) (i64.const 0)";
        assert_eq!(decide(&engine(), &policy(grow, "")), Err(PolicyError::MemoryLimit { limit_bytes: 16 << 20 }));
    }

    #[test]
    fn deep_recursion_and_a_panic_trap() {
        let recurse = "(call $decide (local.get $ptr) (local.get $len))";
        assert!(
            matches!(decide(&engine(), &policy(recurse, "")), Err(PolicyError::Trap(m)) if m.to_string().contains("stack"))
        );
        assert!(matches!(decide(&engine(), &policy("(unreachable)", "")), Err(PolicyError::Trap(_))));
    }

    #[test]
    fn garbage_oversized_and_out_of_bounds_output_is_refused() {
        let garbage = "(i64.or (i64.shl (i64.const 1100) (i64.const 32)) (i64.const 8))";
        assert!(matches!(
            decide(&engine(), &policy(garbage, "")),
            Err(PolicyError::UnreadableOutput { what: "a decision", .. })
        ));
        let huge = "(i64.const 100000000)";
        let refused = decide(&engine(), &policy(huge, ""));
        assert_eq!(refused, Err(PolicyError::OversizedOutput { len: 100_000_000, limit: 1 << 20 }));
        let outside = "(i64.or (i64.shl (i64.const 65000) (i64.const 32)) (i64.const 1000))";
        assert!(
            matches!(decide(&engine(), &policy(outside, "")), Err(PolicyError::InvalidOutput(m)) if m.contains("outside"))
        );
    }

    #[test]
    fn an_error_the_policy_reports_is_its_own_kind() {
        let wat = policy(
            "(i64.or (i64.shl (i64.const 1200) (i64.const 32)) (i64.const 16))",
            r#"(data (i32.const 1200) "{\"error\":\"nope\"}")"#,
        );
        assert_eq!(decide(&engine(), &wat), Err(PolicyError::Reported("nope".into())));
    }

    #[test]
    fn modules_that_are_not_policies_are_refused_at_compile_time() {
        let engine = engine();
        let kind = |bytes: &[u8]| engine.compile("test", bytes).err().map(|e| e.kind());
        assert_eq!(kind(b"\x7fELF not wasm at all"), Some("invalid_module"));
        let wrong_marker = policy(EMPTY_DECISION, "").replace("modelless_policy_abi_v1", "modelless_policy_abi_v2");
        assert_eq!(kind(wrong_marker.as_bytes()), Some("wrong_abi"));
        let no_decide = policy(EMPTY_DECISION, "").replace(r#"(export "decide")"#, "");
        assert_eq!(kind(no_decide.as_bytes()), Some("missing_export"));
        let foreign_import = policy(EMPTY_DECISION, "")
            .replace("(memory (export", r#"(import "env" "system" (func (param i32))) (memory (export"#);
        assert_eq!(kind(foreign_import.as_bytes()), Some("instantiate"));
    }

    #[test]
    fn a_module_file_that_cannot_be_read_keeps_the_io_error_as_its_source() {
        use std::error::Error as _;
        let missing = std::path::Path::new("/nonexistent/policy.wasm");
        let Err(refused) = engine().compile_file(missing) else { panic!("a missing file compiled") };
        assert!(matches!(&refused, PolicyError::Read { path, .. } if path == missing), "{refused}");
        let source = refused.source().and_then(|s| s.downcast_ref::<Arc<std::io::Error>>());
        assert_eq!(source.map(|e| e.kind()), Some(std::io::ErrorKind::NotFound), "{refused}");
        assert_eq!(refused, refused.clone(), "read failures compare equal to their clones");
    }

    #[test]
    fn logs_are_kept_within_limits() {
        let wat = policy(
            &format!(
                "(local $i i32)
                 (loop $more
                    (call $log (i32.const 2) (i32.const 1300) (i32.const 5))
                    (local.set $i (i32.add (local.get $i) (i32.const 1)))
                    (br_if $more (i32.lt_u (local.get $i) (i32.const 1000))))
                 {EMPTY_DECISION}"
            ),
            r#"(data (i32.const 1300) "hello")"#,
        )
        .replace("(memory (export", r#"(import "modelless" "log" (func $log (param i32 i32 i32))) (memory (export"#);
        let engine = engine();
        let mut instance = engine.compile("test", wat.as_bytes()).unwrap().instantiate(None).unwrap();
        instance.decide(&Snapshot::default()).unwrap();
        let logs = instance.take_logs();
        assert_eq!(logs.len(), MAX_LOG_LINES);
        assert_eq!(logs[0], PolicyLog { level: 2, message: "hello".into() });
    }
}
