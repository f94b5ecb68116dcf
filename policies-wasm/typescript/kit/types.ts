// Generated from policy-abi/schema/ by modelless-policy-abi (kits); do not edit. MODELLESS_WRITE_SCHEMA=1 cargo test -p modelless-policy-abi --features schema writes it anew.
//
// The snapshot a policy decides on and the decision it answers.

/**
 * The metrics snapshot handed to `decide`.
 */
export interface Snapshot {
  /**
   * Version of the ABI the host speaks.
   */
  abi_version: number;
  /**
   * Milliseconds since the control loop started.
   */
  now_ms: number;
  /**
   * The machine.
   */
  system: SystemSnapshot;
  /**
   * Every task served.
   */
  tasks: TaskSnapshot[];
  /**
   * Ticks since the control loop started, from 0.
   */
  tick: number;
}

/**
 * What the runtime may allocate to its tasks' instances, and what of it is free. The
 * cores are held by each task's serving variant (a variant loaded without serving
 * holds memory only); memory by every variant loaded.
 */
export interface Budget {
  /**
   * Cores instances may hold: as configured, or what the process may run on
   * (its CPU affinity and cgroup quota).
   */
  cores: number;
  /**
   * Of them, those no serving instance holds.
   */
  cores_free: number;
  /**
   * Each GPU's memory.
   */
  gpus?: GpuBudget[];
  /**
   * Host memory instances may hold, in bytes.
   */
  memory_bytes: number;
  /**
   * Of it, what no loaded instance holds.
   */
  memory_free_bytes: number;
  /**
   * Threads of the intra-op pool sessions share, counted once among the cores held
   * while any serving instance runs on it.
   */
  shared_pool_cores?: number;
  /**
   * Whether a load that does not fit may unload variants that do not serve, least
   * recently served first.
   */
  unload_idle?: boolean;
}

/**
 * Arrival rates over three windows.
 */
export interface Demand {
  /**
   * Requests per second over the last 10 seconds.
   */
  per_s_10s: number;
  /**
   * Requests per second over the last second.
   */
  per_s_1s: number;
  /**
   * Requests per second over the last 60 seconds.
   */
  per_s_60s: number;
}

/**
 * One GPU's memory in the budget.
 */
export interface GpuBudget {
  /**
   * Its index, as in `cuda:N`.
   */
  index: number;
  /**
   * Memory instances may hold on it, in bytes.
   */
  memory_bytes: number;
  /**
   * Of it, what no loaded instance holds.
   */
  memory_free_bytes: number;
}

/**
 * One GPU, as NVML reports it; a figure the device does not give is absent.
 */
export interface GpuSnapshot {
  /**
   * Its index, as in `cuda:N`.
   */
  index: number;
  /**
   * Device memory in all, in bytes.
   */
  memory_total_bytes?: number | null;
  /**
   * Device memory in use, in bytes.
   */
  memory_used_bytes?: number | null;
  /**
   * Its model name.
   */
  name: string;
  /**
   * Power draw, in W.
   */
  power_w?: number | null;
  /**
   * Streaming-multiprocessor clock, in MHz.
   */
  sm_clock_mhz?: number | null;
  /**
   * Temperature, in °C.
   */
  temperature_c?: number | null;
  /**
   * Why the clocks are held down, as NVML names the reasons (empty when they are not).
   */
  throttle_reasons: string[];
  /**
   * Time the GPU was busy over the last sample period, in %.
   */
  utilisation_percent?: number | null;
}

/**
 * What one instance of a variant holds of the machine's [`Budget`].
 */
export interface InstanceShare {
  /**
   * Cores: the threads of its own intra-op pool; 0 for a session on the shared
   * pool, whose threads [`Budget::shared_pool_cores`] counts once.
   */
  cores: number;
  /**
   * Memory of its GPU, in bytes (0 on the CPU).
   */
  gpu_memory_bytes?: number;
  /**
   * Host memory, in bytes.
   */
  memory_bytes: number;
}

/**
 * Warm batch latency as a line: `L(b) = a·b + c`.
 */
export interface LatencyFit {
  /**
   * Milliseconds each row adds.
   */
  a_ms: number;
  /**
   * Milliseconds every batch costs.
   */
  c_ms: number;
  /**
   * Coefficient of determination of the fit over the points it was made from.
   */
  r2: number;
}

/**
 * Latency percentiles, in ms.
 */
export interface LatencySummary {
  /**
   * Median.
   */
  p50: number;
  /**
   * 95th percentile.
   */
  p95: number;
  /**
   * 99th percentile.
   */
  p99: number;
}

/**
 * A variant's capacity with photos of one size class.
 */
