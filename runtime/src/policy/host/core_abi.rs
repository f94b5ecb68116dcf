//! Core modules of ABI v1: the marker and exports checked at compile time, buffers
//! handed over through the guest's `alloc` and `dealloc`, outputs packed as
//! `(ptr << 32) | len`. A module that exports `_initialize` (a WASI reactor, as Go's
//! `-buildmode=c-shared` makes) has it called once, when instantiated.

use modelless_policy_abi::unpack;
use modelless_policy_abi::{ABI_VERSION, MARKER_EXPORT};
use wasmtime::{Caller, Engine, ExternType, InstancePre, Linker, Memory, Module, Store, TypedFunc};

use super::{HostState, PolicyLog, cause, no_wasi, push_log};
use crate::error::PolicyError;

/// A checked core module, ready to instantiate.
#[derive(Clone)]
pub(super) struct CoreModule {
    pre: InstancePre<HostState>,
    pub(super) has_init: bool,
    pub(super) has_state: bool,
}

impl CoreModule {
    /// Checks `module`'s marker and exports and links its imports.
    pub(super) fn new(engine: &Engine, module: &Module) -> Result<CoreModule, PolicyError> {
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
        let mut linker = Linker::new(engine);
        linker
            .func_wrap("modelless", "log", log)
            .map_err(|e| PolicyError::Instantiate(cause(e.context("cannot define `modelless.log`"))))?;
        no_wasi::link(&mut linker, module).map_err(|e| PolicyError::Instantiate(cause(e)))?;
        let pre = linker.instantiate_pre(module).map_err(|e| PolicyError::Instantiate(cause(e)))?;
        Ok(CoreModule { pre, has_init: is_func("init"), has_state: is_func("save_state") && is_func("load_state") })
    }

    /// A fresh instance in `store`, its reactor initialised.
    pub(super) fn instantiate(
        &self,
        store: &mut Store<HostState>,
    ) -> wasmtime::Result<Result<CoreInstance, PolicyError>> {
        let instance = self.pre.instantiate(&mut *store)?;
        if let Ok(initialize) = instance.get_typed_func::<(), ()>(&mut *store, "_initialize") {
            initialize.call(&mut *store, ())?;
        }
        Ok(self.typed(&instance, store))
    }

    /// The instance's exports, typed as the ABI has them.
    fn typed(&self, instance: &wasmtime::Instance, store: &mut Store<HostState>) -> Result<CoreInstance, PolicyError> {
        let wrong = |name: &str| PolicyError::MissingExport { name: name.into(), expected: "of the ABI's type" };
        let memory = instance.get_memory(&mut *store, "memory").ok_or_else(|| wrong("memory"))?;
        let alloc = instance.get_typed_func(&mut *store, "alloc").map_err(|_| wrong("alloc"))?;
        let dealloc = instance.get_typed_func(&mut *store, "dealloc").map_err(|_| wrong("dealloc"))?;
        let decide = instance.get_typed_func(&mut *store, "decide").map_err(|_| wrong("decide"))?;
        let mut init = None;
        let (mut save_state, mut load_state) = (None, None);
        let parameters_schema = instance.get_typed_func(&mut *store, "parameters_schema").ok();
        if self.has_init {
            init = Some(instance.get_typed_func(&mut *store, "init").map_err(|_| wrong("init"))?);
        }
        if self.has_state {
            save_state = Some(instance.get_typed_func(&mut *store, "save_state").map_err(|_| wrong("save_state"))?);
            load_state = Some(instance.get_typed_func(&mut *store, "load_state").map_err(|_| wrong("load_state"))?);
        }
        Ok(CoreInstance { memory, alloc, dealloc, decide, init, save_state, load_state, parameters_schema })
    }
}

/// The `modelless.log(level, ptr, len)` import.
fn log(mut caller: Caller<'_, HostState>, level: i32, ptr: i32, len: i32) {
    let Some(wasmtime::Extern::Memory(memory)) = caller.get_export("memory") else { return };
    let mut bytes = vec![0u8; (len.max(0) as usize).min(super::MAX_LOG_BYTES)];
    if memory.read(&caller, ptr.max(0) as usize, &mut bytes).is_err() {
        return;
    }
    let message = String::from_utf8_lossy(&bytes).into_owned();
    push_log(caller.data_mut(), PolicyLog { level, message });
}

