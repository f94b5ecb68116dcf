#!/usr/bin/env python3
"""The table and plot of scripts/bench/images.sh: per round, each run's throughput and
p99, and the ratios the benchmark is about (image-fed / tensor-fed, modelless / the
Python peer), each a ratio of runs in the same round; then their median over rounds,
and where an image request's time went.

Usage: images_table.py OUT [--variant V] [--concurrency N]
Writes the Markdown to stdout and OUT/results.svg.
"""
import argparse
import glob
import json
import os
import statistics

SIZES = ("medium", "large")


def read_round(folder: str) -> dict:
    """run name -> {throughput, p99, stages}."""
    runs = {}
    for summary in glob.glob(os.path.join(folder, "modelless-*", "summary.json")):
        name = os.path.basename(os.path.dirname(summary))
        s = json.load(open(summary))[0]
        runs[name] = {"throughput": s["throughput_per_s"], "p99": s["p99_ms"], "stages": s.get("stages"),
                      "failed": s["sent"] - s["completed"]}
    for peer in glob.glob(os.path.join(folder, "peer-*.json")):
        p = json.load(open(peer))
        runs[os.path.basename(peer)[:-5]] = {"throughput": p["throughput_per_s"], "p99": p["p99_ms"],
                                             "stages": p["stage_ms"], "failed": 0}
    return runs


def ratios(runs: dict) -> dict:
    out = {}
    for size in SIZES:
        image, tensors, peer = runs.get(f"modelless-{size}"), runs.get("modelless-tensors"), runs.get(f"peer-{size}")
        if image and tensors:
            out[f"{size}: image / tensor-fed"] = image["throughput"] / tensors["throughput"]
        if image and peer:
            out[f"{size}: modelless / peer"] = image["throughput"] / peer["throughput"]
            out[f"{size}: p99 modelless / peer"] = image["p99"] / peer["p99"]
    return out


TARGETS = {"medium: image / tensor-fed": 0.85, "large: image / tensor-fed": 0.5,
           "medium: modelless / peer": 1.5, "large: modelless / peer": 3.0}


def svg(medians: dict, path: str, title: str) -> None:
    names = list(medians)
    width, height, pad, bar = 900, 380, 60, 0
    top = max(medians.values()) * 1.15
    bar = (width - 2 * pad) / len(names)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height + 60}" '
             'font-family="sans-serif" font-size="12">', '<rect width="100%" height="100%" fill="white"/>',
             f'<text x="{width / 2}" y="22" text-anchor="middle" font-size="15">{title}</text>']
    colours = {"modelless-tensors": "#7f7f7f", "modelless": "#1f77b4", "peer": "#ff7f0e"}
    for i, name in enumerate(names):
        value = medians[name]
        h = value / top * (height - 2 * pad)
        x = pad + i * bar + 8
        colour = colours.get(name, colours["peer" if name.startswith("peer") else "modelless"])
        parts.append(f'<rect x="{x:.1f}" y="{height - pad - h:.1f}" width="{bar - 16:.1f}" height="{h:.1f}" '
                     f'fill="{colour}"/>')
        parts.append(f'<text x="{x + (bar - 16) / 2:.1f}" y="{height - pad - h - 4:.1f}" '
                     f'text-anchor="middle">{value:.1f}/s</text>')
        parts.append(f'<text x="{x + (bar - 16) / 2:.1f}" y="{height - pad + 16:.1f}" '
                     f'text-anchor="middle">{name}</text>')
    parts.append(f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" y2="{height - pad}" stroke="black"/>')
    parts.append(f'<text x="{pad}" y="{height - pad + 40}">answers per second, median over rounds</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("--variant", default="efficientnet-lite0")
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    rounds = sorted(glob.glob(os.path.join(args.out, "round*")), key=lambda p: int(p.rsplit("round", 1)[1]))
    per_round = [read_round(r) for r in rounds]
    names = ["modelless-tensors"] + [f"{who}-{size}" for size in SIZES for who in ("modelless", "peer")]

    print(f"# Images at concurrency {args.concurrency}, {args.variant}, {len(rounds)} interleaved rounds\n")
    print("| round | " + " | ".join(f"{n} /s (p99 ms)" for n in names) + " |")
    print("|---:|" + "---:|" * len(names))
    for i, runs in enumerate(per_round, 1):
        cells = [f"{runs[n]['throughput']:.1f} ({runs[n]['p99']:.0f})" if n in runs else "-" for n in names]
        print(f"| {i} | " + " | ".join(cells) + " |")
    failed = sum(r["failed"] for runs in per_round for r in runs.values())
    print(f"\nRequests not answered, all runs: {failed}.\n")

    all_ratios = [ratios(runs) for runs in per_round]
    print("| ratio (same round) | " + " | ".join(f"round {i}" for i in range(1, len(rounds) + 1))
          + " | median | target |")
    print("|---|" + "---:|" * (len(rounds) + 2))
    for key in all_ratios[0] if all_ratios else []:
        values = [r[key] for r in all_ratios if key in r]
        target = TARGETS.get(key)
        mark = "" if target is None else (f"≥ {target} " + ("met" if statistics.median(values) >= target else "NOT met"))
        if key.startswith(tuple(f"{s}: p99" for s in SIZES)):
            mark = "< 1 " + ("met" if statistics.median(values) < 1 else "NOT met")
        print(f"| {key} | " + " | ".join(f"{v:.2f}" for v in values) + f" | {statistics.median(values):.2f} | {mark} |")

    print("\nWhere an image request's time went (mean ms, last round):\n")
    last = per_round[-1] if per_round else {}
    print("| run | decode | preprocess | queue | compute |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        stages = last.get(name, {}).get("stages")
        if stages:
            get = lambda k: stages.get(f"{k}_ms", stages.get(k))
            cells = [f"{get(k):.2f}" if get(k) is not None else "-" for k in ("decode", "preprocess", "queue", "compute")]
            print(f"| {name} | " + " | ".join(cells) + " |")
    medians = {n: statistics.median([r[n]["throughput"] for r in per_round if n in r])
               for n in names if any(n in r for r in per_round)}
    if medians:
        svg(medians, os.path.join(args.out, "results.svg"),
            f"{args.variant}, concurrency {args.concurrency}: image-fed vs tensor-fed vs Python glue")


if __name__ == "__main__":
    main()
