#!/usr/bin/env python3
"""A closed loop of callers reading pages with RapidOCR, as its users run it: one
`RapidOCR()` called from N threads, each sending the next page's bytes as soon as its
last is answered, for S seconds after one warm-up page. Prints one JSON line in
the format of lab/examples/read_load.rs. Runs in RapidOCR's venv
(scripts/setup_rapidocr.sh).

    rapidocr_load.py --callers N --seconds S PAGE...
"""
import argparse
import itertools
import json
import threading
import time

from rapidocr_onnxruntime import RapidOCR

# What RapidOCR's answer times, in the order it gives them.
STAGES = ("detect", "direction", "recognize")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    pages = [open(p, "rb").read() for p in args.pages]
    ocr = RapidOCR()
    ocr(pages[0])  # the sessions' first runs are slow
    counter = itertools.count()
    lock = threading.Lock()
    latencies, lines, finished = [], [0], [0.0]
    stage_s = dict.fromkeys(STAGES, 0.0)
    began = []
    start = threading.Barrier(args.callers, action=lambda: began.append(time.monotonic()))
    failures = []

    def caller() -> None:
        try:
            start.wait()
            end = time.monotonic() + args.seconds
            while time.monotonic() < end:
                page = pages[next(counter) % len(pages)]
                sent = time.monotonic()
                result, elapse = ocr(page)
                took = time.monotonic() - sent
                with lock:
                    latencies.append(took)
                    finished[0] = max(finished[0], sent + took)
                    lines[0] += len(result or [])
                    for stage, took_s in zip(STAGES, elapse or []):
                        stage_s[stage] += took_s
        except Exception as e:  # reported, and the run fails
            failures.append(repr(e))

    threads = [threading.Thread(target=caller) for _ in range(args.callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = finished[0] - began[0] if began and latencies else float("nan")
    if failures:
        raise SystemExit(f"rapidocr_load: {failures[0]}")
    took = sorted(latencies)

    def quantile(q: float) -> float:
        return took[round((len(took) - 1) * q)] * 1e3 if took else float("nan")

    print(json.dumps({
        "system": "rapidocr", "callers": args.callers, "pages": len(took), "lines": lines[0],
        "seconds": elapsed, "pages_per_s": len(took) / elapsed,
        "p50_ms": quantile(0.5), "p99_ms": quantile(0.99),
        "stage_ms_per_page": {k: v * 1e3 / max(len(took), 1) for k, v in stage_s.items()},
    }))


if __name__ == "__main__":
    main()