/// A live instance of a core module: its typed exports.
pub(super) struct CoreInstance {
    memory: Memory,
    alloc: TypedFunc<i32, i32>,
    dealloc: TypedFunc<(i32, i32), ()>,
    decide: TypedFunc<(i32, i32), i64>,
    init: Option<TypedFunc<(i32, i32), i64>>,
    save_state: Option<TypedFunc<(), i64>>,
    load_state: Option<TypedFunc<(i32, i32), i64>>,
    parameters_schema: Option<TypedFunc<(), i64>>,
}

/// Which export taking a JSON input to call.
#[derive(Clone, Copy)]
pub(super) enum WithInput {
    Init,
    Decide,
    LoadState,
}

impl CoreInstance {
    /// Copies `input` into a buffer of the guest's, calls the export on it, and returns
    /// the output it points to; both buffers are freed after.
    pub(super) fn call_with_input(
        &self,
        store: &mut Store<HostState>,
        export: WithInput,
        input: &[u8],
        limit: usize,
    ) -> wasmtime::Result<Result<Vec<u8>, PolicyError>> {
        let func = match export {
            WithInput::Init => self.init.clone(),
            WithInput::Decide => Some(self.decide.clone()),
            WithInput::LoadState => self.load_state.clone(),
        };
        let Some(func) = func else { return Ok(Ok(b"{}".to_vec())) };
        let Ok(len) = i32::try_from(input.len()) else {
            return Ok(Err(PolicyError::InvalidOutput(format!("input of {} bytes is too large", input.len()))));
        };
        let ptr = self.alloc.call(&mut *store, len)?;
        if self.memory.write(&mut *store, ptr as u32 as usize, input).is_err() {
            return Ok(Err(PolicyError::InvalidOutput(format!("alloc gave {ptr}, outside its memory"))));
        }
        let packed = func.call(&mut *store, (ptr, len))?;
        let out = self.take_output(store, packed, limit)?;
        self.dealloc.call(&mut *store, (ptr, len))?;
        Ok(out)
    }

    /// `save_state`'s output, `None` when it exports none.
    pub(super) fn save_state(
        &self,
        store: &mut Store<HostState>,
        limit: usize,
    ) -> wasmtime::Result<Option<Result<Vec<u8>, PolicyError>>> {
        self.call_without_input(store, self.save_state.clone(), limit)
    }

    /// `parameters_schema`'s output (the JSON Schema of its parameters, an export the
    /// Rust kit adds), `None` when it exports none.
    pub(super) fn parameters_schema(
        &self,
        store: &mut Store<HostState>,
        limit: usize,
    ) -> wasmtime::Result<Option<Result<Vec<u8>, PolicyError>>> {
        self.call_without_input(store, self.parameters_schema.clone(), limit)
    }

    fn call_without_input(
        &self,
        store: &mut Store<HostState>,
        func: Option<TypedFunc<(), i64>>,
        limit: usize,
    ) -> wasmtime::Result<Option<Result<Vec<u8>, PolicyError>>> {
        let Some(func) = func else { return Ok(None) };
        let packed = func.call(&mut *store, ())?;
        self.take_output(store, packed, limit).map(Some)
    }

    /// Reads the output `packed` points to, within `limit`, and frees it.
    fn take_output(
        &self,
        store: &mut Store<HostState>,
        packed: i64,
        limit: usize,
    ) -> wasmtime::Result<Result<Vec<u8>, PolicyError>> {
        let (ptr, len) = unpack(packed);
        if len as usize > limit {
            return Ok(Err(PolicyError::OversizedOutput { len: u64::from(len), limit }));
        }
        let mut out = vec![0u8; len as usize];
        if self.memory.read(&*store, ptr as usize, &mut out).is_err() {
            return Ok(Err(PolicyError::InvalidOutput(format!("output at {ptr}, {len} bytes, is outside its memory"))));
        }
        self.dealloc.call(&mut *store, (ptr as i32, len as i32))?;
        Ok(Ok(out))
    }
}
