#!/usr/bin/env python3
"""The table and plot of scripts/bench/steer_ocr.sh: per run (the policy, each detection
variant alone), the share of pages answered within the target, the accuracy of the
pages answered in time, the effective accuracy counting a late or refused page as
read at 0, the pages each variant served and the switches; and the policy's run
plotted: each page's latency against when it was sent, coloured by the detection
variant that served it, refused and late pages in red, the target dashed.

    steer_ocr_table.py OUT SLO_MS     (reads OUT/runs.jsonl, OUT/policy.jsonl)

Writes the Markdown to stdout and OUT/results.svg.
"""
import json
import os
import sys

COLOURS = ["#1b6ca8", "#2e933c", "#8d6a9f", "#e07a1f"]


def svg(pages, slo_ms, path):
    width, height, pad = 640, 340, 55
    answered = [p for p in pages if "latency_ms" in p]
    t_max = max((p["sent_s"] for p in pages), default=1.0) or 1.0
    y_max = max([slo_ms * 1.5] + [p["latency_ms"] for p in answered])
    x = lambda t: pad + t / t_max * (width - 2 * pad)
    y = lambda ms: height - pad - min(ms, y_max) / y_max * (height - 2 * pad)
    variants = sorted({p["variant"] for p in answered if p.get("variant")})
    colour = {v: COLOURS[i % len(COLOURS)] for i, v in enumerate(variants)}
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
             f'<text x="{width / 2}" y="18" text-anchor="middle">read-text under a rising load, steered: latency by detection variant</text>',
             f'<line x1="{pad}" y1="{y(0)}" x2="{width - pad}" y2="{y(0)}" stroke="black"/>',
             f'<line x1="{pad}" y1="{y(0)}" x2="{pad}" y2="{pad}" stroke="black"/>',
             f'<line x1="{pad}" y1="{y(slo_ms)}" x2="{width - pad}" y2="{y(slo_ms)}" stroke="#d1495b" stroke-dasharray="5"/>',
             f'<text x="{width - pad}" y="{y(slo_ms) - 4}" text-anchor="end" fill="#d1495b">target {slo_ms:.0f} ms</text>',
             f'<text x="{width / 2}" y="{height - 12}" text-anchor="middle">seconds (the rate rises throughout)</text>',
             f'<text x="14" y="{height / 2}" transform="rotate(-90 14 {height / 2})" text-anchor="middle">latency, ms</text>']
    for ms in (0, slo_ms / 2, slo_ms):
        parts.append(f'<text x="{pad - 6}" y="{y(ms) + 4}" text-anchor="end">{ms:.0f}</text>')
    for t in range(0, int(t_max) + 1, max(int(t_max) // 6, 1)):
        parts.append(f'<text x="{x(t)}" y="{height - pad + 16}" text-anchor="middle">{t}</text>')
    for p in pages:
        late = "latency_ms" not in p or p["latency_ms"] > slo_ms
        ms = p.get("latency_ms", y_max)
        fill = "#d1495b" if late else colour.get(p.get("variant"), "#999")
        parts.append(f'<circle cx="{x(p["sent_s"]):.1f}" cy="{y(ms):.1f}" r="2.5" fill="{fill}"/>')
    for i, v in enumerate(variants):
        parts.append(f'<text x="{pad + 10 + 110 * i}" y="{pad - 12}" fill="{colour[v]}">● {v}</text>')
    parts.append("</svg>")
    open(path, "w").write("\n".join(parts))


def main():
    out, slo_ms = sys.argv[1], float(sys.argv[2])
    runs = [json.loads(l) for l in open(os.path.join(out, "runs.jsonl"))]
    print("| run | pages | within target | accuracy of pages in time | effective accuracy | pages by variant | variant changes |")
    print("|---|---:|---:|---:|---:|---|---:|")
    for r in runs:
        within = r["within_slo_percent"]
        effective = r["effective_accuracy"] * within / 100
        served = ", ".join(f"{v} {n}" for v, n in sorted(r["variant_pages"].items()))
        print(f"| {r['steering']} | {r['pages']} | {within:.2f} % | {r['effective_accuracy']:.2f} | {effective:.2f} | "
              f"{served} | {r['variant_changes']} |")
    policy = os.path.join(out, "policy.jsonl")
    if os.path.exists(policy):
        svg([json.loads(l) for l in open(policy)], slo_ms, os.path.join(out, "results.svg"))


if __name__ == "__main__":
    main()
