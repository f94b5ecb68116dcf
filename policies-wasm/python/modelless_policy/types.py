"""Generated from policy-abi/schema/ by modelless-policy-abi (kits); do not edit. MODELLESS_WRITE_SCHEMA=1 cargo test -p modelless-policy-abi --features schema writes it anew.

The snapshot a policy decides on and the decision it answers, as TypedDicts.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, NotRequired, Optional, TypedDict, Union

# Where a variant stands.
VariantState = Literal["unloaded", "loading", "warming", "ready", "draining", "failed"]


class Snapshot(TypedDict):
    """The metrics snapshot handed to `decide`."""

    # Version of the ABI the host speaks.
    abi_version: int

    # Milliseconds since the control loop started.
    now_ms: int

    # The machine.
    system: SystemSnapshot

    # Every task served.
    tasks: List[TaskSnapshot]

    # Ticks since the control loop started, from 0.
    tick: int


class Budget(TypedDict):
    """What the runtime may allocate to its tasks' instances, and what of it is free. The
    cores are held by each task's serving variant (a variant loaded without serving
    holds memory only); memory by every variant loaded."""

    # Cores instances may hold: as configured, or what the process may run on
    # (its CPU affinity and cgroup quota).
    cores: float

    # Of them, those no serving instance holds.
    cores_free: float

    # Each GPU's memory.
    gpus: NotRequired[List[GpuBudget]]

    # Host memory instances may hold, in bytes.
    memory_bytes: int

    # Of it, what no loaded instance holds.
    memory_free_bytes: int

    # Threads of the intra-op pool sessions share, counted once among the cores held
    # while any serving instance runs on it.
    shared_pool_cores: NotRequired[float]

    # Whether a load that does not fit may unload variants that do not serve, least
    # recently served first.
    unload_idle: NotRequired[bool]


class Demand(TypedDict):
    """Arrival rates over three windows."""

    # Requests per second over the last 10 seconds.
    per_s_10s: float

    # Requests per second over the last second.
    per_s_1s: float

    # Requests per second over the last 60 seconds.
    per_s_60s: float


class GpuBudget(TypedDict):
    """One GPU's memory in the budget."""

    # Its index, as in `cuda:N`.
    index: int

    # Memory instances may hold on it, in bytes.
    memory_bytes: int

    # Of it, what no loaded instance holds.
    memory_free_bytes: int


class GpuSnapshot(TypedDict):
    """One GPU, as NVML reports it; a figure the device does not give is absent."""

    # Its index, as in `cuda:N`.
    index: int

    # Device memory in all, in bytes.
    memory_total_bytes: NotRequired[Optional[int]]

    # Device memory in use, in bytes.
    memory_used_bytes: NotRequired[Optional[int]]

    # Its model name.
    name: str

    # Power draw, in W.
    power_w: NotRequired[Optional[float]]

    # Streaming-multiprocessor clock, in MHz.
    sm_clock_mhz: NotRequired[Optional[int]]

    # Temperature, in °C.
    temperature_c: NotRequired[Optional[float]]

    # Why the clocks are held down, as NVML names the reasons (empty when they are not).
    throttle_reasons: List[str]

    # Time the GPU was busy over the last sample period, in %.
    utilisation_percent: NotRequired[Optional[float]]


class InstanceShare(TypedDict):
    """What one instance of a variant holds of the machine's [`Budget`]."""

    # Cores: the threads of its own intra-op pool; 0 for a session on the shared
    # pool, whose threads [`Budget::shared_pool_cores`] counts once.
    cores: float

    # Memory of its GPU, in bytes (0 on the CPU).
    gpu_memory_bytes: NotRequired[int]

    # Host memory, in bytes.
    memory_bytes: int


class LatencyFit(TypedDict):
    """Warm batch latency as a line: `L(b) = a·b + c`."""

    # Milliseconds each row adds.
    a_ms: float

    # Milliseconds every batch costs.
    c_ms: float

    # Coefficient of determination of the fit over the points it was made from.
    r2: float


class LatencySummary(TypedDict):
    """Latency percentiles, in ms."""

    # Median.
    p50: float

    # 95th percentile.
    p95: float

    # 99th percentile.
    p99: float


