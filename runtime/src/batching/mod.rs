//! Dynamic batching: the queue [`State`] (pure, unit-tested) and the threads around
//! it. Callers and instance threads share one model's state behind a mutex, so a
//! batch reaches an idle instance without a hop through a scheduler thread.

#[cfg(test)]
mod admission_tests;
mod assemble;
mod config;
pub mod deadline;
pub mod margin;
pub(crate) mod pending;
pub(crate) mod queue;
pub mod state;
pub(crate) mod worker;

pub use config::{BatchingConfig, BatchingKnobs, MAX_QUEUE_DELAY_US};
pub use deadline::BatchCost;
pub use state::State;
