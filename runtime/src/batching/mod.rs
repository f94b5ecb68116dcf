//! Dynamic batching: the queue [`State`] (pure, unit-tested) and the threads around
//! it. One batcher thread per model owns the state; it hands batches to idle
//! instance threads, each owning one backend.

pub(crate) mod batcher;
mod config;
pub mod state;
pub(crate) mod worker;

pub use config::BatchingConfig;
pub use state::State;