class PhotoCapacity(TypedDict):
    """A variant's capacity with photos of one size class."""

    # Its photos' mean size encoded, in bytes.
    mean_bytes: int

    # Requests of one photo answered a second in a closed loop.
    requests_per_s: float

    # The size class: `WIDTHxHEIGHT`, or a name for a set of photos.
    size_class: str


class PhotoTraffic(TypedDict):
    """The photos a task's recent requests carried, decayed over about the last hundred."""

    # The photos' mean size encoded, in bytes.
    mean_bytes: float

    # Of the requests, the share that carried photos rather than tensors, 0 to 1.
    share: float


class PreprocessingSnapshot(TypedDict):
    """The preprocessing pool."""

    # Requests waiting for a thread now.
    queue_length: int

    # The most that may wait.
    queue_size: int

    # Its threads.
    threads: int

    # Time its threads worked over the last tick, in % of their time.
    utilisation_percent: float


class Refusals(TypedDict):
    """Requests that were never run, by reason."""

    # Left the queue unrun: their deadline passed, or would have before a batch
    # started then could answer them. Counted among the SLO violations too.
    expired: int

    # Refused at admission: the queue was full.
    queue_full: int

    # Refused at admission: the work queued ahead would have answered them after
    # their deadline.
    would_miss_deadline: int


class RunTotals(TypedDict):
    """The batches a variant's sessions ran since the process started. The counts only
    grow: two ticks' totals tell how long its batches took lately, to hold against
    the profile's fit (`a·rows + c·batches`) when the machine is slower or faster
    than when it was profiled."""

    # Batches run.
    batches: int

    # Their rows.
    rows: int

    # Time the sessions took to run them, in ms, not counting waits for a turn.
    run_ms: float


class ServingKnobs(TypedDict):
    """The variant serving a task and its knobs."""

    # Sessions serving it.
    instances: int

    # Largest batch it forms.
    max_batch_size: int

    # Longest a request waits for a batch to fill, in µs.
    max_queue_delay_us: int

    # The active variant.
    variant: str


class SystemSnapshot(TypedDict):
    """The machine."""

    # What instances may hold, and what of it is free; absent where the host does
    # not keep one (a decision is then not held to it).
    budget: NotRequired[Optional[Budget]]

    # Logical cores.
    cores: int

    # CPU time the whole machine used over the last tick, in % of all cores.
    cpu_host_percent: NotRequired[Optional[float]]

    # CPU time this process used over the last tick, in % of all cores.
    cpu_process_percent: NotRequired[Optional[float]]

    # GPUs, when NVML finds any.
    gpus: List[GpuSnapshot]

    # Memory available for new allocations, in bytes.
    memory_available_bytes: NotRequired[Optional[int]]

    # Memory in the machine, in bytes.
    memory_total_bytes: NotRequired[Optional[int]]

    # The pool that decodes and resizes the images requests carry: when it is busy or
    # queues, the CPU goes to decoding rather than to the models.
    preprocessing: NotRequired[Optional[PreprocessingSnapshot]]


class TaskSnapshot(TypedDict):
    """One task: its load, how it is served now, and its variants."""

    # How the task is served now.
    active: ServingKnobs

    # Requests answered in the last window.
    completed: int

    # Requests arriving per second.
    demand: Demand

    # Requests admitted and not yet answered.
    in_flight: int

    # Latency of the requests answered in the last window (ms), when there were any.
    latency_ms: NotRequired[Optional[LatencySummary]]

    # The task's name.
    name: str

    # What its recent requests carried as photos, once any did: a policy prices
    # them by its variants' capacities with photos ([`VariantCost::photos`]).
    photos: NotRequired[Optional[PhotoTraffic]]

    # Requests waiting in the active variant's queue.
    queue_length: int

    # Requests of the last window that were never run, by reason.
    refusals: NotRequired[Refusals]

    # Requests of the last window refused at admission (queue full, predicted to
    # miss their deadline, too large, no variant accurate enough).
    rejections: int

    # The task's latency target (ms), when it has one.
    slo_latency_ms: NotRequired[Optional[float]]

    # Requests of the last window answered after their latency target, or not at all
    # because their deadline passed.
    slo_violations: int

    # All its variants, in configured order.
    variants: List[VariantSnapshot]


