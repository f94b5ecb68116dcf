#!/usr/bin/env python3
"""The table and plot of scripts/bench/ocr.sh: per page size and callers, each
system's throughput (median over rounds), modelless's ratio to RapidOCR's, the
models alone's (the most any server could read), p50 and p99 latency, and where a
page's time goes by stage.

    ocr_table.py OUT      (reads OUT/runs.jsonl; writes OUT/results.svg)

Writes the Markdown to stdout.
"""
import json
import os
import statistics
import sys
from collections import defaultdict


def median(runs, key):
    return statistics.median(r[key] for r in runs)


def svg(cells, bounds, path):
    """Throughput ratio (modelless / RapidOCR) against lines per page, one line per
    number of callers; dashed, the models alone's ratio to RapidOCR."""
    width, height, pad = 560, 320, 50
    xs = sorted({lines for lines, _ in cells})
    callers = sorted({c for _, c in cells})
    ratios = [cells[k] for k in cells] + [bounds[k] for k in bounds]
    top = max(2.2, max(ratios) * 1.1)
    x = lambda i: pad + i * (width - 2 * pad) / max(len(xs) - 1, 1)
    y = lambda v: height - pad - v / top * (height - 2 * pad)
    colours = ["#1b6ca8", "#d1495b", "#2e933c", "#8d6a9f"]
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<text x="{width / 2}" y="18" text-anchor="middle">modelless / RapidOCR throughput (dashed: the models alone / RapidOCR)</text>',
             f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="black"/>',
             f'<line x1="{pad}" y1="{y(0)}" x2="{pad}" y2="{pad}" stroke="black"/>']
    for v in (1.0, 2.0):
        parts.append(f'<line x1="{pad}" y1="{y(v)}" x2="{width - pad}" y2="{y(v)}" stroke="#999" stroke-dasharray="4"/>')
        parts.append(f'<text x="{pad - 6}" y="{y(v) + 4}" text-anchor="end">{v:.0f}×</text>')
    for i, lines in enumerate(xs):
        parts.append(f'<text x="{x(i)}" y="{height - pad + 18}" text-anchor="middle">{lines}</text>')
    for n, c in enumerate(callers):
        points = [(x(i), y(cells[(lines, c)])) for i, lines in enumerate(xs) if (lines, c) in cells]
        colour = colours[n % len(colours)]
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in points)}"/>')
        parts.append(f'<text x="{width - pad + 4}" y="{points[-1][1] + 4}" fill="{colour}">{c} callers</text>')
        dashed = [(x(i), y(bounds[(lines, c)])) for i, lines in enumerate(xs) if (lines, c) in bounds]
        if dashed:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1.5" stroke-dasharray="5,3" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in dashed)}"/>')
    parts.append(f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle">lines per page</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts))


def main():
    out = sys.argv[1]
    runs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl"))]
    by = defaultdict(list)
    for r in runs:
        by[(r["page_lines"], r["callers"], r["system"])].append(r)
    keys = sorted({(l, c) for l, c, _ in by})
    print("| lines/page | callers | modelless pages/s | RapidOCR pages/s | ratio | models alone pages/s | models alone / RapidOCR | p50 ms modelless / RapidOCR | p99 ms modelless / RapidOCR | rec. batch |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    cells, bounds = {}, {}
    for lines, callers in keys:
        ours, theirs = by.get((lines, callers, "modelless")), by.get((lines, callers, "rapidocr"))
        if not ours or not theirs:
            continue
        ratio = median(ours, "pages_per_s") / median(theirs, "pages_per_s")
        cells[(lines, callers)] = ratio
        alone = by.get((lines, callers, "models"))
        if alone:
            bounds[(lines, callers)] = median(alone, "pages_per_s") / median(theirs, "pages_per_s")
        bound = f"{median(alone, 'pages_per_s'):.2f} | {median(alone, 'pages_per_s') / median(theirs, 'pages_per_s'):.2f}" if alone else "– | –"
        print(f"| {lines} | {callers} | {median(ours, 'pages_per_s'):.2f} | {median(theirs, 'pages_per_s'):.2f} | "
              f"{ratio:.2f} | {bound} | {median(ours, 'p50_ms'):.0f} / {median(theirs, 'p50_ms'):.0f} | "
              f"{median(ours, 'p99_ms'):.0f} / {median(theirs, 'p99_ms'):.0f} | "
              f"{median(ours, 'recognition_batch_mean'):.1f} |")
    print()
    print("Time per page by stage at 1 caller, ms (detect / direction / recognize):")
    print()
    for lines in sorted({l for l, _ in keys}):
        row = []
        for system in ("modelless", "rapidocr", "models"):
            one = by.get((lines, 1, system))
            if one:
                stages = one[0]["stage_ms_per_page"]
                row.append(f"{system} {stages['detect']:.0f} / {stages['direction']:.0f} / {stages['recognize']:.0f}")
        print(f"- {lines} lines: " + "; ".join(row))
    if cells:
        svg(cells, bounds, os.path.join(out, "results.svg"))


if __name__ == "__main__":
    main()
