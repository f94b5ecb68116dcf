#!/usr/bin/env python3
"""Tables of scripts/bench/collisions.sh's runs in DIR (one folder per mode and round:
never, together, staggered): per run the late share and p99 of the whole load, the
switches the replicas made and how many came within a second of another replica's,
and the late share of the requests sent in the second after a switch. Prints
Markdown; writes DIR/results.json."""

import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fleet_table import collisions, late_share, summary, switches  # noqa: E402

SLO_MS = 150.0
AFTER_S = 1.0


def run(run_dir):
    row = summary(os.path.join(run_dir, "load"))
    started_at = float(open(os.path.join(run_dir, "started_at")).read())
    records = [json.loads(line) for line in open(os.path.join(run_dir, "load", "requests.jsonl"))]
    changes = switches(os.path.join(run_dir, "active.txt"))
    changes = [c for c in changes if c[0] >= started_at]
    after, counted = late_share(records, started_at, [c[0] for c in changes], SLO_MS, AFTER_S)
    return {
        "late_pct": row["slo_violation_pct"],
        "p99_ms": row["p99_ms"],
        "sent": row["sent"],
        "switches": len(changes),
        "colliding": len(collisions(changes)),
        "late_pct_after_switch": after,
        "after_switch_requests": counted,
    }


def main(out):
    runs = {}
    for name in sorted(os.listdir(out)):
        mode, _, round_ = name.rpartition("-")
        if mode in ("never", "together", "staggered") and round_.isdigit():
            runs.setdefault(mode, []).append(run(os.path.join(out, name)))
    lines = [
        "| mode | round | sent | late % | p99 ms | switches | within 1 s of another replica's | late % in the 1 s after a switch |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for mode in ("never", "together", "staggered"):
        for i, r in enumerate(runs.get(mode, [])):
            after = "–" if r["late_pct_after_switch"] is None else f"{r['late_pct_after_switch']:.2f} ({r['after_switch_requests']})"
            lines.append(
                f"| {mode} | {i + 1} | {r['sent']} | {r['late_pct']:.2f} | {r['p99_ms']:.1f} | {r['switches']} "
                f"| {r['colliding']} | {after} |"
            )
    lines.append("")
    for mode in ("never", "together", "staggered"):
        found = runs.get(mode, [])
        if found:
            lines.append(
                f"{mode}: late % median {statistics.median(r['late_pct'] for r in found):.2f}, "
                f"p99 median {statistics.median(r['p99_ms'] for r in found):.1f} ms."
            )
    json.dump(runs, open(os.path.join(out, "results.json"), "w"), indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
