"""The experiment's tables: for each scenario and policy, the real run beside its
simulation (SLO violations, effective accuracy, and the simulator's gap to the real
run), the share of the attainable gain the real run took (its effective accuracy above
the cheapest variant's, over the offline optimum's), and the oracle and the optimum
(simulated only); then the same against simulations calibrated on the real runs
(batches timed as the sessions ran them). Reads the summary.json files
scripts/bench/experiment.sh wrote; prints Markdown."""

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


def share(run, bounds):
    """The share of the attainable gain `run` took: its effective accuracy above the
    cheapest variant's over the optimum's."""
    cheapest, optimum = bounds
    attainable = optimum["effective_accuracy"] - cheapest["effective_accuracy"]
    if attainable <= 1e-9:
        return "—"
    return f"{(run['effective_accuracy'] - cheapest['effective_accuracy']) / attainable * 100:.0f} %"


def against(real, sim, oracle, bounds):
    """The columns every table has: violations and effective accuracy, real beside
    simulated, the real run over the oracle, and its share of the attainable gain."""
    return (f"| {real['slo_violation_pct']:.3f} | {sim['slo_violation_pct']:.3f} "
            f"| {gap(sim['slo_violation_pct'], real['slo_violation_pct'])} "
            f"| {real['effective_accuracy']:.2f} | {sim['effective_accuracy']:.2f} "
            f"| {gap(sim['effective_accuracy'], real['effective_accuracy'])} "
            f"| {real['effective_accuracy'] / oracle['effective_accuracy']:.3f} | {share(real, bounds)} ")


def rows(scenario, sims):
    """(policy, real, simulated) for each real run of the scenario, the oracle, and
    the bounds of the gain (the cheapest variant's run and the optimum's), which
    `simulate --oracle --against-optimum` wrote beside the oracle's."""
    oracle_dir = scenario / sims / "oracle"
    oracle = pooled(oracle_dir / "summary.json")
    bounds = (pooled(oracle_dir / "cheapest" / "summary.json"), pooled(oracle_dir / "optimum" / "summary.json"))
    runs = [(run.name, pooled(run / "summary.json"), pooled(scenario / sims / run.name / "summary.json"))
            for run in sorted((scenario / "real").iterdir())]
    return runs, oracle, bounds


def simulated_rows(scenario, oracle, bounds):
    """The oracle's and the optimum's rows (simulated only)."""
    for name, run in (("oracle", oracle), ("optimum", bounds[1])):
        print(f"| {scenario.name} | {name} (sim) | — | {run['slo_violation_pct']:.3f} | | — "
              f"| {run['effective_accuracy']:.2f} | | {run['effective_accuracy'] / oracle['effective_accuracy']:.3f} "
              f"| {share(run, bounds)} |", end="")
        yield run


def main(out):
    root = Path(out)
    print("| scenario | policy | SLO violations % real | sim | gap | eff. accuracy real | sim | gap | "
          "÷ oracle | share of the attainable gain | norm. accuracy real | p99 ms real | switches real "
          "| max queue real |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in sorted(p for p in root.iterdir() if (p / "real").is_dir()):
        runs, oracle, bounds = rows(scenario, "sim")
        for name, real, sim in runs:
            print(f"| {scenario.name} | {name} {against(real, sim, oracle, bounds)}"
                  f"| {real['normalized_accuracy']:.3f} | {real['p99_ms'] or 0:.1f} "
                  f"| {real['variant_switches']} | {real['max_queue_length']} |")
        for run in simulated_rows(scenario, oracle, bounds):
            print(f" {run['normalized_accuracy']:.3f} | {run['p99_ms'] or 0:.1f} (sim) "
                  f"| {run['variant_switches']} (sim) | {run['max_queue_length']} (sim) |")
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
    print("| scenario | policy | SLO violations % real | sim | gap | eff. accuracy real | sim | gap | ÷ oracle "
          "| share of the attainable gain |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for scenario in scenarios:
        runs, oracle, bounds = rows(scenario, "sim-calibrated")
        for name, real, sim in runs:
            print(f"| {scenario.name} | {name} {against(real, sim, oracle, bounds)}|")
        for _ in simulated_rows(scenario, oracle, bounds):
            print()


def before_after(root):
    """Each real run beside the same run on the baseline build (BASELINE=...), which
    ran right after it."""
    scenarios = sorted(p for p in root.iterdir() if (p / "baseline").is_dir())
    if not scenarios:
        return
    print()
    print("The same real runs on the baseline build with its own policy modules, each right after this build's:")
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
