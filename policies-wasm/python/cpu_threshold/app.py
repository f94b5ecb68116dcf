"""The CPU-threshold policy (the TU Delft thesis's "trivial policy") in Python, with
its published parameters as defaults; it decides exactly as the Rust
`policies-wasm/cpu-threshold`:

- Each task's variants form a chain ordered by profiled maximal throughput, from the
  most accurate down, each link at least 40 % cheaper (cost: the inverse of maximal
  throughput) than the one before; variants without a profile stay out.
- Step down one link when the mean host CPU over the last 10 s is above 70 %; step up
  one link when its maximum over the last 10 s is below 50 % and 30 s have passed
  since the last change; never more than one change per 15 s.
- A step up must keep the CPU predicted from demand x inverse throughput at or below
  65 %, the prediction trusted only up to 1.2 x the observed utilisation.
- With several tasks, the one losing the least normalised accuracy per unit of
  demand-weighted cost saved steps down first; the one gaining the most per unit of
  cost added steps up first.
"""

from collections import deque
from dataclasses import dataclass
from typing import List, Optional

from modelless_policy import Policy, export, rules
from modelless_policy.types import Decision, Snapshot, TaskSnapshot

DEFAULTS = {
    "step_down_above": 70.0,
    "step_up_below": 50.0,
    "step_up_target": 65.0,
    "trust_factor": 1.2,
    "window_ms": 10_000,
    "min_interval_ms": 15_000,
    "step_up_after_ms": 30_000,
    "min_cost_cut": 0.4,
}


@dataclass
class Link:
    variant: str
    cost: float  # seconds per request
    accuracy: float  # over the task's best


@dataclass
class Step:
    task: str
    to: str
    accuracy_change: float
    cost_change: float  # demand-weighted: core-seconds per second


class CpuThreshold(Policy):
    def __init__(self) -> None:
        self.p = dict(DEFAULTS)
        self.cpu: deque = deque()  # (now_ms, host CPU %)
        self.last_change_ms: Optional[int] = None

    def init(self, parameters) -> None:
        unknown = set(parameters) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown parameters: {sorted(unknown)}")
        self.p = {**DEFAULTS, **parameters}

    def save_state(self):
        return {"cpu": [list(c) for c in self.cpu], "last_change_ms": self.last_change_ms}

    def load_state(self, state) -> None:
        self.cpu = deque((int(at), float(cpu)) for at, cpu in state["cpu"])
        self.last_change_ms = state["last_change_ms"]

    def decide(self, snapshot: Snapshot) -> Decision:
        p, now = self.p, snapshot["now_ms"]
        cpu = snapshot["system"].get("cpu_host_percent")
        if cpu is not None:
            self.cpu.append((now, cpu))
        while self.cpu and self.cpu[0][0] + p["window_ms"] < now:
            self.cpu.popleft()
        if not self.cpu:
            return {"tasks": []}
        values = [c for _, c in self.cpu]
        mean, most = sum(values) / len(values), max(values)
        since_change = now - self.last_change_ms if self.last_change_ms is not None else float("inf")
        if since_change < p["min_interval_ms"]:
            return {"tasks": []}
        tasks = snapshot["tasks"]
        step = None
        if mean > p["step_down_above"]:
            step = self.step_down(tasks)
        elif most < p["step_up_below"] and since_change >= p["step_up_after_ms"]:
            step = self.step_up(tasks, mean, max(snapshot["system"]["cores"], 1))
        if step is None:
            return {"tasks": []}
        self.last_change_ms = now
        return {"tasks": [{"task": step.task, "variant": step.to}]}

    def step_down(self, tasks: List[TaskSnapshot]) -> Optional[Step]:
        steps = [s for s in (self.neighbour(t, 1) for t in tasks) if s is not None and s.cost_change < 0.0]
        # The first of the least accuracy lost per cost saved.
        return min(steps, key=lambda s: -s.accuracy_change / -s.cost_change, default=None)

    def step_up(self, tasks: List[TaskSnapshot], observed: float, cores: int) -> Optional[Step]:
        p = self.p
        modelled_now = sum(u for u in (self.utilisation(t, cores) for t in tasks) if u is not None)
        best = None
        for s in (self.neighbour(t, -1) for t in tasks):
            if s is None or s.cost_change <= 0.0:
                continue
            modelled = modelled_now + 100.0 * s.cost_change / cores
            if max(modelled, p["trust_factor"] * observed) > p["step_up_target"]:
                continue
            # The last of the most accuracy gained per cost added.
            if best is None or s.accuracy_change / s.cost_change >= best.accuracy_change / best.cost_change:
                best = s
        return best

    def utilisation(self, task: TaskSnapshot, cores: int) -> Optional[float]:
        link = next((l for l in self.chain(task) if l.variant == task["active"]["variant"]), None)
        if link is None:
            return None
        return 100.0 * task["demand"]["per_s_10s"] * link.cost / cores

    def neighbour(self, task: TaskSnapshot, direction: int) -> Optional[Step]:
        chain = self.chain(task)
        at = position(chain, task)
        if at is None or not 0 <= at + direction < len(chain):
            return None
        to, origin = chain[at + direction], chain[at]
        demand = max(task["demand"]["per_s_10s"], 1e-3)
        return Step(task["name"], to.variant, to.accuracy - origin.accuracy, demand * (to.cost - origin.cost))

    def chain(self, task: TaskSnapshot) -> List[Link]:
        best = max((v["accuracy"] for v in task["variants"]), default=-1.7976931348623157e308)
        links = []
        for v in task["variants"]:
            per_s = throughput(v)
            if per_s is not None and per_s > 0.0:
                links.append(Link(v["name"], 1.0 / per_s, v["accuracy"] / best))
        links.sort(key=lambda l: l.cost, reverse=True)
        chain: List[Link] = []
        for link in links:
            if not chain or link.cost <= (1.0 - self.p["min_cost_cut"]) * chain[-1].cost:
                chain.append(link)
        return chain


def throughput(variant) -> Optional[float]:
    best = (variant.get("profile") or {}).get("max_throughput")
    return None if best is None else best["requests_per_s"]


def position(chain: List[Link], task: TaskSnapshot) -> Optional[int]:
    """The active variant's link, or else the link of the nearest cost."""
    active = task["active"]["variant"]
    for at, link in enumerate(chain):
        if link.variant == active:
            return at
    variant = rules.active_variant(task)
    per_s = None if variant is None else throughput(variant)
    if per_s is None or not chain:
        return None
    cost = 1.0 / per_s if per_s else float("inf")
    return min(range(len(chain)), key=lambda at: abs(chain[at].cost - cost))


WitWorld = export(CpuThreshold)
