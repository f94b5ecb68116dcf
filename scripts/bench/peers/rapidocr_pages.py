#!/usr/bin/env python3
"""Reads labelled pages with RapidOCR (rapidocr-onnxruntime, the same PP-OCRv4 models
on the same ONNX Runtime) and writes what it read in read_pages' format, one JSON line
a page: {"file", "lines": [{"text", "box", "score"}]}. Runs in a venv with RapidOCR
and its dependencies (scripts/setup/rapidocr.sh).

    rapidocr_pages.py DOCUMENTS OUT [--pages N]
"""
import argparse
import json
import sys
from pathlib import Path

from rapidocr_onnxruntime import RapidOCR


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pages", type=int, default=None)
    args = parser.parse_args()
    ocr = RapidOCR()
    pages = [json.loads(line) for line in open(args.documents / "labels.jsonl")][: args.pages]
    with open(args.out, "w") as out:
        for i, page in enumerate(pages):
            result, _ = ocr(str(args.documents / page["file"]))
            lines = [{"text": text, "box": [[float(x), float(y)] for x, y in quad], "score": float(score)}
                     for quad, text, score in (result or [])]
            out.write(json.dumps({"file": page["file"], "lines": lines}) + "\n")
            print(f"\r  {i + 1} pages read", end="", file=sys.stderr)
    print(f"\nrapidocr_pages: {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
