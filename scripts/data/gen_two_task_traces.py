"""The two tasks' traces of the allocation experiment: requests per second, one
figure a line, each task quiet at its base with bursts that rise, hold and fall, the
two tasks' bursts never at once. Deterministic; the CSVs it writes are committed
beside the load files.

- `two-tasks-*.csv` (experiments/two-tasks-load.toml): alike bursts, each rising in
  4 s and holding 14 s.
- `two-tasks-shapes-*.csv` (experiments/two-tasks-shapes-load.toml): bursts of other
  shapes: a long low swell, a flash crowd that arrives within a second, a short spike,
  a slow tall climb.

    python3 scripts/data/gen_two_task_traces.py [DIR]      (default experiments)
"""

import sys
from pathlib import Path

DURATION_S = 180


class Burst:
    """From `start`, `rise` seconds up to `peak`, `hold` seconds there, `rise` down."""

    def __init__(self, start, rise, hold, peak):
        self.start, self.rise, self.hold, self.peak = start, rise, hold, peak

    def level(self, t):
        """0 outside the burst, 1 on its plateau, linear on its edges."""
        into = t - self.start
        if into < 0 or into >= 2 * self.rise + self.hold:
            return 0.0
        if into < self.rise:
            return (into + 1) / (self.rise + 1)
        if into < self.rise + self.hold:
            return 1.0
        return (2 * self.rise + self.hold - into) / (self.rise + 1)


# pair name: (task file suffix, base rate, bursts) per task
PAIRS = {
    "two-tasks": (
        ("photo", 12.0, (Burst(20, 4, 14, 60.0), Burst(100, 4, 14, 60.0))),
        ("image", 18.0, (Burst(60, 4, 14, 100.0), Burst(140, 4, 14, 100.0))),
    ),
    "two-tasks-shapes": (
        ("photo", 10.0, (Burst(10, 10, 30, 45.0), Burst(120, 0, 6, 70.0))),
        ("image", 20.0, (Burst(75, 1, 5, 110.0), Burst(140, 12, 10, 90.0))),
    ),
}


def rates(base, bursts):
    return [base + max((b.peak - base) * b.level(t) for b in bursts) for t in range(DURATION_S)]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "experiments")
    for pair, tasks in PAIRS.items():
        busy = []
        for suffix, base, bursts in tasks:
            series = rates(base, bursts)
            busy.append({t for t, r in enumerate(series) if r > base})
            (out / f"{pair}-{suffix}.csv").write_text("requests_per_s\n" + "".join(f"{r:.2f}\n" for r in series))
        assert not busy[0] & busy[1], f"{pair}: the two tasks' bursts overlap"


if __name__ == "__main__":
    main()
