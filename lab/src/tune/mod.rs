//! Serving-configuration search (`modelless tune`): the knobs that decide what serving
//! a variant costs on this machine (batching, instances, ONNX Runtime's threads, the
//! preprocessing pool), searched for the lowest cost an objective measures, by
//! Bayesian optimisation or, as its baseline, at random with the same budget.
//!
//! The pieces, in the order a run uses them:
//! - the space ([`KnobSpace`]) and a variant as tuning sees it ([`TunedVariant`]);
//! - what a setting is judged by ([`Objective`]);
//! - the search loop ([`search`]), run or reused from the store ([`TuneStore`]) by
//!   [`run_searches`];
//! - measuring one setting in a process of its own ([`measure`]), and the model
//!   alone as the reference ([`mod@reference`]);
//! - remeasuring the best of each search against the default ([`candidates`]) and
//!   the tables of the results ([`report`]);
//! - replaying searches against a surrogate of stored measurements ([`replay`],
//!   [`replay_report`]);
//! - writing the best setting into the config ([`write_setting`]).
//!
//! The command line only turns its flags into these calls, draws the progress and
//! writes the files.

mod bayes;
pub mod candidates;
mod cuda;
mod error;
mod evaluation;
pub mod measure;
mod objective;
pub mod plot;
pub mod reference;
pub mod replay;
pub mod replay_report;
pub mod report;
mod search;
mod searches;
mod space;
mod store;
mod stored_filter;
mod variant;
mod write;

pub use cuda::CudaSetting;
pub use error::TuneError;
pub use evaluation::Evaluation;
pub use objective::{Goal, Objective};
pub use search::{Recommendation, SearchOptions, SearchTrace, Strategy, search};
pub use searches::{SearchEvent, SearchPlan, run_searches};
pub use space::{
    KnobRange, KnobSpace, MAX_INSTANCES, MAX_QUEUE_DELAY_US, MAX_SEARCHED_BATCH, PreferredSizes, ServingSetting,
    SpaceLimits,
};
pub use store::TuneStore;
pub use variant::{TunedVariant, variants};
pub use write::write_setting;