export interface PhotoCapacity {
  /**
   * Its photos' mean size encoded, in bytes.
   */
  mean_bytes: number;
  /**
   * Requests of one photo answered a second in a closed loop.
   */
  requests_per_s: number;
  /**
   * The size class: `WIDTHxHEIGHT`, or a name for a set of photos.
   */
  size_class: string;
}

/**
 * The photos a task's recent requests carried, decayed over about the last hundred.
 */
export interface PhotoTraffic {
  /**
   * The photos' mean size encoded, in bytes.
   */
  mean_bytes: number;
  /**
   * Of the requests, the share that carried photos rather than tensors, 0 to 1.
   */
  share: number;
}

/**
 * The preprocessing pool.
 */
export interface PreprocessingSnapshot {
  /**
   * Requests waiting for a thread now.
   */
  queue_length: number;
  /**
   * The most that may wait.
   */
  queue_size: number;
  /**
   * Its threads.
   */
  threads: number;
  /**
   * Time its threads worked over the last tick, in % of their time.
   */
  utilisation_percent: number;
}

/**
 * Requests that were never run, by reason.
 */
export interface Refusals {
  /**
   * Left the queue unrun: their deadline passed, or would have before a batch
   * started then could answer them. Counted among the SLO violations too.
   */
  expired: number;
  /**
   * Refused at admission: the queue was full.
   */
  queue_full: number;
  /**
   * Refused at admission: the work queued ahead would have answered them after
   * their deadline.
   */
  would_miss_deadline: number;
}

/**
 * The batches a variant's sessions ran since the process started. The counts only
 * grow: two ticks' totals tell how long its batches took lately, to hold against
 * the profile's fit (`a·rows + c·batches`) when the machine is slower or faster
 * than when it was profiled.
 */
export interface RunTotals {
  /**
   * Batches run.
   */
  batches: number;
  /**
   * Their rows.
   */
  rows: number;
  /**
   * Time the sessions took to run them, in ms, not counting waits for a turn.
   */
  run_ms: number;
}

/**
 * The variant serving a task and its knobs.
 */
export interface ServingKnobs {
  /**
   * Sessions serving it.
   */
  instances: number;
  /**
   * Largest batch it forms.
   */
  max_batch_size: number;
  /**
   * Longest a request waits for a batch to fill, in µs.
   */
  max_queue_delay_us: number;
  /**
   * The active variant.
   */
  variant: string;
}

/**
 * The machine.
 */
export interface SystemSnapshot {
  /**
   * What instances may hold, and what of it is free; absent where the host does
   * not keep one (a decision is then not held to it).
   */
  budget?: Budget | null;
  /**
   * Logical cores.
   */
  cores: number;
  /**
   * CPU time the whole machine used over the last tick, in % of all cores.
   */
  cpu_host_percent?: number | null;
  /**
   * CPU time this process used over the last tick, in % of all cores.
   */
  cpu_process_percent?: number | null;
  /**
   * GPUs, when NVML finds any.
   */
  gpus: GpuSnapshot[];
  /**
   * Memory available for new allocations, in bytes.
   */
  memory_available_bytes?: number | null;
  /**
   * Memory in the machine, in bytes.
   */
  memory_total_bytes?: number | null;
  /**
   * The pool that decodes and resizes the images requests carry: when it is busy or
   * queues, the CPU goes to decoding rather than to the models.
   */
  preprocessing?: PreprocessingSnapshot | null;
}

/**
 * One task: its load, how it is served now, and its variants.
 */
export interface TaskSnapshot {
  /**
   * How the task is served now.
   */
  active: ServingKnobs;
  /**
   * Requests answered in the last window.
   */
  completed: number;
  /**
   * Requests arriving per second.
   */
  demand: Demand;
  /**
   * Requests admitted and not yet answered.
   */
  in_flight: number;
  /**
   * Latency of the requests answered in the last window (ms), when there were any.
   */
  latency_ms?: LatencySummary | null;
  /**
   * The task's name.
   */
  name: string;
  /**
   * What its recent requests carried as photos, once any did: a policy prices
   * them by its variants' capacities with photos ([`VariantCost::photos`]).
   */
  photos?: PhotoTraffic | null;
  /**
   * Requests waiting in the active variant's queue.
   */
  queue_length: number;
  /**
   * Requests of the last window that were never run, by reason.
   */
  refusals?: Refusals;
  /**
   * Requests of the last window refused at admission (queue full, predicted to
   * miss their deadline, too large, no variant accurate enough).
   */
  rejections: number;
  /**
   * The task's latency target (ms), when it has one.
   */
  slo_latency_ms?: number | null;
  /**
   * Requests of the last window answered after their latency target, or not at all
   * because their deadline passed.
   */
  slo_violations: number;
  /**
   * All its variants, in configured order.
   */
  variants: VariantSnapshot[];
}

