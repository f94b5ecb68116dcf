"""The allocation experiment's figures (scripts/bench/allocation.sh).

    python3 allocation_table.py peaks LOAD.toml SCALE
        each task's busiest second of the load's trace files, times SCALE, as JSON
    python3 allocation_table.py scale MODEL.json LOAD.toml MARGIN
        the rate scale at which every task's busiest second asks at least MARGIN
        times what one instance of its most accurate variant serves within its SLO
    python3 allocation_table.py OUT
        the tables, as Markdown

The tables: per round and policy, per task and over both, the share answered within
the SLO, late answers, needless refusals, effective accuracy and core-seconds, real
beside simulated, the process's CPU time and the share of the machine's CPU stolen by
the hypervisor meanwhile; then, over the rounds, each policy's means and the bars:
autoscale within the SLO for every task in every round, its effective accuracy above
the fixed split's at no more of its core-seconds, and replica-only's late answers
over its own.
"""

import json
import statistics
import sys
import tomllib
from pathlib import Path

POLICIES = ("autoscale", "fixed-split", "static-peak", "replica-only")


def peaks(load_path, scale):
    """Each task's busiest second in the CSV traces the load file names, times scale."""
    load = tomllib.loads(Path(load_path).read_text())
    out = {}
    for task in load["tasks"]:
        trace = Path(load_path).parent / task["pattern"]["file"]
        rates = [float(line.split(",")[-1]) for line in trace.read_text().split()[1:]]
        out[task["task"]] = round(max(rates) * scale, 2)
    return out


# policy-abi/src/capacity.rs: the share of the SLO a batch and the one ahead of it may
# take, and the utilisation instances are planned at.
CAPACITY_HEADROOM = 0.9
CAPACITY_UTILISATION = 0.85


def capacity_within_slo(fit, max_batch, slo_ms):
    """Requests/s one instance on line `fit` answers within `slo_ms`, as the runtime and
    the static policies count it (`capacity_within_slo`)."""
    predict = lambda batch: fit["a_ms"] * batch + fit["c_ms"]
    within = [b for b in range(max_batch, 0, -1) if 0 < 2 * predict(b) <= CAPACITY_HEADROOM * slo_ms]
    return CAPACITY_UTILISATION * 1e3 * within[0] / predict(within[0]) if within else 0.0


def rate_scale(model_path, load_path, margin):
    """The scale at which each task's busiest second asks at least `margin` times what
    one instance of its most accurate variant serves within the SLO on the saved
    model's profiles: every task's peak then takes two instances of it, so that sizing
    for the peak and following the load differ on this machine as they would on any."""
    model = json.loads(Path(model_path).read_text())
    busiest = peaks(load_path, 1.0)
    wanted = []
    for task in model["tasks"]:
        best = max(task["variants"], key=lambda v: v["accuracy"])
        snapshot = best["snapshot"]
        one = capacity_within_slo(snapshot["profile"]["fit"], snapshot["batch_ceiling"] or 8, task["slo_ms"])
        wanted.append(margin * one / busiest[task["name"]])
    return round(max(wanted), 3)


def rows_of(path):
    """Summary rows by task ("all" among them)."""
    return {row["task"]: row for row in json.loads(path.read_text())}


def runs(out):
    """(round, policy, real rows, simulated rows) for every run written; the real "all"
    row carries the share of the machine's CPU time the hypervisor took meanwhile."""
    for round_dir in sorted(out.glob("round-*"), key=lambda p: int(p.name.split("-")[1])):
        for policy in POLICIES:
            real, sim = round_dir / policy / "real" / "summary.json", round_dir / policy / "sim" / "summary.json"
            if real.exists() and sim.exists():
                rows = rows_of(real)
                steal = real.parent / "steal.json"
                rows["all"]["steal_pct"] = json.loads(steal.read_text())["steal_pct"] if steal.exists() else None
                yield round_dir.name.split("-")[1], policy, rows, rows_of(sim)


def in_slo(row):
    return 100.0 - row["slo_violation_pct"]


def needless(rows, task):
    """Needless refusals of `task` ("all": over the tasks), None where not reported."""
    if task != "all":
        return rows[task].get("needless_refusals")
    told = [row.get("needless_refusals") for t, row in rows.items() if t != "all"]
    told = [n for n in told if n is not None]
    return sum(told) if told else None


def fmt(value, digits=1):
    return "—" if value is None else f"{value:.{digits}f}"


