#!/usr/bin/env python3
"""Copies labelled pages with each moved one pixel to the right (a column of the
page's corner colour added on the left) and their labels' boxes moved alike: how
much a reader's lines change when the page moves by a pixel is how far two readers
of the same models can be expected to agree.

    shift_pages.py DOCUMENTS OUT [--pages N]
"""
import argparse
import json
from pathlib import Path

from PIL import Image


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("documents", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--pages", type=int, default=None)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    pages = [json.loads(line) for line in open(args.documents / "labels.jsonl")][: args.pages]
    with open(args.out / "labels.jsonl", "w") as labels:
        for page in pages:
            image = Image.open(args.documents / page["file"]).convert("RGB")
            moved = Image.new("RGB", (image.width + 1, image.height), image.getpixel((0, 0)))
            moved.paste(image, (1, 0))
            moved.save(args.out / page["file"])
            for line in page["lines"]:
                line["box"] = [[x + 1, y] for x, y in line["box"]]
            labels.write(json.dumps(page) + "\n")
    print(f"shift_pages: {len(pages)} pages in {args.out}")


if __name__ == "__main__":
    main()
