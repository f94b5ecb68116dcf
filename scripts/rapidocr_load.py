#!/usr/bin/env python3
"""A closed loop of callers reading pages with RapidOCR, as its users run it: one
`RapidOCR()` called from N threads, each sending the next page's bytes as soon as its
last is answered, for S seconds after one warm-up page. Prints one JSON line in
the format of lab/examples/read_load.rs. Runs in RapidOCR's venv
(scripts/setup_rapidocr.sh).

    rapidocr_load.py --callers N --seconds S PAGE...
"""
import argparse
import json

from rapidocr_onnxruntime import RapidOCR

from closed_loop import STAGES, closed_loop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    pages = [open(p, "rb").read() for p in args.pages]
    ocr = RapidOCR()
    ocr(pages[0])  # the sessions' first runs are slow

    def read(page):
        result, elapse = ocr(page)
        # RapidOCR's answer times its stages in the order STAGES names them.
        return len(result or []), dict(zip(STAGES, elapse or []))

    print(json.dumps(closed_loop("rapidocr", args.callers, args.seconds, pages, read)))


if __name__ == "__main__":
    main()
