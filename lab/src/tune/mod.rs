//! Serving-configuration search (`modelless tune`): the knobs that decide what serving
//! a variant costs on this machine (batching, instances, ONNX Runtime's threads, the
//! preprocessing pool), searched for the lowest cost an objective measures, by
//! Bayesian optimisation or, as its baseline, at random with the same budget.
//!
//! The library holds the space ([`KnobSpace`]), the search loop ([`search`]) and the
//! store ([`TuneStore`]), and a surrogate of stored measurements to replay searches
//! against ([`replay`]); the command line measures each point through the real
//! runtime.

mod bayes;
pub mod plot;
pub mod replay;
mod search;
mod space;
mod store;

pub use search::{Evaluation, SearchOptions, SearchTrace, Strategy, search};
pub use space::{
    KnobRange, KnobSpace, MAX_INSTANCES, MAX_QUEUE_DELAY_US, MAX_SEARCHED_BATCH, PreferredSizes, ServingSetting,
    SpaceLimits,
};
pub use store::TuneStore;
