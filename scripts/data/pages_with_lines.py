#!/usr/bin/env python3
"""The labelled pages of LINES lines among the first 40 (scripts/data/gen_documents.py
gives them 1, 5, 10, 25, 1, … lines), as paths on one line, for the OCR benchmarks.

    pages_with_lines.py DOCUMENTS LINES
"""
import json
import sys

docs, lines = sys.argv[1], int(sys.argv[2])
pages = [json.loads(line) for line in open(f"{docs}/labels.jsonl")][:40]
print(" ".join(f"{docs}/{p['file']}" for p in pages if len(p["lines"]) == lines))
