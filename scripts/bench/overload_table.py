#!/usr/bin/env python3
"""Per-phase figures of scripts/bench/overload.sh's runs (one loadgen run per build and
phase, in <dir>/<build>-x<multiple>), from each run's request log (requests.jsonl)
and timeline (timeline.csv): goodput against the capacity measured either side of the
phase, late answers among those served, refusals by reason, how fast refusals were
answered, and the serving process's peak resident memory. Writes results.md and
results.json to --dir."""

import argparse
import csv
import json
import math
import os


def percentile(values, p):
    """Nearest rank, as the runtime's summaries take it; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(len(ordered) * p))
    return ordered[rank - 1]


def reason_of(record):
    """The failure kind a log line names (`kind: message`), or its status."""
    reason = record.get("reason") or record["status"]
    return reason.split(":", 1)[0]


def phase(run_dir, multiple, phase_s, slo_ms, capacity):
    """The figures of one phase's run, held to `capacity`."""
    mine = [json.loads(line) for line in open(os.path.join(run_dir, "requests.jsonl"))]
    rss = []
    with open(os.path.join(run_dir, "timeline.csv")) as timeline:
        rss = [float(row["rss_mib"]) for row in csv.DictReader(timeline) if row.get("rss_mib")]
    served = [r for r in mine if r["status"] == "ok"]
    in_slo = [r for r in served if r["latency_ms"] <= slo_ms]
    refused = [r for r in mine if r["status"] == "rejected"]
    expired = [r for r in mine if r["status"] == "expired"]
    by_reason = {}
    for r in refused + expired + [r for r in mine if r["status"] == "failed"]:
        by_reason[reason_of(r)] = by_reason.get(reason_of(r), 0) + 1
    goodput = len(in_slo) / phase_s
    admitted = len(served) + len(expired)
    return {
        "multiple": multiple,
        "capacity_per_s": capacity,
        "offered_per_s": len(mine) / phase_s,
        "goodput_per_s": goodput,
        "goodput_of_capacity": goodput / capacity,
        "served": len(served),
        "late_pct_of_served": 100.0 * (len(served) - len(in_slo)) / len(served) if served else 0.0,
        # Admitted and then not answered in time: served late, or expired in the queue.
        "late_pct_of_admitted": 100.0 * (len(served) - len(in_slo) + len(expired)) / admitted if admitted else 0.0,
        "refused": len(refused),
        "expired": len(expired),
        "by_reason": by_reason,
        "refusal_p50_ms": percentile([r["latency_ms"] for r in refused], 0.5),
        "refusal_p99_ms": percentile([r["latency_ms"] for r in refused], 0.99),
        "served_p99_ms": percentile([r["latency_ms"] for r in served], 0.99),
        "peak_rss_mib": max(rss, default=None),
    }


def cell(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--capacities", type=float, nargs="+", required=True,
                        help="answers/s measured closed loop before the first phase and after each")
    parser.add_argument("--phase-s", type=int, required=True)
    parser.add_argument("--multiples", nargs="+", required=True, help="as the run folders name them")
    parser.add_argument("--slo-ms", type=float, default=150.0)
    parser.add_argument("--builds", nargs="+", required=True)
    parser.add_argument("--dir", required=True)
    args = parser.parse_args()
    if len(args.capacities) != len(args.multiples) + 1:
        parser.error("one capacity before the first phase and one after each")

    results = {"capacities_per_s": args.capacities, "phase_s": args.phase_s, "slo_ms": args.slo_ms, "runs": {}}
    measured = ", ".join(f"{c:.1f}" for c in args.capacities)
    lines = [
        f"Capacity measured closed loop before the first phase and after each: {measured} answers/s. "
        "Each phase is held to the mean of the two either side of it; its rate is the multiple of the first. "
        f"SLO {args.slo_ms:g} ms, {args.phase_s} s per phase.",
        "",
        "| build | offered (× capacity) | capacity /s | offered /s | goodput /s | goodput / capacity | served "
        "| late % of served | late % of admitted | refused | expired | refusal p50 / p99 ms | served p99 ms "
        "| peak RSS MiB | reasons |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for build in args.builds:
        rows = []
        for index, multiple in enumerate(args.multiples):
            capacity = (args.capacities[index] + args.capacities[index + 1]) / 2
            run = os.path.join(args.dir, f"{build}-x{multiple}")
            rows.append(phase(run, float(multiple), args.phase_s, args.slo_ms, capacity))
        results["runs"][build] = rows
        for r in rows:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["by_reason"].items())) or "-"
            lines.append(
                f"| {build} | {r['multiple']:g} | {r['capacity_per_s']:.1f} | {r['offered_per_s']:.1f} "
                f"| {r['goodput_per_s']:.1f} | {r['goodput_of_capacity']:.2f} | {r['served']} "
                f"| {r['late_pct_of_served']:.2f} | {r['late_pct_of_admitted']:.2f} | {r['refused']} | {r['expired']} "
                f"| {cell(r['refusal_p50_ms'], 2)} / {cell(r['refusal_p99_ms'], 2)} "
                f"| {cell(r['served_p99_ms'])} | {cell(r['peak_rss_mib'])} | {reasons} |"
            )
    with open(os.path.join(args.dir, "results.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
    with open(os.path.join(args.dir, "results.json"), "w") as out:
        json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
