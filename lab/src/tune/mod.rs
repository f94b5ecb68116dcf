//! Serving-configuration search (`modelless tune`): the knobs that decide what serving
//! a variant costs on this machine (batching, instances, ONNX Runtime's threads, the
//! preprocessing pool), searched for the lowest cost an objective measures, by
//! Bayesian optimisation or, as its baseline, at random with the same budget.
//!
//! The library holds the space ([`KnobSpace`]), what a setting is judged by
//! ([`Objective`]), the search loop ([`search`]) and the store ([`TuneStore`]),
//! measuring one setting in a process of its own ([`measure`]) with the model alone
//! as the reference ([`mod@reference`]), and a surrogate of stored measurements to
//! replay searches against ([`replay`]).

mod bayes;
mod error;
pub mod measure;
mod objective;
pub mod plot;
pub mod reference;
pub mod replay;
mod search;
mod space;
mod store;

pub use error::TuneError;
pub use objective::{Goal, Objective};
pub use search::{Evaluation, Recommendation, SearchOptions, SearchTrace, Strategy, search};
pub use space::{
    KnobRange, KnobSpace, MAX_INSTANCES, MAX_QUEUE_DELAY_US, MAX_SEARCHED_BATCH, PreferredSizes, ServingSetting,
    SpaceLimits,
};
pub use store::TuneStore;