def run_table(all_runs):
    print("| round | policy | task | within SLO % (sim) | late (sim) | needless (sim) | failed "
          "| effective accuracy (sim) | core-s (sim) | CPU s | steal % |")
    print("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for number, policy, real, sim in all_runs:
        for task in [t for t in real if t != "all"] + ["all"]:
            r, s = real[task], sim.get(task, {})
            print(f"| {number} | {policy} | {task} | {in_slo(r):.2f} ({fmt(s and in_slo(s), 2)}) "
                  f"| {r['slo_violations']} ({s.get('slo_violations', '—')}) "
                  f"| {fmt(needless(real, task), 0)} ({fmt(needless(sim, task) if s else None, 0)}) | {r['failed']} "
                  f"| {r['effective_accuracy']:.2f} ({fmt(s.get('effective_accuracy'), 2)}) "
                  f"| {fmt(r.get('core_seconds'), 0)} ({fmt(s.get('core_seconds'), 0)}) "
                  f"| {fmt(r.get('cpu_seconds'), 0)} | {fmt(r.get('steal_pct'), 1) if task == 'all' else ''} |")


def means(all_runs):
    """Per policy, over the rounds, the means of the pooled figures, real and simulated."""
    by_policy = {}
    for _, policy, real, sim in all_runs:
        by_policy.setdefault(policy, []).append((real["all"], sim["all"]))
    out = {}
    for policy, pairs in by_policy.items():
        mean = lambda f: statistics.mean(f(p) for p in pairs)
        out[policy] = {
            "rounds": len(pairs),
            "in_slo": mean(lambda p: in_slo(p[0])),
            "late": mean(lambda p: p[0]["slo_violations"]),
            "needless": sum(needless(real, "all") or 0 for _, p, real, _ in all_runs if p == policy),
            "sim_needless": sum(needless(sim, "all") or 0 for _, p, _, sim in all_runs if p == policy),
            "failed": sum(p[0]["failed"] for p in pairs),
            "accuracy": mean(lambda p: p[0]["effective_accuracy"]),
            "core_s": mean(lambda p: p[0].get("core_seconds") or 0.0),
            "cpu_s": mean(lambda p: p[0].get("cpu_seconds") or 0.0),
            "steal": statistics.mean(st) if (st := [p[0]["steal_pct"] for p in pairs if p[0].get("steal_pct") is not None]) else None,
            "sim_in_slo": mean(lambda p: in_slo(p[1])),
            "sim_late": mean(lambda p: p[1]["slo_violations"]),
            "sim_accuracy": mean(lambda p: p[1]["effective_accuracy"]),
            "sim_core_s": mean(lambda p: p[1].get("core_seconds") or 0.0),
        }
    return out


def worst_task(all_runs, policy):
    """The lowest share within the SLO of any task in any round of `policy`."""
    shares = [in_slo(row) for _, p, real, _ in all_runs if p == policy for t, row in real.items() if t != "all"]
    return min(shares) if shares else None


def mean_table(all_runs, table):
    print("| policy | rounds | within SLO % (sim) | worst task's % | late (sim) | needless, all rounds (sim) "
          "| failed | effective accuracy (sim) | core-s (sim) | CPU s | steal % |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for policy in POLICIES:
        if policy not in table:
            continue
        m = table[policy]
        print(f"| {policy} | {m['rounds']} | {m['in_slo']:.2f} ({m['sim_in_slo']:.2f}) "
              f"| {fmt(worst_task(all_runs, policy), 2)} | {m['late']:.0f} ({m['sim_late']:.0f}) "
              f"| {m['needless']} ({m['sim_needless']}) | {m['failed']} "
              f"| {m['accuracy']:.2f} ({m['sim_accuracy']:.2f}) | {m['core_s']:.0f} ({m['sim_core_s']:.0f}) "
              f"| {m['cpu_s']:.0f} | {fmt(m['steal'], 1)} |")


def verdict(all_runs, table):
    """The bars: autoscale's worst task in any round, and from the means over the
    rounds its effective accuracy and core-seconds against the fixed split's."""
    if not all(p in table for p in ("autoscale", "fixed-split")):
        return
    a, fixed = table["autoscale"], table["fixed-split"]
    print()
    print(f"- autoscale's worst task in any round within the SLO: {worst_task(all_runs, 'autoscale'):.2f} % "
          f"(bar: 99 %)")
    print(f"- its effective accuracy {a['accuracy']:.2f} against the fixed split's {fixed['accuracy']:.2f} "
          f"(bar: above), at {a['core_s'] / fixed['core_s']:.2f} times its core-seconds (bar: at most 1; "
          f"simulated {a['sim_core_s'] / fixed['sim_core_s']:.2f})")
    print(f"- needless refusals over all rounds: " + ", ".join(f"{p} {m['needless']}" for p, m in table.items()))
    if "replica-only" in table:
        replica = table["replica-only"]
        late_ratio = replica["late"] / a["late"] if a["late"] > 0 else float("inf")
        print(f"- replica-only's late answers over autoscale's: {late_ratio:.1f}, at "
              f"{a['core_s'] / replica['core_s']:.2f} times replica-only's core-seconds")


def main():
    if sys.argv[1] == "peaks":
        print(json.dumps(peaks(sys.argv[2], float(sys.argv[3])), separators=(",", ":")))
        return
    if sys.argv[1] == "scale":
        print(rate_scale(sys.argv[2], sys.argv[3], float(sys.argv[4])))
        return
    out = Path(sys.argv[1])
    all_runs = list(runs(out))
    table = means(all_runs)
    print("Over the rounds (means; real, and simulated in brackets):")
    print()
    mean_table(all_runs, table)
    verdict(all_runs, table)
    print()
    print("Every run:")
    print()
    run_table(all_runs)


if __name__ == "__main__":
    main()
