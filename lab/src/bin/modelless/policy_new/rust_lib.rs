//! {NAME}: a modelless policy in Rust. `decide` gets the snapshot and answers a
//! decision; tasks it leaves out keep everything. Build with ./build.sh, check with
//! `modelless policy check {NAME}.wasm`.

use modelless_policy_abi::guest::{Level, Policy, log};
use modelless_policy_abi::{Decision, Snapshot};

#[derive(Default)]
pub struct Starter;

impl Policy for Starter {
    fn decide(&mut self, snapshot: &Snapshot) -> Decision {
        for task in &snapshot.tasks {
            log(Level::Info, &format!("{}: {:.1}/s on {}", task.name, task.demand.per_s_10s, task.active.variant));
        }
        Decision::default()
    }
}

modelless_policy_abi::export_policy!(Starter);
