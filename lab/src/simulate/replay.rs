//! Recorded decisions carried out on a simulated server: the check that the simulator
//! does with a decision what the runtime did.

use modelless::engine::core::Action;
use modelless::policy::RecordedTick;

use super::model::SimModel;
use super::server::Server;

/// The actions a simulated server of `model` takes on each recorded tick's decision,
/// on its own snapshot at the tick's time, as its control loop would; to hold against
/// the actions the runtime recorded on its snapshots.
pub fn actions_on_recorded(model: &SimModel, ticks: &[RecordedTick]) -> Vec<Vec<Action>> {
    let mut server = Server::new(model);
    ticks
        .iter()
        .enumerate()
        .map(|(tick, recorded)| {
            let now = recorded.snapshot.now_ms * 1000;
            server.finish_loads(now);
            let snapshot = server.snapshot(model, tick as u64, now);
            server.act(model, &snapshot, &recorded.decision, now, false).into_iter().map(|(action, _)| action).collect()
        })
        .collect()
}
