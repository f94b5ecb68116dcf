//! Generated from policy-abi/schema/ by modelless-policy-abi (kits); do not edit. MODELLESS_WRITE_SCHEMA=1 cargo test -p modelless-policy-abi --features schema writes it anew.
//!
//! The snapshot a policy decides on and the decision it answers, for std.json.

const std = @import("std");

/// The metrics snapshot handed to `decide`.
pub const Snapshot = struct {
    /// Version of the ABI the host speaks.
    abi_version: u32,
    /// Milliseconds since the control loop started.
    now_ms: u64,
    /// The machine.
    system: SystemSnapshot,
    /// Every task served.
    tasks: []const TaskSnapshot,
    /// Ticks since the control loop started, from 0.
    tick: u64,
};

/// What the runtime may allocate to its tasks' instances, and what of it is free. The
/// cores are held by each task's serving variant (a variant loaded without serving
/// holds memory only); memory by every variant loaded.
pub const Budget = struct {
    /// Cores instances may hold: as configured, or what the process may run on
    /// (its CPU affinity and cgroup quota).
    cores: f64,
    /// Of them, those no serving instance holds.
    cores_free: f64,
    /// Each GPU's memory.
    gpus: []const GpuBudget = &.{},
    /// Host memory instances may hold, in bytes.
    memory_bytes: u64,
    /// Of it, what no loaded instance holds.
    memory_free_bytes: u64,
    /// Threads of the intra-op pool sessions share, counted once among the cores held
    /// while any serving instance runs on it.
    shared_pool_cores: f64 = 0,
    /// Whether a load that does not fit may unload variants that do not serve, least
    /// recently served first.
    unload_idle: bool = false,
};

/// Arrival rates over three windows.
pub const Demand = struct {
    /// Requests per second over the last 10 seconds.
    per_s_10s: f64,
    /// Requests per second over the last second.
    per_s_1s: f64,
    /// Requests per second over the last 60 seconds.
    per_s_60s: f64,
};

/// One GPU's memory in the budget.
pub const GpuBudget = struct {
    /// Its index, as in `cuda:N`.
    index: u32,
    /// Memory instances may hold on it, in bytes.
    memory_bytes: u64,
    /// Of it, what no loaded instance holds.
    memory_free_bytes: u64,
};

/// One GPU, as NVML reports it; a figure the device does not give is absent.
pub const GpuSnapshot = struct {
    /// Its index, as in `cuda:N`.
    index: u32,
    /// Device memory in all, in bytes.
    memory_total_bytes: ?u64 = null,
    /// Device memory in use, in bytes.
    memory_used_bytes: ?u64 = null,
    /// Its model name.
    name: []const u8,
    /// Power draw, in W.
    power_w: ?f64 = null,
    /// Streaming-multiprocessor clock, in MHz.
    sm_clock_mhz: ?u32 = null,
    /// Temperature, in °C.
    temperature_c: ?f64 = null,
    /// Why the clocks are held down, as NVML names the reasons (empty when they are not).
    throttle_reasons: []const []const u8,
    /// Time the GPU was busy over the last sample period, in %.
    utilisation_percent: ?f64 = null,
};

/// What one instance of a variant holds of the machine's [`Budget`].
pub const InstanceShare = struct {
    /// Cores: the threads of its own intra-op pool; 0 for a session on the shared
    /// pool, whose threads [`Budget::shared_pool_cores`] counts once.
    cores: f64,
    /// Memory of its GPU, in bytes (0 on the CPU).
    gpu_memory_bytes: u64 = 0,
    /// Host memory, in bytes.
    memory_bytes: u64,
};

/// Warm batch latency as a line: `L(b) = a·b + c`.
pub const LatencyFit = struct {
    /// Milliseconds each row adds.
    a_ms: f64,
    /// Milliseconds every batch costs.
    c_ms: f64,
    /// Coefficient of determination of the fit over the points it was made from.
    r2: f64,
};

/// Latency percentiles, in ms.
pub const LatencySummary = struct {
    /// Median.
    p50: f64,
    /// 95th percentile.
    p95: f64,
    /// 99th percentile.
    p99: f64,
};

