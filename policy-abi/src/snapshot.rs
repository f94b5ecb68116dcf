//! What a policy sees every tick: per task its demand, queue, latency and variants,
//! and the machine's load. Time comes only from here, so a policy is deterministic and
//! can be replayed.

use serde::{Deserialize, Serialize};

use crate::profile::{LatencyFit, Throughput};

/// The metrics snapshot handed to `decide`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Snapshot {
    /// Version of the ABI the host speaks.
    pub abi_version: u32,
    /// Ticks since the control loop started, from 0.
    pub tick: u64,
    /// Milliseconds since the control loop started.
    pub now_ms: u64,
    /// Every task served.
    pub tasks: Vec<TaskSnapshot>,
    /// The machine.
    pub system: SystemSnapshot,
}

/// One task: its load, how it is served now, and its variants.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TaskSnapshot {
    /// The task's name.
    pub name: String,
    /// Requests arriving per second.
    pub demand: Demand,
    /// Requests waiting in the active variant's queue.
    pub queue_length: u64,
    /// Requests admitted and not yet answered.
    pub in_flight: u64,
    /// Latency of the requests answered in the last window (ms), when there were any.
    pub latency_ms: Option<LatencySummary>,
    /// Requests answered in the last window.
    pub completed: u64,
    /// Requests of the last window answered after their latency target, or not at all
    /// because their deadline passed.
    pub slo_violations: u64,
    /// Requests of the last window refused at admission (queue full, predicted to
    /// miss their deadline, too large, no variant accurate enough).
    pub rejections: u64,
    /// Requests of the last window that were never run, by reason.
    #[serde(default)]
    pub refusals: Refusals,
    /// The task's latency target (ms), when it has one.
    pub slo_latency_ms: Option<f64>,
    /// How the task is served now.
    pub active: ServingKnobs,
    /// All its variants, in configured order.
    pub variants: Vec<VariantSnapshot>,
    /// What its recent requests carried as photos, once any did: a policy prices
    /// them by its variants' capacities with photos ([`VariantCost::photos`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub photos: Option<PhotoTraffic>,
}

/// The photos a task's recent requests carried, decayed over about the last hundred.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PhotoTraffic {
    /// Of the requests, the share that carried photos rather than tensors, 0 to 1.
    pub share: f64,
    /// The photos' mean size encoded, in bytes.
    pub mean_bytes: f64,
}

/// Requests that were never run, by reason.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Refusals {
    /// Refused at admission: the work queued ahead would have answered them after
    /// their deadline.
    pub would_miss_deadline: u64,
    /// Refused at admission: the queue was full.
    pub queue_full: u64,
    /// Left the queue unrun: their deadline passed, or would have before a batch
    /// started then could answer them. Counted among the SLO violations too.
    pub expired: u64,
}

/// Arrival rates over three windows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Demand {
    /// Requests per second over the last second.
    pub per_s_1s: f64,
    /// Requests per second over the last 10 seconds.
    pub per_s_10s: f64,
    /// Requests per second over the last 60 seconds.
    pub per_s_60s: f64,
}

/// Latency percentiles, in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct LatencySummary {
    /// Median.
    pub p50: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
}

/// The variant serving a task and its knobs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ServingKnobs {
    /// The active variant.
    pub variant: String,
    /// Largest batch it forms.
    pub max_batch_size: u32,
    /// Longest a request waits for a batch to fill, in µs.
    pub max_queue_delay_us: u64,
    /// Sessions serving it.
    pub instances: u32,
}

/// Where a variant stands.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "lowercase")]
pub enum VariantState {
    /// Not in memory.
    #[default]
    Unloaded,
    /// Its sessions are being created.
    Loading,
    /// Its sessions run warm-up batches.
    Warming,
    /// It may serve.
    Ready,
    /// It was replaced and answers what it had queued.
    Draining,
    /// It could not be loaded.
    Failed,
}

/// One variant of a task.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VariantSnapshot {
    /// Its name.
    pub name: String,
    /// Its accuracy, in the unit the task's variants share.
    pub accuracy: f64,
    /// Where its serving version stands.
    pub state: VariantState,
    /// Where it runs: `cpu`, `cuda:0`, …
    pub device: String,
    /// What it costs here, when profiled.
    pub profile: Option<VariantCost>,
    /// What its sessions ran so far, when it has served.
    #[serde(default)]
    pub runs: Option<RunTotals>,
    /// The largest batch it may form: its configured `max_batch_size`, capped to
    /// what fits its memory. A larger batch size asked of it is clamped to this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_ceiling: Option<u32>,
    /// Why it cannot serve the task, when it is known not to (its model does not fit
    /// the task's signature): a switch to it is refused with this reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
    /// Its instances that serve now (0 while it is not loaded).
    #[serde(default)]
    pub instances: u32,
    /// Its instances being loaded and warmed, which take batches once warm.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub instances_starting: u32,
    /// The instances it runs, or loads with: as configured, or as a policy last set.
    #[serde(default)]
    pub instances_set: u32,
    /// What one of its instances holds of the machine's budget: measured when it
    /// loaded, else what its settings say it will.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<InstanceShare>,
    /// Milliseconds since it last served the task (0 while it serves); absent for one
    /// that never served. The runtime unloads idle variants for room least recently
    /// served first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_ms: Option<u64>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// What one instance of a variant holds of the machine's [`Budget`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct InstanceShare {
    /// Cores: the threads of its own intra-op pool; 0 for a session on the shared
    /// pool, whose threads [`Budget::shared_pool_cores`] counts once.
    pub cores: f64,
    /// Host memory, in bytes.
    pub memory_bytes: u64,
    /// Memory of its GPU, in bytes (0 on the CPU).
    #[serde(default)]
    pub gpu_memory_bytes: u64,
}

