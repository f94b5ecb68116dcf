#!/usr/bin/env python3
"""The table and plot of scripts/bench/split.sh, as seed 004 draws its two-stage
pipeline: per lines per page, fused and split, throughput at the most callers and
latency at one caller split into detection, recognition and the rest (split: the
broker, Redis streams and the waits for a worker; fused: the glue between stages),
with the rest's share of the latency.

    split_table.py OUT      (reads OUT/runs.jsonl; writes OUT/results.svg)

Writes the Markdown to stdout.
"""
import json
import os
import sys

PARTS = [("detect_ms", "detection", "#1b6ca8"), ("recognise_ms", "recognition", "#2e933c"),
         ("other_ms", "broker / glue", "#d1495b")]


def svg(rows, path):
    """Left: zero-load latency stacked by part, fused and split side by side per page
    size; right: throughput, fused and split, against lines per page."""
    width, height, pad = 760, 340, 50
    half = width / 2
    sizes = sorted({r["page_lines"] for r in rows.values()})
    top = max(r["mean_ms"] for (l, m, c), r in rows.items() if c == 1) * 1.15
    thr_top = max(r["pages_per_s"] for (l, m, c), r in rows.items() if c > 1) * 1.2
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<text x="{half / 2}" y="18" text-anchor="middle">latency at one caller, ms (F fused, S split)</text>',
             f'<text x="{half * 1.5}" y="18" text-anchor="middle">throughput, pages/s</text>']
    y = lambda v, t: height - pad - v / t * (height - 2 * pad)
    bar = (half - 2 * pad) / (len(sizes) * 3)
    for i, lines in enumerate(sizes):
        for j, mode in enumerate(("fused", "split")):
            r = rows.get((lines, mode, 1))
            if not r:
                continue
            x0, base = pad + (3 * i + j) * bar, 0.0
            for key, _, colour in PARTS:
                v = r[key]
                parts.append(f'<rect x="{x0:.1f}" y="{y(base + v, top):.1f}" width="{bar - 2:.1f}" '
                             f'height="{y(base, top) - y(base + v, top):.1f}" fill="{colour}"/>')
                base += v
            parts.append(f'<text x="{x0 + bar / 2:.1f}" y="{height - pad + 14}" text-anchor="middle">{mode[0].upper()}</text>')
        parts.append(f'<text x="{pad + (3 * i + 1) * bar:.1f}" y="{height - pad + 30}" text-anchor="middle">{lines} lines</text>')
    for k, (_, name, colour) in enumerate(PARTS):
        parts.append(f'<text x="{pad + 120 * k}" y="{pad - 20}" fill="{colour}">■ {name}</text>')
    x = lambda i: half + pad + i * (half - 2 * pad) / max(len(sizes) - 1, 1)
    for mode, colour in (("fused", "#1b6ca8"), ("split", "#d1495b")):
        points = [(x(i), y(r["pages_per_s"], thr_top)) for i, l in enumerate(sizes)
                  for (l2, m, c), r in rows.items() if l2 == l and m == mode and c > 1]
        if points:
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" points="{" ".join(f"{a:.1f},{b:.1f}" for a, b in points)}"/>')
            parts.append(f'<text x="{points[-1][0] - 4}" y="{points[-1][1] - 8}" text-anchor="end" fill="{colour}">{mode}</text>')
    for i, lines in enumerate(sizes):
        parts.append(f'<text x="{x(i):.1f}" y="{height - pad + 14}" text-anchor="middle">{lines}</text>')
    parts.append(f'<text x="{half * 1.5}" y="{height - pad + 30}" text-anchor="middle">lines per page</text>')
    parts.append(f'<line x1="{half + pad}" y1="{y(0, thr_top)}" x2="{width - pad}" y2="{y(0, thr_top)}" stroke="black"/>')
    parts.append(f'<text x="{half + pad - 4}" y="{y(thr_top / 1.2, thr_top) + 4}" text-anchor="end">{thr_top / 1.2:.1f}</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts))


def main():
    out = sys.argv[1]
    rows = {}
    for line in open(os.path.join(out, "runs.jsonl")):
        r = json.loads(line)
        rows[(r["page_lines"], r["mode"], r["callers"])] = r
    most = max(c for _, _, c in rows)
    print(f"| lines/page | mode | pages/s at {most} callers | latency at 1 caller, ms | detection | recognition | broker (split) / glue (fused) | its share |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for lines in sorted({l for l, _, _ in rows}):
        for mode in ("fused", "split"):
            one, busy = rows.get((lines, mode, 1)), rows.get((lines, mode, most))
            if not one or not busy:
                continue
            share = one["other_ms"] / one["mean_ms"] * 100 if one["mean_ms"] else 0.0
            print(f"| {lines} | {mode} | {busy['pages_per_s']:.2f} | {one['mean_ms']:.0f} | {one['detect_ms']:.0f} | "
                  f"{one['recognise_ms']:.0f} | {one['other_ms']:.0f} | {share:.1f} % |")
    svg(rows, os.path.join(out, "results.svg"))


if __name__ == "__main__":
    main()
