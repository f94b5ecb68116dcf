//! Profiling a variant on the machine it runs on: the first run and warm latency of
//! each batch size, the line `L(b) = a·b + c` through the warm ones, the memory each
//! batch needs (never running one predicted to exceed a budget), and a store that
//! reuses profiles while the model file, device and settings are unchanged.

pub use modelless_policy_abi::{BatchPoint, LatencyFit, Profile, ProfileKey, Throughput};

mod fit;
mod load;
mod measure;
mod memory;
mod store;
mod sweep;

pub use fit::{Line, fit_line, percentile};
pub use load::{SteadyLoad, closed_loop, steady_load};
pub use measure::{ProfileEvent, ProfileOptions, profile_model};
pub use memory::{MemoryProbe, ProcessMemory};
pub use store::{ProfileStore, file_sha256, profile_key};
pub use sweep::{Sweep, SweepConfig, SweepEvent, sweep};
