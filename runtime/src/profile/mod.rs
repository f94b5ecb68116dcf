//! Profiling a variant on the machine it runs on: the first run and warm latency of
//! each batch size, the line `L(b) = a·b + c` through the warm ones, the memory each
//! batch needs (never running one predicted to exceed a budget), first runs in fresh
//! sessions with a predictor of the warm-up outlier, and a store that reuses profiles
//! while the model file, device and settings are unchanged. Image variants also keep
//! what they answer a second with whole photos per size class (decoding included),
//! and a profiled line says what a replica serves of a task within its latency target.

pub use modelless_policy_abi::{
    BatchPoint, CAPACITY_HEADROOM, CAPACITY_UTILISATION, FirstRunSample, LatencyFit, MIN_FIT_R2, Profile, ProfileKey,
    Throughput, arriving_per_s, capacity_within_slo, demand_ratio, instances_within,
};

mod first_run;
mod fit;
mod images;
mod load;
mod measure;
mod memory;
mod onnx;
mod store;
mod sweep;
#[cfg(feature = "warmup-predictor")]
mod warmup_predictor;

pub use first_run::{involuntary_context_switches, sample_first_runs};
pub use fit::{Line, fit_latency_line, fit_line, fit_weighted_line};
pub use images::{ImageCapacity, ImageProfile};
pub use load::{SteadyLoad, closed_loop, steady_load};
pub use measure::{ProfileEvent, ProfileOptions, profile_model};
pub use memory::{GpuMemory, MemoryProbe, ProcessMemory, memory_probe};
pub use onnx::{ort_profile_key, store_beside};
pub use store::{ProfileStore, file_sha256, profile_key};
pub use sweep::{Sweep, SweepConfig, SweepEvent, sweep};
#[cfg(feature = "warmup-predictor")]
pub use warmup_predictor::{Example, HeldOut, PredictorError, WarmupFeatures, WarmupPredictor, held_out_error, mape};
