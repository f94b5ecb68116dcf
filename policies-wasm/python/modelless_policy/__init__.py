"""The Python kit for modelless policies.

A policy is a subclass of `Policy` whose `decide` takes a `Snapshot` and returns a
`Decision` (both plain dicts, typed by `modelless_policy.types`, which is generated
from `policy-abi/schema/`). `export(MyPolicy)` returns the `WitWorld` class that
componentize-py builds into a component of the `modelless:policy` world:

    from modelless_policy import Policy, export

    class KeepEverything(Policy):
        def decide(self, snapshot):
            return {"tasks": []}

    WitWorld = export(KeepEverything)

An exception raised by any method becomes the call's error (its type, message and the
line that raised it), which the host counts as the policy's own failure. The same
class runs natively under CPython, for tests.
"""

import json
from typing import Any, Optional, Type

from .types import Decision, Snapshot

__all__ = ["Policy", "export", "log", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"]

ERROR, WARN, INFO, DEBUG, TRACE = range(5)


class Policy:
    """A scheduling policy; override `decide`, and the others where needed."""

    def init(self, parameters: Any) -> None:
        """Takes the parameters (decoded JSON), once, before the first `decide`."""

    def decide(self, snapshot: Snapshot) -> Decision:
        """The decision for this tick."""
        raise NotImplementedError

    def save_state(self) -> Any:
        """The policy's own state (JSON-encodable) for the module that replaces it;
        None for none."""
        return None

    def load_state(self, state: Any) -> None:
        """Takes the state a module it replaces saved."""


def log(level: int, message: str) -> None:
    """Logs a line through the host (`warn` and `error` show in the policy's status).
    Natively, nothing."""
    try:
        from wit_world.imports import host
    except ImportError:
        return
    host.log(host.Level(min(max(level, ERROR), TRACE)), message)


def _error(exc: BaseException) -> str:
    # The innermost frame, from the traceback itself: `traceback` would read the
    # source files, and a policy has no files.
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = f" at {tb.tb_frame.f_code.co_name}:{tb.tb_lineno}" if tb is not None else ""
    return f"{type(exc).__name__}: {exc}{where}"


def export(policy_class: Type[Policy]):
    """The `WitWorld` class componentize-py exports, serving one `policy_class`
    instance for the life of the component instance."""
    try:
        from componentize_py_types import Err
    except ImportError:  # natively, under CPython: the same shape
        class Err(Exception):
            def __init__(self, value):
                super().__init__(value)
                self.value = value

    policy = policy_class()

    def guarded(call):
        try:
            return call()
        except Err:
            raise
        except Exception as exc:  # every failure is the policy's, reported to the host
            raise Err(_error(exc))

    class WitWorld:
        def init(self, parameters: str) -> None:
            guarded(lambda: policy.init(json.loads(parameters)))

        def decide(self, snapshot: str) -> str:
            return guarded(lambda: json.dumps(policy.decide(json.loads(snapshot)), separators=(",", ":")))

        def save_state(self) -> Optional[str]:
            state = guarded(policy.save_state)
            return None if state is None else json.dumps(state, separators=(",", ":"))

        def load_state(self, state: str) -> None:
            guarded(lambda: policy.load_state(json.loads(state)))

    return WitWorld
