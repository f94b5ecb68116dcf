"""The experiment's tables: for each scenario and policy, the real run beside its
simulation (SLO violations, effective accuracy, and the simulator's gap to the real
run), and the oracle (simulated only); then the same against simulations calibrated
on the real runs (batches timed as the sessions ran them). Reads the summary.json
files scripts/experiment.sh wrote; prints Markdown."""

import json
import sys
from pathlib import Path


def pooled(path):
    """The summary over all tasks (the only one for a single task)."""
    rows = json.loads(path.read_text())
    return next((r for r in rows if r["task"] == "all"), rows[-1])


def gap(sim, real):
    if real == 0:
        return "—" if sim == 0 else "n/a"
    return f"{(sim - real) / real * 100:+.0f} %"


def against(real, sim, oracle):
    """The columns every table has: violations and effective accuracy, real beside
    simulated, and the real run over the oracle."""
    return (f"| {real['slo_violation_pct']:.3f} | {sim['slo_violation_pct']:.3f} "
            f"| {gap(sim['slo_violation_pct'], real['slo_violation_pct'])} "
            f"| {real['effective_accuracy']:.2f} | {sim['effective_accuracy']:.2f} "
            f"| {gap(sim['effective_accuracy'], real['effective_accuracy'])} "
            f"| {real['effective_accuracy'] / oracle['effective_accuracy']:.3f} ")


def rows(scenario, sims):
    """(policy, real, simulated) for each real run of the scenario, and the oracle."""
    oracle = pooled(scenario / sims / "oracle" / "summary.json")
    runs = [(run.name, pooled(run / "summary.json"), pooled(scenario / sims / run.name / "summary.json"))
            for run in sorted((scenario / "real").iterdir())]
    return runs, oracle


def main(out):
    root = Path(out)
    print("| scenario | policy | SLO violations % real | sim | gap | eff. accuracy real | sim | gap | "
          "÷ oracle | norm. accuracy real | p99 ms real | switches real | max queue real |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in sorted(p for p in root.iterdir() if (p / "real").is_dir()):
        runs, oracle = rows(scenario, "sim")
        for name, real, sim in runs:
            print(f"| {scenario.name} | {name} {against(real, sim, oracle)}"
                  f"| {real['normalized_accuracy']:.3f} | {real['p99_ms'] or 0:.1f} "
                  f"| {real['variant_switches']} | {real['max_queue_length']} |")
        print(f"| {scenario.name} | oracle (sim) | — | {oracle['slo_violation_pct']:.3f} | | — "
              f"| {oracle['effective_accuracy']:.2f} | | 1.000 | {oracle['normalized_accuracy']:.3f} "
              f"| {oracle['p99_ms'] or 0:.1f} (sim) | {oracle['variant_switches']} (sim) | {oracle['max_queue_length']} (sim) |")
    calibrated(root)
    before_after(root)
    print()
    print("Plots: `<scenario>/real/<policy>/<task>.svg`, `<scenario>/sim/<policy>/<task>.svg` and "
          "`<scenario>/sim-calibrated/<policy>/<task>.svg`; the calibration: `<scenario>/calibration.txt`.")


def calibrated(root):
    """The real runs against simulations on the machine as they found it."""
    scenarios = sorted(p for p in root.iterdir() if (p / "sim-calibrated" / "oracle").is_dir())
    if not scenarios:
        return
    print()
    print("Simulated on the machine as the real runs found it (calibrated):")
    print()
    print("| scenario | policy | SLO violations % real | sim | gap | eff. accuracy real | sim | gap | ÷ oracle |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in scenarios:
        runs, oracle = rows(scenario, "sim-calibrated")
        for name, real, sim in runs:
            print(f"| {scenario.name} | {name} {against(real, sim, oracle)}|")
        print(f"| {scenario.name} | oracle (sim) | — | {oracle['slo_violation_pct']:.3f} | | — "
              f"| {oracle['effective_accuracy']:.2f} | | 1.000 |")


def before_after(root):
    """Each real run beside the same run on the baseline build (BASELINE=...), which
    ran right after it."""
    scenarios = sorted(p for p in root.iterdir() if (p / "baseline").is_dir())
    if not scenarios:
        return
    print()
    print("The same real runs on the baseline build, each right after this build's:")
    print()
    print("| scenario | policy | SLO violations % baseline | this build | eff. accuracy baseline | this build "
          "| p99 ms baseline | this build | refused baseline | this build |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in scenarios:
        for run in sorted((scenario / "baseline").iterdir()):
            before, after = pooled(run / "summary.json"), pooled(scenario / "real" / run.name / "summary.json")
            print(f"| {scenario.name} | {run.name} "
                  f"| {before['slo_violation_pct']:.3f} | {after['slo_violation_pct']:.3f} "
                  f"| {before['effective_accuracy']:.2f} | {after['effective_accuracy']:.2f} "
                  f"| {before['p99_ms'] or 0:.1f} | {after['p99_ms'] or 0:.1f} "
                  f"| {before['rejected']} | {after['rejected']} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "experiments/results")