/// A variant's capacity with photos of one size class.
pub const PhotoCapacity = struct {
    /// Its photos' mean size encoded, in bytes.
    mean_bytes: u64,
    /// Requests of one photo answered a second in a closed loop.
    requests_per_s: f64,
    /// The size class: `WIDTHxHEIGHT`, or a name for a set of photos.
    size_class: []const u8,
};

/// The photos a task's recent requests carried, decayed over about the last hundred.
pub const PhotoTraffic = struct {
    /// The photos' mean size encoded, in bytes.
    mean_bytes: f64,
    /// Of the requests, the share that carried photos rather than tensors, 0 to 1.
    share: f64,
};

/// The preprocessing pool.
pub const PreprocessingSnapshot = struct {
    /// Requests waiting for a thread now.
    queue_length: u64,
    /// The most that may wait.
    queue_size: u64,
    /// Its threads.
    threads: u32,
    /// Time its threads worked over the last tick, in % of their time.
    utilisation_percent: f64,
};

/// Requests that were never run, by reason.
pub const Refusals = struct {
    /// Left the queue unrun: their deadline passed, or would have before a batch
    /// started then could answer them. Counted among the SLO violations too.
    expired: u64,
    /// Refused at admission: the queue was full.
    queue_full: u64,
    /// Refused at admission: the work queued ahead would have answered them after
    /// their deadline.
    would_miss_deadline: u64,
};

/// The batches a variant's sessions ran since the process started. The counts only
/// grow: two ticks' totals tell how long its batches took lately, to hold against
/// the profile's fit (`a·rows + c·batches`) when the machine is slower or faster
/// than when it was profiled.
pub const RunTotals = struct {
    /// Batches run.
    batches: u64,
    /// Their rows.
    rows: u64,
    /// Time the sessions took to run them, in ms, not counting waits for a turn.
    run_ms: f64,
};

/// The variant serving a task and its knobs.
pub const ServingKnobs = struct {
    /// Sessions serving it.
    instances: u32,
    /// Largest batch it forms.
    max_batch_size: u32,
    /// Longest a request waits for a batch to fill, in µs.
    max_queue_delay_us: u64,
    /// The active variant.
    variant: []const u8,
};

/// The machine.
pub const SystemSnapshot = struct {
    /// What instances may hold, and what of it is free; absent where the host does
    /// not keep one (a decision is then not held to it).
    budget: ?Budget = null,
    /// Logical cores.
    cores: u32,
    /// CPU time the whole machine used over the last tick, in % of all cores.
    cpu_host_percent: ?f64 = null,
    /// CPU time this process used over the last tick, in % of all cores.
    cpu_process_percent: ?f64 = null,
    /// GPUs, when NVML finds any.
    gpus: []const GpuSnapshot,
    /// Memory available for new allocations, in bytes.
    memory_available_bytes: ?u64 = null,
    /// Memory in the machine, in bytes.
    memory_total_bytes: ?u64 = null,
    /// The pool that decodes and resizes the images requests carry: when it is busy or
    /// queues, the CPU goes to decoding rather than to the models.
    preprocessing: ?PreprocessingSnapshot = null,
};

/// One task: its load, how it is served now, and its variants.
pub const TaskSnapshot = struct {
    /// How the task is served now.
    active: ServingKnobs,
    /// Requests answered in the last window.
    completed: u64,
    /// Requests arriving per second.
    demand: Demand,
    /// Requests admitted and not yet answered.
    in_flight: u64,
    /// Latency of the requests answered in the last window (ms), when there were any.
    latency_ms: ?LatencySummary = null,
    /// The task's name.
    name: []const u8,
    /// What its recent requests carried as photos, once any did: a policy prices
    /// them by its variants' capacities with photos ([`VariantCost::photos`]).
    photos: ?PhotoTraffic = null,
    /// Requests waiting in the active variant's queue.
    queue_length: u64,
    /// Requests of the last window that were never run, by reason.
    refusals: Refusals,
    /// Requests of the last window refused at admission (queue full, predicted to
    /// miss their deadline, too large, no variant accurate enough).
    rejections: u64,
    /// The task's latency target (ms), when it has one.
    slo_latency_ms: ?f64 = null,
    /// Requests of the last window answered after their latency target, or not at all
    /// because their deadline passed.
    slo_violations: u64,
    /// All its variants, in configured order.
    variants: []const VariantSnapshot,
};

