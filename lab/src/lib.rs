//! The modelless lab: the tools that measure, search and predict around the runtime,
//! and the `modelless` command line that drives them.
//!
//! An application that serves models links `modelless` alone; this crate is for
//! people who size, tune and study a deployment:
//! - [`load`]: the load generator (open and closed loops, traces, images), in
//!   process or over gRPC, with summaries and plots;
//! - [`simulate`]: a discrete-event simulator of a task under a policy, on the
//!   profiles the runtime measured;
//! - [`fleet`]: a simulated fleet of replicas that Kubernetes scales, to compare
//!   scalers on long traces;
//! - [`plan`]: the fewest instances that finish a batch of work by a deadline, and
//!   the most work that fixed instances finish;
//! - [`tune`]: the search for a task's serving settings (Bayesian optimisation
//!   against random search), each setting measured in a process of its own, with
//!   the tables of its results and the writing of the best into a config;
//! - [`variants`]: variants made from a task's own (a half-precision copy), checked
//!   against their original on photos and written into the config.
//!
//! Beside them, [`plot`] draws every chart as SVG and [`stats`] holds the statistics
//! the tables report. The crate depends on `rand`, `clap`, `indicatif` and the
//! Gaussian-process crate, none of which an application that serves needs.

pub mod fleet;
pub mod load;
pub mod pages;
pub mod plan;
pub mod plot;
pub mod simulate;
pub mod stats;
pub mod tune;
pub mod variants;

// The fuzz targets assert on the largest allocation a parser makes.
#[cfg(test)]
#[global_allocator]
static ALLOCATOR: modelless_runtime::fuzzing::PeakAllocator = modelless_runtime::fuzzing::PeakAllocator;
