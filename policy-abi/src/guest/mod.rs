//! The guest kit: write a policy in Rust as a type made from typed parameters, with
//! a fallible `decide` and typed state, and [`export_policy!`](crate::export_policy)
//! gives it the ABI's exports.
//!
//! ```ignore
//! use modelless_policy_abi::guest::{Error, NoState, Policy};
//! use modelless_policy_abi::{Decision, Snapshot, TaskDecision};
//!
//! /// The `[policy.parameters]` table.
//! #[derive(Default, serde::Deserialize, schemars::JsonSchema)]
//! #[serde(default, deny_unknown_fields)]
//! struct Parameters {
//!     /// The variant every task is pinned to.
//!     variant: String,
//! }
//!
//! struct Pin(Parameters);
//!
//! impl Policy for Pin {
//!     type Parameters = Parameters;
//!     type State = NoState;
//!
//!     fn new(parameters: Parameters) -> Result<Self, Error> {
//!         Ok(Pin(parameters))
//!     }
//!
//!     fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
//!         let pin = |t: &modelless_policy_abi::TaskSnapshot| TaskDecision::switch(&t.name, &self.0.variant);
//!         log::debug!("pinning {} tasks", snapshot.tasks.len());
//!         Ok(Decision { tasks: snapshot.tasks.iter().map(pin).collect() })
//!     }
//! }
//!
//! modelless_policy_abi::export_policy!(Pin);
//! ```
//!
//! The same type runs natively (call `decide` in tests) and as a module built for
//! `wasm32-unknown-unknown`. In the module, the `log` crate's macros go to the host's
//! `modelless.log` (the policy's status, the runtime's log, `policy check`); an `Err`
//! from any method reaches the host as `{"error": …}`, which it logs and counts.

mod error;
mod export;
mod hosted;
mod logging;
#[cfg(target_arch = "wasm32")]
pub mod raw;

pub use error::Error;
pub use hosted::{Hosted, configured};
pub use logging::install_host_logger;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::decision::Decision;
use crate::snapshot::Snapshot;

/// A scheduling policy.
pub trait Policy: Sized {
    /// The policy's parameters: the config's `[policy.parameters]`, decoded by serde
    /// (a field unknown or of the wrong type fails with serde's message), or their
    /// `Default` where the config has none. Their JSON Schema is the module's
    /// `parameters_schema` export. [`NoParameters`] for a policy that takes none.
    type Parameters: DeserializeOwned + schemars::JsonSchema + Default;

    /// What the policy carries over to the module that replaces it. [`NoState`] for
    /// a policy that keeps none.
    type State: Serialize + DeserializeOwned;

    /// The policy, configured with `parameters`; an error (parameters that make no
    /// sense together) refuses the module.
    fn new(parameters: Self::Parameters) -> Result<Self, Error>;

    /// The decision for this tick; an error leaves every task as it is, and the host
    /// reports and counts it.
    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error>;

    /// Its state: what the host saves when the module is replaced and hands the module
    /// that replaces it, which finds it here before its first tick. `None` (the
    /// default) keeps none.
    fn state(&mut self) -> Option<&mut Self::State> {
        None
    }
}

/// The parameters of a policy that takes none: an empty table, anything else refused.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParameters {}

/// The state of a policy that keeps none: saves nothing and takes whatever a module
/// it replaces saved, ignoring it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NoState;

impl Serialize for NoState {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_unit()
    }
}

impl<'de> serde::Deserialize<'de> for NoState {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(deserializer).map(|_| NoState)
    }
}

#[cfg(test)]
mod tests;
