#!/usr/bin/env python3
"""Per-phase figures of scripts/bench_overload.sh's runs, from each run's request log
(requests.jsonl) and timeline (timeline.csv): goodput against the capacity measured
in the same run, late answers among those served, refusals by reason, how fast
refusals were answered, and the serving process's peak resident memory. Writes
results.md and results.json to --out."""

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


def phases(run_dir, multiples, phase_s, slo_ms, capacity):
    records = [json.loads(line) for line in open(os.path.join(run_dir, "requests.jsonl"))]
    rss = {}
    with open(os.path.join(run_dir, "timeline.csv")) as timeline:
        for row in csv.DictReader(timeline):
            if row.get("rss_mib"):
                rss[int(row["second"])] = float(row["rss_mib"])
    rows = []
    for index, multiple in enumerate(multiples):
        start, end = index * phase_s, (index + 1) * phase_s
        mine = [r for r in records if start <= r["sent_s"] < end]
        served = [r for r in mine if r["status"] == "ok"]
        in_slo = [r for r in served if r["latency_ms"] <= slo_ms]
        refused = [r for r in mine if r["status"] == "rejected"]
        expired = [r for r in mine if r["status"] == "expired"]
        by_reason = {}
        for r in refused + expired + [r for r in mine if r["status"] == "failed"]:
            by_reason[reason_of(r)] = by_reason.get(reason_of(r), 0) + 1
        peak = max((mib for second, mib in rss.items() if start <= second < end), default=None)
        goodput = len(in_slo) / phase_s
        rows.append({
            "multiple": multiple,
            "offered_per_s": len(mine) / phase_s,
            "goodput_per_s": goodput,
            "goodput_of_capacity": goodput / capacity,
            "served": len(served),
            "late_pct_of_served": 100.0 * (len(served) - len(in_slo)) / len(served) if served else 0.0,
            "refused": len(refused),
            "expired": len(expired),
            "by_reason": by_reason,
            "refusal_p50_ms": percentile([r["latency_ms"] for r in refused], 0.5),
            "refusal_p99_ms": percentile([r["latency_ms"] for r in refused], 0.99),
            "served_p99_ms": percentile([r["latency_ms"] for r in served], 0.99),
            "peak_rss_mib": peak,
        })
    return rows


def cell(value, digits=1):
    return "-" if value is None else f"{value:.{digits}f}"


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--capacity", type=float, nargs="+", required=True,
                        help="answers/s measured closed-loop, before the runs and after the first")
    parser.add_argument("--phase-s", type=int, required=True)
    parser.add_argument("--multiples", type=float, nargs="+", required=True)
    parser.add_argument("--slo-ms", type=float, default=150.0)
    parser.add_argument("--runs", nargs="+", required=True, help="loadgen output folders")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    # The machine's speed drifts over the minutes a run takes: the capacity it is
    # held to is the mean of what was measured on either side of it.
    capacity = sum(args.capacity) / len(args.capacity)
    measured = " and ".join(f"{c:.1f}" for c in args.capacity)

    results = {"capacity_per_s": capacity, "capacity_measured_per_s": args.capacity, "phase_s": args.phase_s, "slo_ms": args.slo_ms, "runs": {}}
    lines = [
        f"Capacity measured in this run: {capacity:.1f} answers/s (closed loop; the mean of {measured}, "
        "before and after the first build's run). "
        f"SLO {args.slo_ms:g} ms, {args.phase_s} s per phase.",
        "",
        "| build | offered (× capacity) | offered /s | goodput /s | goodput / capacity | served | late % of served "
        "| refused | expired | refusal p50 / p99 ms | served p99 ms | peak RSS MiB | reasons |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for run in args.runs:
        name = os.path.basename(os.path.normpath(run))
        rows = phases(run, args.multiples, args.phase_s, args.slo_ms, capacity)
        results["runs"][name] = rows
        for r in rows:
            reasons = ", ".join(f"{k} {v}" for k, v in sorted(r["by_reason"].items())) or "-"
            lines.append(
                f"| {name} | {r['multiple']:g} | {r['offered_per_s']:.1f} | {r['goodput_per_s']:.1f} "
                f"| {r['goodput_of_capacity']:.2f} | {r['served']} | {r['late_pct_of_served']:.2f} | {r['refused']} "
                f"| {r['expired']} | {cell(r['refusal_p50_ms'], 2)} / {cell(r['refusal_p99_ms'], 2)} "
                f"| {cell(r['served_p99_ms'])} | {cell(r['peak_rss_mib'])} | {reasons} |"
            )
    with open(os.path.join(args.out, "results.md"), "w") as out:
        out.write("\n".join(lines) + "\n")
    with open(os.path.join(args.out, "results.json"), "w") as out:
        json.dump(results, out, indent=2)


if __name__ == "__main__":
    main()
