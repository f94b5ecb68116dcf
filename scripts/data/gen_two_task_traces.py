"""The two tasks' traces of the allocation experiment (experiments/two-tasks-load.toml):
requests per second, one figure a line, each task quiet at its base with bursts that
rise in 4 s, hold and fall in 4 s, the two tasks' bursts never at once. Deterministic;
the CSVs it writes are committed beside the load file.

    python3 scripts/data/gen_two_task_traces.py [DIR]      (default experiments)
"""

import sys
from pathlib import Path

DURATION_S = 180
RISE_S = 4
HOLD_S = 14

# task file, base rate, peak rate, seconds at which its bursts start
TASKS = (
    ("two-tasks-photo.csv", 12.0, 60.0, (20, 100)),
    ("two-tasks-image.csv", 18.0, 100.0, (60, 140)),
)


def envelope(t, start):
    """0 outside a burst, 1 on its plateau, linear on its edges."""
    if t < start or t >= start + 2 * RISE_S + HOLD_S:
        return 0.0
    into = t - start
    if into < RISE_S:
        return (into + 1) / (RISE_S + 1)
    if into < RISE_S + HOLD_S:
        return 1.0
    return (2 * RISE_S + HOLD_S - into) / (RISE_S + 1)


def rates(base, peak, starts):
    return [base + (peak - base) * max(envelope(t, s) for s in starts) for t in range(DURATION_S)]


def main():
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "experiments")
    busy = [set(), set()]
    for index, (name, base, peak, starts) in enumerate(TASKS):
        series = rates(base, peak, starts)
        busy[index] = {t for t, r in enumerate(series) if r > base}
        (out / name).write_text("requests_per_s\n" + "".join(f"{r:.2f}\n" for r in series))
    assert not busy[0] & busy[1], "the two tasks' bursts overlap"


if __name__ == "__main__":
    main()
