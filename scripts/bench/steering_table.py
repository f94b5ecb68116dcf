"""The steering comparison's table (scripts/bench/steering.sh): per family and load, each
decider's effective accuracy, SLO violations, switches after the first 5 s, and share
of the gain above the cheapest variant that the offline optimum takes and that the
oracle takes; then the real runs beside their simulations. Prints Markdown."""

import csv
import json
import sys
from pathlib import Path

SETTLING_S = 5


def summary(run):
    rows = json.loads((run / "summary.json").read_text())
    return next((r for r in rows if r["task"] == "all"), rows[-1])


def timeline(run):
    with open(run / "timeline.csv") as f:
        return [r for r in csv.DictReader(f) if r["active"]]


def settled_switches(run):
    """Changes of the active variant after the first seconds, and the last one."""
    actives = [r["active"] for r in timeline(run) if int(r["second"]) >= SETTLING_S]
    return sum(a != b for a, b in zip(actives, actives[1:])), (actives[-1] if actives else "-")


def share(value, floor, top):
    return "—" if top - floor <= 1e-9 else f"{(value - floor) / (top - floor) * 100:.0f} %"


def main(out):
    root = Path(out)
    print("| family | load | run | eff. accuracy | SLO violations % | switches after 5 s | serving at the end "
          "| share of the optimum's gain | of the oracle's |")
    print("|---|---|---|---:|---:|---:|---|---:|---:|")
    real_rows = []
    for family in sorted(p for p in root.iterdir() if (p / "model.json").is_file()):
        for load in sorted(p for p in family.iterdir() if (p / "slo-predictive" / "optimum").is_dir()):
            runs = {
                "slo-predictive": load / "slo-predictive",
                "cpu-threshold": load / "cpu-threshold",
                "oracle": load / "oracle",
                "optimum": load / "slo-predictive" / "optimum",
                "cheapest": load / "slo-predictive" / "cheapest",
            }
            accuracy = {name: summary(run)["effective_accuracy"] for name, run in runs.items()}
            for name, run in runs.items():
                s = summary(run)
                switches, last = settled_switches(run)
                print(f"| {family.name} | {load.name} | {name} | {s['effective_accuracy']:.2f} "
                      f"| {s['slo_violation_pct']:.2f} | {switches} | {last} "
                      f"| {share(accuracy[name], accuracy['cheapest'], accuracy['optimum'])} "
                      f"| {share(accuracy[name], accuracy['cheapest'], accuracy['oracle'])} |")
            if (load / "real").is_dir():
                real_rows.append((family.name, load.name, load / "real", runs["slo-predictive"]))
    if not real_rows:
        return
    print()
    print("Real runs (in process, real photos) beside their simulations:")
    print()
    print("| family | load | eff. accuracy real | sim | violations % real | sim | switches after 5 s real "
          "| sim | serving at the end real | sim |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---|---|")
    for family, load, real, sim in real_rows:
        r, s = summary(real), summary(sim)
        (rs, rl), (ss, sl) = settled_switches(real), settled_switches(sim)
        print(f"| {family} | {load} | {r['effective_accuracy']:.2f} | {s['effective_accuracy']:.2f} "
              f"| {r['slo_violation_pct']:.2f} | {s['slo_violation_pct']:.2f} | {rs} | {ss} | {rl} | {sl} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/steering")
