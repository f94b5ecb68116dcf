#!/usr/bin/env python3
"""Scores what OCR runs read (read_pages' JSON lines) against the labelled pages, and
the first run's lines against the second's.

A read line is matched to the labelled line whose box overlaps it most (intersection
over union of their bounding rectangles, at least 0.3), each labelled line at most
once. Character accuracy is 1 − (edit distance summed over the labelled lines) /
(their characters), a labelled line no read line matched counting all its characters
wrong, and every read line matching none adding its own length as errors. Spaces
count like any character.

    ocr_accuracy.py DOCUMENTS RUN.jsonl [OTHER.jsonl]
"""
import json
import sys
from pathlib import Path


def distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        previous, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            previous, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, previous + (ca != cb))
    return row[-1]


def rect(quad):
    xs, ys = [p[0] for p in quad], [p[1] for p in quad]
    return min(xs), min(ys), max(xs), max(ys)


def iou(a, b) -> float:
    (ax0, ay0, ax1, ay1), (bx0, by0, bx1, by1) = rect(a), rect(b)
    w, h = min(ax1, bx1) - max(ax0, bx0), min(ay1, by1) - max(ay0, by0)
    if w <= 0 or h <= 0:
        return 0.0
    inter = w * h
    return inter / ((ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter)


def match(want: list, got: list) -> list:
    """For each wanted line, the index of the got line matched to it, or None."""
    pairs = sorted(((iou(w["box"], g["box"]), i, j) for i, w in enumerate(want) for j, g in enumerate(got)), reverse=True)
    taken_w, taken_g, matched = set(), set(), [None] * len(want)
    for overlap, i, j in pairs:
        if overlap < 0.3:
            break
        if i not in taken_w and j not in taken_g:
            taken_w.add(i), taken_g.add(j)
            matched[i] = j
    return matched


def load(path: Path) -> dict:
    return {p["file"]: p["lines"] for p in map(json.loads, open(path))}


def main() -> None:
    documents, run = Path(sys.argv[1]), load(Path(sys.argv[2]))
    other = load(Path(sys.argv[3])) if len(sys.argv) > 3 else None
    labels = [json.loads(line) for line in open(documents / "labels.jsonl")]
    errors = total = exact = lines = same = compared = 0
    for page in labels:
        if page["file"] not in run:
            continue
        want, got = page["lines"], run[page["file"]]
        matched = match(want, got)
        for w, j in zip(want, matched):
            text = got[j]["text"] if j is not None else ""
            errors += distance(w["text"], text)
            total += len(w["text"])
            exact += w["text"] == text
            lines += 1
        errors += sum(len(g["text"]) for j, g in enumerate(got) if j not in matched)
        if other is not None and page["file"] in other:
            theirs = other[page["file"]]
            for j, k in zip(match(got, theirs), range(len(got))):
                compared += 1
                same += j is not None and theirs[j]["text"] == got[k]["text"]
            compared += sum(1 for j in range(len(theirs)) if j not in match(got, theirs))
    pages = sum(1 for p in labels if p["file"] in run)
    print(f"{sys.argv[2]}: {pages} pages, {lines} labelled lines: character accuracy "
          f"{100 * (1 - errors / max(total, 1)):.2f} %, lines exact {100 * exact / max(lines, 1):.1f} %")
    if other is not None:
        print(f"  lines read as {sys.argv[3]} read them: {100 * same / max(compared, 1):.1f} % of {compared}")


if __name__ == "__main__":
    main()