/**
 * The most requests per second a variant sustains, and the batch size it takes.
 */
export interface Throughput {
  /**
   * Batch size at which it is reached.
   */
  batch_size: number;
  /**
   * Requests (rows) per second.
   */
  requests_per_s: number;
}

/**
 * A variant's profile, as much of it as a policy needs.
 */
export interface VariantCost {
  /**
   * Warm latency against batch size.
   */
  fit?: LatencyFit | null;
  /**
   * Load and warm-up time of its last load, in ms: what switching to it costs
   * while it is unloaded.
   */
  load_ms?: number | null;
  /**
   * The largest batch that fits its memory budget.
   */
  max_safe_batch?: number | null;
  /**
   * Maximal throughput and the batch that reaches it.
   */
  max_throughput?: Throughput | null;
  /**
   * Memory it holds while loaded, in bytes.
   */
  memory_bytes?: number | null;
  /**
   * What it answers a second when requests carry photos, by size class: decoding,
   * resizing and inference measured together on the cores they share (its image
   * profile). Empty where none was measured for its settings.
   */
  photos?: PhotoCapacity[];
}

/**
 * One variant of a task.
 */
export interface VariantSnapshot {
  /**
   * Its accuracy, in the unit the task's variants share.
   */
  accuracy: number;
  /**
   * The largest batch it may form: its configured `max_batch_size`, capped to
   * what fits its memory. A larger batch size asked of it is clamped to this.
   */
  batch_ceiling?: number | null;
  /**
   * Where it runs: `cpu`, `cuda:0`, …
   */
  device: string;
  /**
   * Milliseconds since it last served the task (0 while it serves); absent for one
   * that never served. The runtime unloads idle variants for room least recently
   * served first.
   */
  idle_ms?: number | null;
  /**
   * Its instances that serve now (0 while it is not loaded).
   */
  instances?: number;
  /**
   * The instances it runs, or loads with: as configured, or as a policy last set.
   */
  instances_set?: number;
  /**
   * Its instances being loaded and warmed, which take batches once warm.
   */
  instances_starting?: number;
  /**
   * Its name.
   */
  name: string;
  /**
   * What it costs here, when profiled.
   */
  profile?: VariantCost | null;
  /**
   * Why it cannot serve the task, when it is known not to (its model does not fit
   * the task's signature): a switch to it is refused with this reason.
   */
  refused?: string | null;
  /**
   * What its sessions ran so far, when it has served.
   */
  runs?: RunTotals | null;
  /**
   * What one of its instances holds of the machine's budget: measured when it
   * loaded, else what its settings say it will.
   */
  share?: InstanceShare | null;
  /**
   * Where its serving version stands.
   */
  state: VariantState;
}

/**
 * Where a variant stands.
 */
export type VariantState = "unloaded" | "loading" | "warming" | "ready" | "draining" | "failed";

/**
 * The policy could not decide; the host keeps the last good knobs.
 */
export interface PolicyError {
  /**
   * Why.
   */
  error: string;
}

/**
 * What a policy's `decide` may write: a decision, or why it could not make one.
 */
export type PolicyOutput = PolicyError | Decision;

/**
 * The decision `decide` returns.
 */
export interface Decision {
  /**
   * Changes per task; tasks left out keep everything.
   */
  tasks?: TaskDecision[];
}

/**
 * The knobs of one task to change.
 */
export interface TaskDecision {
  /**
   * Instances of the variant named (or, without one, of the variant serving): each
   * a session with its own threads, holding its share of the budget. Added ones
   * load and warm before they take batches; removed ones finish their batch first.
   * For a variant not loaded, the instances it loads with.
   */
  instances?: number | null;
  /**
   * Variants to load and warm without serving yet, so that a later switch to one
   * costs no load.
   */
  load?: string[];
  /**
   * Largest batch to form.
   */
  max_batch_size?: number | null;
  /**
   * Longest a request waits for a batch to fill, in µs.
   */
  max_queue_delay_us?: number | null;
  /**
   * Instances of variants that do not serve, by name: one loaded to stand by is
   * brought to them (warmed, holding memory but no cores until it serves), one not
   * loaded loads with them. A later switch to it finds them warm.
   */
  standby?: Record<string, number>;
  /**
   * The task.
   */
  task: string;
  /**
   * Variants to unload, freeing their memory; they drain first. The one serving,
   * and the one a switch goes to, cannot be.
   */
  unload?: string[];
  /**
   * The variant to serve it (loaded and warmed first if it is not ready).
   */
  variant?: string | null;
}
