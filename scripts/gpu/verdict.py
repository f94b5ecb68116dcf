"""The GPU check's figures and the bars they are judged by (issue 59's "Done when").

Usage: python3 scripts/gpu/verdict.py WORK_DIR   (the folder scripts/gpu/check.sh wrote)

Reads each run's `summary.json`, the profile's table (`prof.log`) and sweep
(`resnet50.profile.json`), the fp16 copy's report (`fp16.log`), PyTorch eager's
figures (`torch.json`) and the transfer's (`h2d.json`); prints one table of the runs,
the sweep beside the fit, and one table of the bars, each with its figure and whether
it holds; a ratio within 10 % of its bar, either side, is marked for a rerun, and the
last line names the steps that rerun takes (`ONLY=... bash scripts/gpu/check.sh`).
Standard library only: it runs with the GPU machine's Python.
"""
import json
import os
import re
import sys

RUNS = ["in1", "in16", "in64", "fp16_64", "grpc16", "grpc64", "admit80", "heur16", "nopad16", "warmall16", "ts1",
        "ts64", "in64_pinned", "in64_two", "in64_nhwc", "in1_graph", "in64_graph"]


def run(work, name):
    try:
        with open(os.path.join(work, name, "summary.json")) as f:
            return json.load(f)[0]
    except (OSError, ValueError, IndexError):
        return None


def profile_row(work, variant):
    """The profile table's row of `variant`, by column name."""
    try:
        lines = open(os.path.join(work, "prof.log")).read().splitlines()
    except OSError:
        return None
    cells = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]
    header = next((cells(l) for l in lines if l.startswith("| variant |")), None)
    row = next((cells(l) for l in lines if l.startswith(f"| {variant} |")), None)
    return dict(zip(header, row)) if header and row else None


def plain_line(points):
    """The plain least-squares line through (x, y) points, which the largest batches
    pull: what the stored fit (least relative error) is weighed against. (a, c) or None."""
    n = len(points)
    if n < 2:
        return None
    mx, my = sum(x for x, _ in points) / n, sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    if sxx <= 0:
        return None
    a = sum((x - mx) * (y - my) for x, y in points) / sxx
    return a, my - a * mx


def sweep_table(work, fit):
    """Each swept batch size's warm p50 from the stored profile, beside what the stored
    fit and a plain least-squares line through the same points price it at: how far
    each is from the curve where it bends."""
    try:
        points = [(p["batch_size"], p["warm_p50_ms"])
                  for p in json.load(open(os.path.join(work, "resnet50.profile.json")))["points"]]
    except (OSError, ValueError, KeyError, TypeError):
        return
    fits = [f for f in (fit, plain_line(points)) if f and None not in f]
    print("\n| batch | warm p50 ms | " + " | ".join(f"{a:.3f}·n + {c:.3f} ÷ measured" for a, c in fits) + " |")
    print("|---:|---:|" + "---:|" * len(fits))
    for n, ms in points:
        print(f"| {n} | {ms:.3f} | " + " | ".join(f"{(a * n + c) / ms:.3f}" for a, c in fits) + " |")


