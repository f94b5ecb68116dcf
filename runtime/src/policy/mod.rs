//! Scheduling policies: WebAssembly modules that read a metrics snapshot and decide
//! which variant serves each task and with what batching knobs. This module holds the
//! sandbox they run in ([`PolicyEngine`]), the guard that keeps a failing one from
//! mattering ([`GuardedPolicy`]): a policy that fails never stops serving, the
//! controller that runs one tick of it ([`Controller`]: the policy decides, the pure
//! control core ([`core::tick`]) makes actions of its decision, the tick is recorded)
//! in the runtime and in the simulator alike, and the loop that ticks it and applies
//! the actions ([`ControlLoop`]).
//!
//! The sandbox and everything that runs a module need feature `policies`; the control
//! core and the snapshot of a task are always here.

#[cfg(feature = "policies")]
mod apply;
mod budget;
#[cfg(feature = "policies")]
mod control;
#[cfg(feature = "policies")]
mod control_status;
#[cfg(feature = "policies")]
mod controller;
pub mod core;
#[cfg(feature = "policies")]
mod guard;
#[cfg(feature = "policies")]
mod host;
mod ledger;
#[cfg(feature = "policies")]
mod reading;
#[cfg(feature = "policies")]
mod record;
mod snapshot;
/// Policy modules in text format, for tests (of the runtime, and with `test-util` of
/// code built on it).
#[cfg(any(test, feature = "test-util"))]
#[cfg(feature = "policies")]
pub mod test_modules;
mod watch;

pub use crate::error::PolicyError;
pub use budget::{ResourceTotals, ResourcesConfig, budget};
#[cfg(feature = "policies")]
pub use control::{ControlConfig, ControlLoop, EarlyTick, ListTasks, Reloader};
#[cfg(feature = "policies")]
pub use control_status::ControlStatus;
#[cfg(feature = "policies")]
pub use controller::{Controller, Ticked};
#[cfg(feature = "policies")]
pub use guard::{DEFAULT_MAX_FAILURES, Decided, DecidedBy, GuardedPolicy, KeepConfigured, Reloaded, RollbackPoint};
#[cfg(feature = "policies")]
pub use host::{
    COMPONENT_MEMORY_LIMIT_BYTES, CORE_MEMORY_LIMIT_BYTES, HostConfig, Loaded, ModuleKind, PolicyEngine,
    PolicyInstance, PolicyLog, PolicyModule, default_compiled_cache,
};
#[cfg(feature = "policies")]
pub use record::{RecordedTick, Recorder, Replayed, read_ticks, replay};
pub use snapshot::{TaskReading, task_snapshot};
pub use watch::{History, Judgement, Served, TickServed, Verdict, WatchConfig, WatchOutcome, WatchStatus, judge};
