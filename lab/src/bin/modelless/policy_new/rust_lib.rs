//! {NAME}: a modelless policy in Rust. `decide` gets the snapshot and answers a
//! decision; tasks it leaves out keep everything. Build with ./build.sh, check with
//! `modelless policy check {NAME}.wasm`.

use modelless_policy_abi::guest::{Error, NoState, Policy};
use modelless_policy_abi::{Decision, Snapshot};

/// The `[policy.parameters]` table: each field with a default, unknown ones refused.
#[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Parameters {
    /// Log each task's demand every this many ticks.
    pub log_every: u64,
}

impl Default for Parameters {
    fn default() -> Self {
        Parameters { log_every: 1 }
    }
}

pub struct Starter {
    parameters: Parameters,
}

impl Policy for Starter {
    type Parameters = Parameters;
    type State = NoState;

    fn new(parameters: Parameters) -> Result<Self, Error> {
        if parameters.log_every == 0 {
            return Err("log_every must be at least 1".into());
        }
        Ok(Starter { parameters })
    }

    fn decide(&mut self, snapshot: &Snapshot) -> Result<Decision, Error> {
        if snapshot.tick % self.parameters.log_every == 0 {
            for task in &snapshot.tasks {
                log::info!("{}: {:.1}/s on {}", task.name, task.demand.per_s_10s, task.active.variant);
            }
        }
        Ok(Decision::default())
    }
}

modelless_policy_abi::export_policy!(Starter);