/// The most requests per second a variant sustains, and the batch size it takes.
pub const Throughput = struct {
    /// Batch size at which it is reached.
    batch_size: u32,
    /// Requests (rows) per second.
    requests_per_s: f64,
};

/// A variant's profile, as much of it as a policy needs.
pub const VariantCost = struct {
    /// Warm latency against batch size.
    fit: ?LatencyFit = null,
    /// Load and warm-up time of its last load, in ms: what switching to it costs
    /// while it is unloaded.
    load_ms: ?f64 = null,
    /// The largest batch that fits its memory budget.
    max_safe_batch: ?u32 = null,
    /// Maximal throughput and the batch that reaches it.
    max_throughput: ?Throughput = null,
    /// Memory it holds while loaded, in bytes.
    memory_bytes: ?u64 = null,
    /// What it answers a second when requests carry photos, by size class: decoding,
    /// resizing and inference measured together on the cores they share (its image
    /// profile). Empty where none was measured for its settings.
    photos: []const PhotoCapacity = &.{},
};

/// One variant of a task.
pub const VariantSnapshot = struct {
    /// Its accuracy, in the unit the task's variants share.
    accuracy: f64,
    /// The largest batch it may form: its configured `max_batch_size`, capped to
    /// what fits its memory. A larger batch size asked of it is clamped to this.
    batch_ceiling: ?u32 = null,
    /// Where it runs: `cpu`, `cuda:0`, …
    device: []const u8,
    /// Milliseconds since it last served the task (0 while it serves); absent for one
    /// that never served. The runtime unloads idle variants for room least recently
    /// served first.
    idle_ms: ?u64 = null,
    /// Its instances that serve now (0 while it is not loaded).
    instances: u32 = 0,
    /// The instances it runs, or loads with: as configured, or as a policy last set.
    instances_set: u32 = 0,
    /// Its instances being loaded and warmed, which take batches once warm.
    instances_starting: u32 = 0,
    /// Its name.
    name: []const u8,
    /// What it costs here, when profiled.
    profile: ?VariantCost = null,
    /// Why it cannot serve the task, when it is known not to (its model does not fit
    /// the task's signature): a switch to it is refused with this reason.
    refused: ?[]const u8 = null,
    /// What its sessions ran so far, when it has served.
    runs: ?RunTotals = null,
    /// What one of its instances holds of the machine's budget: measured when it
    /// loaded, else what its settings say it will.
    share: ?InstanceShare = null,
    /// Where its serving version stands.
    state: VariantState,
};

/// Where a variant stands.
pub const VariantState = enum { unloaded, loading, warming, ready, draining, failed };

/// The policy could not decide; the host keeps the last good knobs.
pub const PolicyError = struct {
    /// Why.
    @"error": []const u8,
};

/// The decision `decide` returns.
pub const Decision = struct {
    /// Changes per task; tasks left out keep everything.
    tasks: []const TaskDecision = &.{},
};

/// The knobs of one task to change.
pub const TaskDecision = struct {
    /// Instances of the variant named (or, without one, of the variant serving): each
    /// a session with its own threads, holding its share of the budget. Added ones
    /// load and warm before they take batches; removed ones finish their batch first.
    /// For a variant not loaded, the instances it loads with.
    instances: ?u32 = null,
    /// Variants to load and warm without serving yet, so that a later switch to one
    /// costs no load.
    load: []const []const u8 = &.{},
    /// Largest batch to form.
    max_batch_size: ?u32 = null,
    /// Longest a request waits for a batch to fill, in µs.
    max_queue_delay_us: ?u64 = null,
    /// Instances of variants that do not serve, by name: one loaded to stand by is
    /// brought to them (warmed, holding memory but no cores until it serves), one not
    /// loaded loads with them. A later switch to it finds them warm.
    standby: std.json.ArrayHashMap(u32) = .{},
    /// The task.
    task: []const u8,
    /// Variants to unload, freeing their memory; they drain first. The one serving,
    /// and the one a switch goes to, cannot be.
    unload: []const []const u8 = &.{},
    /// The variant to serve it (loaded and warmed first if it is not ready).
    variant: ?[]const u8 = null,
};
