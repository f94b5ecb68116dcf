"""{NAME}: a modelless policy in Python. `decide` gets the snapshot (a dict typed by
modelless_policy.types) and answers a decision; tasks it leaves out keep everything.
Build with ./build.sh, check with `modelless policy check {NAME}.wasm`."""

from modelless_policy import INFO, Policy, export, log
from modelless_policy.types import Decision, Snapshot


class Starter(Policy):
    def init(self, parameters) -> None:
        self.parameters = parameters

    def decide(self, snapshot: Snapshot) -> Decision:
        for task in snapshot["tasks"]:
            log(INFO, f"{task['name']}: {task['demand']['per_s_10s']:.1f}/s on {task['active']['variant']}")
        return {"tasks": []}


WitWorld = export(Starter)
