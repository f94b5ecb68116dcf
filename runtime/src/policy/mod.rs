//! Scheduling policies: WebAssembly modules that read a metrics snapshot and decide
//! which variant serves each task and with what batching knobs. This module holds the
//! sandbox they run in ([`PolicyEngine`]), the guard that keeps a failing one from
//! mattering ([`GuardedPolicy`]): a policy that fails never stops serving, and the
//! loop that asks it every tick and applies what it decides ([`ControlLoop`]), through
//! the pure control core ([`core::tick`]) that the simulator calls too.

mod apply;
mod control;
pub mod core;
mod guard;
mod host;
mod record;
mod snapshot;
#[cfg(test)]
mod test_modules;

pub use crate::error::PolicyError;
pub use control::{ControlConfig, ControlLoop, ControlStatus, EarlyTick, ListTasks};
pub use guard::{DEFAULT_MAX_FAILURES, Decided, DecidedBy, GuardedPolicy, KeepConfigured, Reloaded};
pub use host::{HostConfig, PolicyEngine, PolicyInstance, PolicyLog, PolicyModule};
pub use record::{RecordedTick, Recorder, Replayed, read_ticks, replay};
pub use snapshot::{TaskReading, task_snapshot};
