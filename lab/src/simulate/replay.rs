//! A recorded run steered again on a simulated server: the check that the simulator
//! does what the runtime did.

use std::time::Duration;

use modelless_runtime::policy::RecordedTick;
use modelless_runtime::policy::core::Action;

use super::engine::Decider;
use super::model::SimModel;
use super::server::Server;

/// The actions a simulated server of `model` takes at each recorded tick's time, on
/// its own snapshot, steered by `decider` (the policy the run was recorded with, in
/// a [`super::WasmDecider`]) as its control loop would; to hold against the actions
/// the runtime recorded on its snapshots.
pub fn actions_on_recorded(model: &SimModel, ticks: &[RecordedTick], decider: &mut dyn Decider) -> Vec<Vec<Action>> {
    let mut server = Server::new(model);
    ticks
        .iter()
        .enumerate()
        .map(|(tick, recorded)| {
            let now = recorded.snapshot.now_ms * 1000;
            server.finish_loads(now);
            let snapshot = server.snapshot(model, tick as u64, now);
            let actions = decider.tick(Duration::from_micros(now), snapshot, &[]);
            server.steer(model, &actions, now, decider.free_switches());
            actions
        })
        .collect()
}
