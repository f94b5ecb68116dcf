"""A policy that misbehaves as its parameters say, for the host's containment tests:
`{"do": "loop" | "allocate" | "recurse" | "raise" | "garbage" | "huge" | "nothing"}`
(huge: a 100 KB answer, over the output cap the tests set),
and `"after": N` to behave for N decisions first. Never ship it."""

from modelless_policy import Policy, export, log, WARN


class Hostile(Policy):
    def __init__(self) -> None:
        self.do, self.after, self.calls = "nothing", 0, 0

    def init(self, parameters) -> None:
        self.do, self.after = parameters.get("do", "nothing"), parameters.get("after", 0)

    def decide(self, snapshot):
        self.calls += 1
        if self.calls <= self.after:
            return {"tasks": []}
        log(WARN, f"about to {self.do}")
        if self.do == "loop":
            while True:
                pass
        if self.do == "allocate":
            hoard = []
            while True:
                hoard.append(bytearray(1 << 20))
        if self.do == "recurse":
            return self.recurse(0)
        if self.do == "raise":
            raise RuntimeError("the policy gave up")
        if self.do == "garbage":
            return "not a decision"
        if self.do == "huge":
            return {"tasks": [], "padding": "x" * 100_000}
        return {"tasks": []}

    def recurse(self, depth):
        return self.recurse(depth + 1) + 1


WitWorld = export(Hostile)
