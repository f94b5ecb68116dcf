#!/usr/bin/env python3
"""Tables of scripts/bench/fleet.sh's runs in DIR: throughput of one replica direct,
behind nginx, and three behind nginx (per-round ratios to the direct run, so that
the machine's drift cancels); the steep trace through the fleet against the
simulator; and when the replicas switched variants, whether switches of different
replicas came within a second of each other (collisions), and the late share of the
requests sent around them. Prints Markdown; writes DIR/results.json."""

import json
import os
import statistics
import sys

COLLISION_S = 1.0
# Requests sent this long after a switch are counted as around it.
AFTER_S = 3.0


def summary(run_dir):
    rows = json.load(open(os.path.join(run_dir, "summary.json")))
    return next(r for r in rows if r["task"] != "all")


def throughput(out):
    runs = {}
    for name in sorted(os.listdir(os.path.join(out, "throughput"))):
        target, round_ = name.rsplit("-", 1)
        runs.setdefault(int(round_), {})[target] = summary(os.path.join(out, "throughput", name))
    ratios = {"nginx-1": [], "nginx-3": []}
    rates = {"direct": [], "nginx-1": [], "nginx-3": []}
    p99 = {"direct": [], "nginx-1": [], "nginx-3": []}
    for round_ in sorted(runs):
        found = runs[round_]
        for target in rates:
            rates[target].append(found[target]["throughput_per_s"])
            p99[target].append(found[target]["p99_ms"])
        for target in ratios:
            ratios[target].append(found[target]["throughput_per_s"] / found["direct"]["throughput_per_s"])
    return rates, p99, ratios


def switches(polled):
    """From a file of polled active variants (`time replica variant` lines), the
    times a replica's active variant changed, and from what to what."""
    last, changes = {}, []
    for line in open(polled):
        t, replica, variant = line.split()
        if variant == "-":
            continue
        if replica in last and last[replica] != variant:
            changes.append((float(t), replica, last[replica], variant))
        last[replica] = variant
    return changes


def collisions(changes):
    """Switches within COLLISION_S of a switch of another replica."""
    return [c for c in changes if any(o[1] != c[1] and abs(o[0] - c[0]) <= COLLISION_S for o in changes)]


def late_share(records, started_at, times, slo_ms, after_s=AFTER_S):
    """The late or failed share of requests sent within `after_s` after any of `times`."""
    chosen = [
        r for r in records if any(0 <= started_at + r["sent_s"] - t <= after_s for t in times)
    ]
    if not chosen:
        return None, 0
    late = [r for r in chosen if r["status"] != "ok" or r["latency_ms"] > slo_ms]
    return 100.0 * len(late) / len(chosen), len(chosen)


def main(out):
    results = {}
    lines = []
    rates, p99, ratios = throughput(out)
    results["throughput"] = {"rates": rates, "p99_ms": p99, "ratios_to_direct": ratios}
    lines += [
        "### Throughput, closed loop (answers/s; ratios to the direct run of the same round)\n",
        "| round | direct | 1 replica behind nginx | 3 replicas behind nginx | nginx-1 ÷ direct | nginx-3 ÷ direct |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for i in range(len(rates["direct"])):
        lines.append(
            f"| {i + 1} | {rates['direct'][i]:.1f} | {rates['nginx-1'][i]:.1f} | {rates['nginx-3'][i]:.1f} "
            f"| {ratios['nginx-1'][i]:.3f} | {ratios['nginx-3'][i]:.3f} |"
        )
    lines.append(
        f"| median | | | | **{statistics.median(ratios['nginx-1']):.3f}** | **{statistics.median(ratios['nginx-3']):.3f}** |"
    )
    lines.append(
        "\np99 ms, median over rounds: "
        + ", ".join(f"{k} {statistics.median(v):.1f}" for k, v in p99.items())
        + ".\n"
    )

    steep = os.path.join(out, "steep")
    rows = [("real: nginx + 3 replicas", summary(os.path.join(steep, "real")))]
    for servers in (3, 1):
        rows.append((f"simulated, {servers} server(s)", summary(os.path.join(steep, f"sim-{servers}"))))
    results["steep"] = {label: row for label, row in rows}
    lines += [
        "### Steep trace, slo-predictive\n",
        "| run | sent | late % | effective accuracy | p99 ms | switches |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for label, row in rows:
        lines.append(
            f"| {label} | {row['sent']} | {row['slo_violation_pct']:.2f} | {row['effective_accuracy']:.2f} "
            f"| {row['p99_ms']:.1f} | {row['variant_switches']} |"
        )
    real = rows[0][1]
    for label, row in rows[1:]:
        lines.append(
            f"\n{label}: effective accuracy real ÷ simulated {real['effective_accuracy'] / row['effective_accuracy']:.3f}."
        )

    changes = switches(os.path.join(out, "steep", "active.txt"))
    colliding = collisions(changes)
    lone = [c for c in changes if c not in colliding]
    started_at = float(open(os.path.join(steep, "started_at")).read())
    records = [json.loads(line) for line in open(os.path.join(steep, "real", "requests.jsonl"))]
    slo_ms = 150.0
    overall = 100.0 * sum(1 for r in records if r["status"] != "ok" or r["latency_ms"] > slo_ms) / len(records)
    after_colliding = late_share(records, started_at, [c[0] for c in colliding], slo_ms)
    after_lone = late_share(records, started_at, [c[0] for c in lone], slo_ms)
    results["switches"] = {
        "changes": changes,
        "colliding": len(colliding),
        "late_pct_overall": overall,
        "late_pct_after_colliding": after_colliding,
        "late_pct_after_lone": after_lone,
    }
    fmt = lambda share: "–" if share[0] is None else f"{share[0]:.2f} % of {share[1]}"  # noqa: E731
    lines += [
        "\n### Variant switches of the replicas\n",
        f"{len(changes)} switches over the run; {len(colliding)} came within {COLLISION_S:.0f} s of another "
        f"replica's switch. Late or failed, among requests sent in the {AFTER_S:.0f} s after a colliding "
        f"switch: {fmt(after_colliding)}; after a lone switch: {fmt(after_lone)}; over the run: {overall:.2f} %.\n",
        "| t s | replica | from | to | collides |",
        "|---:|---:|---|---|---|",
    ]
    for t, replica, before, after in changes:
        lines.append(f"| {t - started_at:.1f} | {replica} | {before} | {after} | {'yes' if (t, replica, before, after) in colliding else ''} |")
    json.dump(results, open(os.path.join(out, "results.json"), "w"), indent=1)
    print("\n".join(lines))


if __name__ == "__main__":
    main(sys.argv[1])
