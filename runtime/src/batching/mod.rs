//! Dynamic batching: the queue [`State`] (pure, unit-tested) and the threads around
//! it. Callers and instance threads share one model's state behind a mutex, so a
//! batch reaches an idle instance without a hop through a scheduler thread.

#[cfg(test)]
mod admission_tests;
mod assemble;
mod config;
pub(crate) mod deadline;
pub(crate) mod margin;
pub(crate) mod needless;
pub(crate) mod pending;
pub(crate) mod queue;
pub(crate) mod state;
pub(crate) mod worker;

pub use config::{BatchingConfig, BatchingKnobs, MAX_QUEUE_DELAY_US};
pub use deadline::{ArrivalRate, Backlog, BatchCost, SHARING_SLOWDOWN, predicted_answer};
pub use margin::AdmissionMargin;
pub use needless::RefusalLedger;
pub use state::State;