def number(text):
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def main(work):
    runs = {name: run(work, name) for name in RUNS}
    print("| run | answers/s | p50 ms | p99 ms | late % | refused | compute ms | queue ms |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in runs.items():
        if r is None:
            print(f"| {name} | no result |||||||")
            continue
        stages = r.get("stages") or {}
        print(f"| {name} | {r['throughput_per_s']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} | "
              f"{r['slo_violation_pct']:.2f} | {r['rejected']} of {r['sent']} | "
              f"{stages.get('compute_ms', 0):.2f} | {stages.get('queue_ms', 0):.2f} |")

    try:
        torch = json.load(open(os.path.join(work, "torch.json")))
    except (OSError, ValueError):
        torch = {}
    fp16_log = open(os.path.join(work, "fp16.log")).read() if os.path.exists(os.path.join(work, "fp16.log")) else ""
    agreement = re.search(r"top-1 agreement with `resnet50` ([\d.]+) %", fp16_log)
    prof = profile_row(work, "resnet50") or {}

    bars = []  # (what, measured, bar, higher is better, the steps that measure it); a ratio's name holds "÷"

    def per_s(name):
        return runs[name]["throughput_per_s"] if runs.get(name) else None

    for callers in (16, 64):
        grpc, local = runs.get(f"grpc{callers}"), per_s(f"in{callers}")
        if grpc and local:
            bars.append((f"gRPC {callers} ÷ in process {callers}, answers/s", grpc["throughput_per_s"] / local, 0.9, True,
                         [f"in{callers}", f"grpc{callers}"]))
        if grpc:
            bars.append((f"gRPC {callers}: p99 ms", grpc["p99_ms"], 100.0, False, [f"grpc{callers}"]))
            bars.append((f"gRPC {callers}: late %", grpc["slo_violation_pct"], 1.0, False, [f"grpc{callers}"]))
    if per_s("in64") and torch.get("resnet50 b64"):
        bars.append(("in process 64 ÷ PyTorch eager b64, images/s", per_s("in64") / torch["resnet50 b64"], 1.0, True,
                     ["in64", "torch"]))
    for other in ("in64_pinned", "in64_two", "in64_nhwc", "in64_graph"):
        if per_s(other) and torch.get("resnet50 b64"):
            bars.append((f"{other} ÷ PyTorch eager b64 (settings to choose)", per_s(other) / torch["resnet50 b64"], 1.0,
                         True, [other, "torch"]))
    if per_s("fp16_64") and per_s("in64"):
        bars.append(("fp16 at 64 ÷ fp32 at 64, answers/s", per_s("fp16_64") / per_s("in64"), 2.0, True,
                     ["in64", "fp16_64"]))
    if agreement:
        bars.append(("fp16 top-1 agreement with fp32, %", float(agreement.group(1)), 99.0, True, ["fp16"]))
    if runs.get("in1") and torch.get("resnet50 b1"):
        bars.append(("in process 1: p50 ms ÷ PyTorch eager b1 ms", runs["in1"]["p50_ms"] * torch["resnet50 b1"] / 1e3,
                     1.0, False, ["in1", "torch"]))
    if runs.get("in1_graph") and torch.get("resnet50 b1"):
        bars.append(("in1_graph: p50 ms ÷ PyTorch eager b1 ms (settings to choose)",
                     runs["in1_graph"]["p50_ms"] * torch["resnet50 b1"] / 1e3, 1.0, False, ["in1_graph", "torch"]))
    r2, a, c = number(prof.get("R²")), number(prof.get("a ms/row")), number(prof.get("c ms"))
    if r2 is not None:
        bars.append(("profile: R²", r2, 0.99, True, ["profile"]))
    if a is not None and c is not None and runs.get("in1"):
        measured = runs["in1"]["stages"]["compute_ms"]
        bars.append(("profile: |fit's b1 / compute at 1 caller − 1|", abs((a + c) / measured - 1), 0.2, False,
                     ["profile", "in1"]))
    if runs.get("admit80"):
        r = runs["admit80"]
        bars.append((f"open loop at 80 % of {prof.get('max req/s', '?')}/s: refused", r["rejected"], 0, False,
                     ["admit80"]))

    sweep_table(work, (a, c))
    try:
        h2d = json.load(open(os.path.join(work, "h2d.json")))
        print(f"\nA batch of 64 to the GPU: {h2d['pageable ms']} ms from pageable memory, {h2d['pinned ms']} ms from pinned.")
    except (OSError, ValueError, KeyError):
        pass

    print("\n| bar | measured | needs | holds |")
    print("|---|---:|---:|---|")
    rerun = []
    for what, measured, bar, higher, steps in bars:
        holds = measured >= bar if higher else measured <= bar
        close = "÷" in what and abs(measured / bar - 1) < 0.1
        verdict = ("yes" if holds else "**no**") + (" (within 10 %: rerun once)" if close else "")
        sign = "≥" if higher else "≤"
        print(f"| {what} | {measured:.4g} | {sign} {bar:g} | {verdict} |")
        if close:
            rerun += [step for step in steps if step not in rerun]
    if rerun:
        print(f'\nTo rerun once what is within 10 % of its bar: ONLY="{" ".join(rerun)}" bash scripts/gpu/check.sh "$OUT"')


if __name__ == "__main__":
    main(sys.argv[1])