/// What the runtime may allocate to its tasks' instances, and what of it is free. The
/// cores are held by each task's serving variant (a variant loaded without serving
/// holds memory only); memory by every variant loaded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct Budget {
    /// Cores instances may hold: as configured, or what the process may run on
    /// (its CPU affinity and cgroup quota).
    pub cores: f64,
    /// Of them, those no serving instance holds.
    pub cores_free: f64,
    /// Threads of the intra-op pool sessions share, counted once among the cores held
    /// while any serving instance runs on it.
    #[serde(default)]
    pub shared_pool_cores: f64,
    /// Host memory instances may hold, in bytes.
    pub memory_bytes: u64,
    /// Of it, what no loaded instance holds.
    pub memory_free_bytes: u64,
    /// Each GPU's memory.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub gpus: Vec<GpuBudget>,
    /// Whether a load that does not fit may unload variants that do not serve, least
    /// recently served first.
    #[serde(default)]
    pub unload_idle: bool,
}

/// One GPU's memory in the budget.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GpuBudget {
    /// Its index, as in `cuda:N`.
    pub index: u32,
    /// Memory instances may hold on it, in bytes.
    pub memory_bytes: u64,
    /// Of it, what no loaded instance holds.
    pub memory_free_bytes: u64,
}

/// The batches a variant's sessions ran since the process started. The counts only
/// grow: two ticks' totals tell how long its batches took lately, to hold against
/// the profile's fit (`a·rows + c·batches`) when the machine is slower or faster
/// than when it was profiled.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunTotals {
    /// Batches run.
    pub batches: u64,
    /// Their rows.
    pub rows: u64,
    /// Time the sessions took to run them, in ms, not counting waits for a turn.
    pub run_ms: f64,
}

/// A variant's profile, as much of it as a policy needs.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct VariantCost {
    /// Warm latency against batch size.
    pub fit: Option<LatencyFit>,
    /// Maximal throughput and the batch that reaches it.
    pub max_throughput: Option<Throughput>,
    /// Load and warm-up time of its last load, in ms: what switching to it costs
    /// while it is unloaded.
    pub load_ms: Option<f64>,
    /// Memory it holds while loaded, in bytes.
    pub memory_bytes: Option<u64>,
    /// The largest batch that fits its memory budget.
    pub max_safe_batch: Option<u32>,
    /// What it answers a second when requests carry photos, by size class: decoding,
    /// resizing and inference measured together on the cores they share (its image
    /// profile). Empty where none was measured for its settings.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub photos: Vec<PhotoCapacity>,
}

/// A variant's capacity with photos of one size class.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PhotoCapacity {
    /// The size class: `WIDTHxHEIGHT`, or a name for a set of photos.
    pub size_class: String,
    /// Its photos' mean size encoded, in bytes.
    pub mean_bytes: u64,
    /// Requests of one photo answered a second in a closed loop.
    pub requests_per_s: f64,
}

/// The machine.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SystemSnapshot {
    /// Logical cores.
    pub cores: u32,
    /// CPU time the whole machine used over the last tick, in % of all cores.
    pub cpu_host_percent: Option<f64>,
    /// CPU time this process used over the last tick, in % of all cores.
    pub cpu_process_percent: Option<f64>,
    /// Memory in the machine, in bytes.
    pub memory_total_bytes: Option<u64>,
    /// Memory available for new allocations, in bytes.
    pub memory_available_bytes: Option<u64>,
    /// GPUs, when NVML finds any.
    pub gpus: Vec<GpuSnapshot>,
    /// The pool that decodes and resizes the images requests carry: when it is busy or
    /// queues, the CPU goes to decoding rather than to the models.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preprocessing: Option<PreprocessingSnapshot>,
    /// What instances may hold, and what of it is free; absent where the host does
    /// not keep one (a decision is then not held to it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget>,
}

/// The preprocessing pool.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct PreprocessingSnapshot {
    /// Its threads.
    pub threads: u32,
    /// Requests waiting for a thread now.
    pub queue_length: u64,
    /// The most that may wait.
    pub queue_size: u64,
    /// Time its threads worked over the last tick, in % of their time.
    pub utilisation_percent: f64,
}

/// One GPU, as NVML reports it; a figure the device does not give is absent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct GpuSnapshot {
    /// Its index, as in `cuda:N`.
    pub index: u32,
    /// Its model name.
    pub name: String,
    /// Time the GPU was busy over the last sample period, in %.
    pub utilisation_percent: Option<f64>,
    /// Device memory in use, in bytes.
    pub memory_used_bytes: Option<u64>,
    /// Device memory in all, in bytes.
    pub memory_total_bytes: Option<u64>,
    /// Temperature, in °C.
    pub temperature_c: Option<f64>,
    /// Power draw, in W.
    pub power_w: Option<f64>,
    /// Streaming-multiprocessor clock, in MHz.
    pub sm_clock_mhz: Option<u32>,
    /// Why the clocks are held down, as NVML names the reasons (empty when they are not).
    pub throttle_reasons: Vec<String>,
}
