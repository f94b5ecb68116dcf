//! The batcher thread of one model: owns the queue [`State`], admits what callers
//! send, and gives a batch to each instance that is free. When every sender is gone
//! it drains what is queued, then lets the instances go.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, select};

use super::BatchingConfig;
use super::state::{DeadReason, Next, State};
use super::worker::Pending;
use crate::error::Error;

/// What callers send to a batcher.
pub(crate) enum Command {
    /// Queue a request.
    Infer(Pending),
    /// Use new knobs from the next batch on.
    Configure(BatchingConfig),
}

/// Runs the batcher until its callers hang up and its queue has drained.
pub(crate) fn batcher_task(
    model: Arc<str>,
    config: BatchingConfig,
    commands: Receiver<Command>,
    free: Receiver<usize>,
    instances: Vec<Sender<Vec<Pending>>>,
) {
    let mut state = State::new(config);
    let mut idle: Vec<usize> = (0..instances.len()).rev().collect();
    let mut alive = instances.len();
    let mut commands = Some(commands);
    loop {
        let wait_until = dispatch(&model, &mut state, &mut idle, &mut alive, &instances);
        if commands.is_none() && state.is_empty() && idle.len() == alive {
            break;
        }
        let wake = [wait_until, state.next_deadline()]
            .into_iter()
            .flatten()
            .min();
        let timer = wake.map_or_else(crossbeam_channel::never, crossbeam_channel::at);
        let never = crossbeam_channel::never();
        select! {
            recv(commands.as_ref().unwrap_or(&never)) -> command => match command {
                Ok(command) => {
                    apply(&model, &mut state, command);
                    // Take everything else that arrived so one batch can hold it all.
                    while let Some(Ok(command)) = commands.as_ref().map(Receiver::try_recv) {
                        apply(&model, &mut state, command);
                    }
                }
                Err(_) => commands = None,
            },
            recv(free) -> index => match index {
                Ok(index) => idle.push(index),
                Err(_) => break,
            },
            recv(timer) -> _ => {}
        }
    }
    // Dropping `instances` closes the job channels; the instance threads end.
}

fn apply(model: &str, state: &mut State<Pending>, command: Command) {
    match command {
        Command::Infer(pending) => {
            if let Err(refused) = state.append(pending, Instant::now()) {
                let max_queue_size = state.config().max_queue_size;
                let _ = refused.reply.send(Err(Error::Overloaded {
                    model: model.to_string(),
                    max_queue_size,
                }));
            }
        }
        Command::Configure(config) => state.set_config(config),
    }
}

/// Gives batches to idle instances while there are both; returns when the next batch
/// is due if it is held back by the queue delay.
fn dispatch(
    model: &str,
    state: &mut State<Pending>,
    idle: &mut Vec<usize>,
    alive: &mut usize,
    instances: &[Sender<Vec<Pending>>],
) -> Option<Instant> {
    let now = Instant::now();
    if *alive == 0 {
        // No instance is left to run anything: answer rather than hold requests forever.
        while let (_, Next::Batch(batch)) = state.next_batch(now) {
            batch
                .into_iter()
                .for_each(|p| drop(p.reply.send(Err(Error::ShuttingDown))));
        }
        return None;
    }
    while let Some(&instance) = idle.last() {
        let (dead, next) = state.next_batch(now);
        answer_dead(model, dead);
        match next {
            Next::Batch(batch) => {
                idle.pop();
                if let Err(lost) = instances[instance].send(batch) {
                    // The instance thread is gone; its batch must not vanish silently.
                    *alive -= 1;
                    for pending in lost.0 {
                        let _ = pending.reply.send(Err(Error::ShuttingDown));
                    }
                }
            }
            Next::WaitUntil(at) => return Some(at),
            Next::Idle => return None,
        }
    }
    answer_dead(model, state.expire(now));
    None
}

fn answer_dead(model: &str, dead: Vec<super::state::Dead<Pending>>) {
    for d in dead {
        if d.reason == DeadReason::Expired {
            let _ = d.item.reply.send(Err(Error::DeadlineExceeded {
                model: model.to_string(),
            }));
        }
    }
}
