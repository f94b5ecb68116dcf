//! Scheduling policies: WebAssembly modules that read a metrics snapshot and decide
//! which variant serves each task and with what batching knobs. This module holds the
//! sandbox they run in ([`PolicyEngine`]); a policy that fails never stops serving.

mod error;
mod host;

pub use error::PolicyError;
pub use host::{HostConfig, PolicyEngine, PolicyInstance, PolicyLog, PolicyModule};
