//! Components of the `modelless:policy` world (`policy-abi/wit/policy.wit`): the same
//! JSON documents as the core ABI, carried as strings by the component model, for
//! languages whose toolchains make components (Python, JavaScript). A component that
//! imports anything but the world's `host` interface cannot be instantiated: no WASI.

use wasmtime::Engine;
use wasmtime::component::{Component, HasSelf, Linker};

use super::{HostState, PolicyLog, cause, push_log};
use crate::error::PolicyError;

mod bindings {
    wasmtime::component::bindgen!({ path: "../policy-abi/wit", world: "policy" });
}

use bindings::modelless::policy::host::{Host, Level};
use bindings::{Policy, PolicyPre};

/// The world a component must target, as errors name it.
pub(super) const WORLD: &str = "modelless:policy/policy@1.0.0";

impl Host for HostState {
    fn log(&mut self, level: Level, message: String) {
        let level = match level {
            Level::Error => 0,
            Level::Warn => 1,
            Level::Info => 2,
            Level::Debug => 3,
            Level::Trace => 4,
        };
        let mut message = message;
        message.truncate(message.floor_char_boundary(super::MAX_LOG_BYTES));
        push_log(self, PolicyLog { level, message });
    }
}

/// A component checked against the world, ready to instantiate.
#[derive(Clone)]
pub(super) struct ComponentModule {
    pre: PolicyPre<HostState>,
}

impl ComponentModule {
    /// Links `component` against the world: its imports must be the world's, its
    /// exports the world's functions of the world's types.
    pub(super) fn new(engine: &Engine, component: &Component) -> Result<ComponentModule, PolicyError> {
        let mut linker = Linker::new(engine);
        Policy::add_to_linker::<_, HasSelf<HostState>>(&mut linker, |state| state)
            .map_err(|e| PolicyError::Instantiate(cause(e.context("cannot define the world's imports"))))?;
        let instance_pre = linker.instantiate_pre(component).map_err(|e| {
            PolicyError::Instantiate(cause(e.context(format!("a component must import only {WORLD}'s host"))))
        })?;
        let pre =
            PolicyPre::new(instance_pre).map_err(|e| PolicyError::WrongWorld { world: WORLD, source: cause(e) })?;
        Ok(ComponentModule { pre })
    }

    /// A fresh instance in `store`.
    pub(super) fn instantiate(
        &self,
        store: &mut wasmtime::Store<HostState>,
    ) -> wasmtime::Result<Result<ComponentInstance, PolicyError>> {
        Ok(Ok(ComponentInstance { policy: self.pre.instantiate(store)? }))
    }
}

/// A live instance of a policy component.
pub(super) struct ComponentInstance {
    policy: Policy,
}

/// Bytes the host encoded as JSON, as the string the world carries.
fn text(json: &[u8]) -> Result<&str, PolicyError> {
    std::str::from_utf8(json)
        .map_err(|e| PolicyError::Encode { what: "JSON as UTF-8", source: crate::error::Cause::new(e) })
}

/// A string the component answered, within `limit`.
fn within(out: String, limit: usize) -> Result<Vec<u8>, PolicyError> {
    if out.len() > limit {
        return Err(PolicyError::OversizedOutput { len: out.len() as u64, limit });
    }
    Ok(out.into_bytes())
}

impl ComponentInstance {
    /// `init(parameters)`: `{}` when it took them, as the core ABI answers.
    pub(super) fn init(
        &self,
        store: &mut wasmtime::Store<HostState>,
        parameters: &[u8],
    ) -> wasmtime::Result<Result<Vec<u8>, PolicyError>> {
        let parameters = match text(parameters) {
            Ok(parameters) => parameters,
            Err(e) => return Ok(Err(e)),
        };
        Ok(self.policy.call_init(store, parameters)?.map(|()| b"{}".to_vec()).map_err(PolicyError::Reported))
    }

    /// `decide(snapshot)`: the decision's JSON.
    pub(super) fn decide(
        &self,
        store: &mut wasmtime::Store<HostState>,
        snapshot: &[u8],
        limit: usize,
    ) -> wasmtime::Result<Result<Vec<u8>, PolicyError>> {
        let snapshot = match text(snapshot) {
            Ok(snapshot) => snapshot,
            Err(e) => return Ok(Err(e)),
        };
        Ok(self.policy.call_decide(store, snapshot)?.map_err(PolicyError::Reported).and_then(|out| within(out, limit)))
    }

    /// `save-state()`: the state's JSON, `null` for none.
    pub(super) fn save_state(
        &self,
        store: &mut wasmtime::Store<HostState>,
        limit: usize,
    ) -> wasmtime::Result<Result<Vec<u8>, PolicyError>> {
        let state = self.policy.call_save_state(store)?;
        Ok(within(state.unwrap_or_else(|| "null".into()), limit))
    }

    /// `load-state(state)`: `{}` when it took it.
    pub(super) fn load_state(
        &self,
        store: &mut wasmtime::Store<HostState>,
        state: &[u8],
    ) -> wasmtime::Result<Result<Vec<u8>, PolicyError>> {
        let state = match text(state) {
            Ok(state) => state,
            Err(e) => return Ok(Err(e)),
        };
        Ok(self.policy.call_load_state(store, state)?.map(|()| b"{}".to_vec()).map_err(PolicyError::Reported))
    }
}