class Throughput(TypedDict):
    """The most requests per second a variant sustains, and the batch size it takes."""

    # Batch size at which it is reached.
    batch_size: int

    # Requests (rows) per second.
    requests_per_s: float


class VariantCost(TypedDict):
    """A variant's profile, as much of it as a policy needs."""

    # Warm latency against batch size.
    fit: NotRequired[Optional[LatencyFit]]

    # Load and warm-up time of its last load, in ms: what switching to it costs
    # while it is unloaded.
    load_ms: NotRequired[Optional[float]]

    # The largest batch that fits its memory budget.
    max_safe_batch: NotRequired[Optional[int]]

    # Maximal throughput and the batch that reaches it.
    max_throughput: NotRequired[Optional[Throughput]]

    # Memory it holds while loaded, in bytes.
    memory_bytes: NotRequired[Optional[int]]

    # What it answers a second when requests carry photos, by size class: decoding,
    # resizing and inference measured together on the cores they share (its image
    # profile). Empty where none was measured for its settings.
    photos: NotRequired[List[PhotoCapacity]]


class VariantSnapshot(TypedDict):
    """One variant of a task."""

    # Its accuracy, in the unit the task's variants share.
    accuracy: float

    # The largest batch it may form: its configured `max_batch_size`, capped to
    # what fits its memory. A larger batch size asked of it is clamped to this.
    batch_ceiling: NotRequired[Optional[int]]

    # Where it runs: `cpu`, `cuda:0`, …
    device: str

    # Milliseconds since it last served the task (0 while it serves); absent for one
    # that never served. The runtime unloads idle variants for room least recently
    # served first.
    idle_ms: NotRequired[Optional[int]]

    # Its instances that serve now (0 while it is not loaded).
    instances: NotRequired[int]

    # The instances it runs, or loads with: as configured, or as a policy last set.
    instances_set: NotRequired[int]

    # Its instances being loaded and warmed, which take batches once warm.
    instances_starting: NotRequired[int]

    # Its name.
    name: str

    # What it costs here, when profiled.
    profile: NotRequired[Optional[VariantCost]]

    # Why it cannot serve the task, when it is known not to (its model does not fit
    # the task's signature): a switch to it is refused with this reason.
    refused: NotRequired[Optional[str]]

    # What its sessions ran so far, when it has served.
    runs: NotRequired[Optional[RunTotals]]

    # What one of its instances holds of the machine's budget: measured when it
    # loaded, else what its settings say it will.
    share: NotRequired[Optional[InstanceShare]]

    # Where its serving version stands.
    state: VariantState


class PolicyError(TypedDict):
    """The policy could not decide; the host keeps the last good knobs."""

    # Why.
    error: str


class Decision(TypedDict):
    """The decision `decide` returns."""

    # Changes per task; tasks left out keep everything.
    tasks: NotRequired[List[TaskDecision]]


class TaskDecision(TypedDict):
    """The knobs of one task to change."""

    # Instances of the variant named (or, without one, of the variant serving): each
    # a session with its own threads, holding its share of the budget. Added ones
    # load and warm before they take batches; removed ones finish their batch first.
    # For a variant not loaded, the instances it loads with.
    instances: NotRequired[Optional[int]]

    # Variants to load and warm without serving yet, so that a later switch to one
    # costs no load.
    load: NotRequired[List[str]]

    # Largest batch to form.
    max_batch_size: NotRequired[Optional[int]]

    # Longest a request waits for a batch to fill, in µs.
    max_queue_delay_us: NotRequired[Optional[int]]

    # Instances of variants that do not serve, by name: one loaded to stand by is
    # brought to them (warmed, holding memory but no cores until it serves), one not
    # loaded loads with them. A later switch to it finds them warm.
    standby: NotRequired[Dict[str, int]]

    # The task.
    task: str

    # Variants to unload, freeing their memory; they drain first. The one serving,
    # and the one a switch goes to, cannot be.
    unload: NotRequired[List[str]]

    # The variant to serve it (loaded and warmed first if it is not ready).
    variant: NotRequired[Optional[str]]


# What a policy's `decide` may write: a decision, or why it could not make one.
PolicyOutput = Union[PolicyError, Decision]
