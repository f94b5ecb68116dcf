#!/usr/bin/env python3
"""A closed loop of callers reading pages with RapidOCR, as its users run it: one
`RapidOCR()` called from N threads, each sending the next page's bytes as soon as its
last is answered, for S seconds after one warm-up page. Prints one JSON line in
the format of lab/examples/read_load.rs. Runs in RapidOCR's venv
(scripts/setup/rapidocr.sh).

    rapidocr_load.py --callers N --seconds S PAGE...
"""
import json

from rapidocr_onnxruntime import RapidOCR

from closed_loop import STAGES, closed_loop, load_arguments


def main() -> None:
    args, pages = load_arguments(__doc__)
    ocr = RapidOCR()
    ocr(pages[0])  # the sessions' first runs are slow

    def read(page):
        result, elapse = ocr(page)
        # RapidOCR's answer times its stages in the order STAGES names them.
        return len(result or []), dict(zip(STAGES, elapse or []))

    print(json.dumps(closed_loop("rapidocr", args.callers, args.seconds, pages, read)))


if __name__ == "__main__":
    main()
