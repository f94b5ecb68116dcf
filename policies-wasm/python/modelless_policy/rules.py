"""The rules a policy reads a snapshot by to agree with the host, as the Rust kit has
them (`policy-abi/src/rules.rs`): which variant serves a task, whether a variant may
serve, and the cores serving instances hold, the pool sessions share counted once.

`python3 -m modelless_policy.rules policy-abi/schema/rules-cases.json` checks them
against the cases the Rust rules answered (the lab's tests run it).
"""

from typing import List, Optional

from .types import TaskSnapshot, VariantSnapshot


def variant(task: TaskSnapshot, name: str) -> Optional[VariantSnapshot]:
    """The variant named `name`."""
    return next((v for v in task["variants"] if v["name"] == name), None)


def active_variant(task: TaskSnapshot) -> Optional[VariantSnapshot]:
    """The variant serving the task: the one `active` names."""
    return variant(task, task["active"]["variant"])


def active_index(task: TaskSnapshot) -> Optional[int]:
    """The index of the serving variant in `variants`."""
    return next((i for i, v in enumerate(task["variants"]) if v["name"] == task["active"]["variant"]), None)


def may_serve(v: VariantSnapshot) -> bool:
    """Whether the variant fits its task and did not fail to load."""
    return v.get("refused") is None and v["state"] != "failed"


def serving_instances(v: VariantSnapshot) -> int:
    """Instances serving and starting."""
    return v.get("instances", 0) + v.get("instances_starting", 0)


def _serving_cores(task: TaskSnapshot):
    """(cores of instances with threads of their own, whether they run on the shared pool)."""
    v = active_variant(task)
    share = v.get("share") if v else None
    if v is None or share is None:
        return 0.0, False
    serving = serving_instances(v)
    return share["cores"] * serving, share["cores"] == 0.0 and serving > 0


def task_cores_held(task: TaskSnapshot, shared_pool_cores: float) -> float:
    """The cores the task's serving instances hold, the shared pool counted where they run on it."""
    own, pooled = _serving_cores(task)
    return own + (shared_pool_cores if pooled else 0.0)


def cores_held(tasks: List[TaskSnapshot], shared_pool_cores: float) -> float:
    """The cores the serving instances of `tasks` hold: each task's own, and the pool once."""
    held = [_serving_cores(t) for t in tasks]
    return sum(own for own, _ in held) + (shared_pool_cores if any(p for _, p in held) else 0.0)


def _check(path: str) -> List[str]:
    import json

    misses = []
    for n, case in enumerate(json.load(open(path))["cases"]):
        tasks, pool, expected = case["tasks"], case["shared_pool_cores"], case["expected"]
        for task, want in zip(tasks, expected["tasks"]):
            active = active_variant(task)
            got = {
                "active_variant": active["name"] if active else None,
                "active_index": active_index(task),
                "cores_held": task_cores_held(task, pool),
                "may_serve": [may_serve(v) for v in task["variants"]],
                "serving_instances": [serving_instances(v) for v in task["variants"]],
            }
            for rule, value in got.items():
                if value != want[rule]:
                    misses.append(f"case {n}, task {task['name']}: {rule} is {value!r}, the host says {want[rule]!r}")
        if cores_held(tasks, pool) != expected["cores_held"]:
            misses.append(f"case {n}: cores_held is {cores_held(tasks, pool)}, the host says {expected['cores_held']}")
    return misses


if __name__ == "__main__":
    import sys

    misses = _check(sys.argv[1])
    print("\n".join(misses) or "rules: every case as the host answers it")
    sys.exit(1 if misses else 0)
