"""The closed loop of the OCR load scripts (rapidocr_load.py, ocr_models_alone.py):
N threads, each sending the next page as soon as its last is answered, for S
seconds, summed up in the JSON of lab/examples/read_load.rs."""
import argparse
import itertools
import threading
import time

# The stages a page's time is split into, in the order they run.
STAGES = ("detect", "direction", "recognize")


def load_arguments(doc: str):
    """`--callers N --seconds S PAGE...` read for a script described by `doc`: the
    arguments, and the pages' bytes."""
    parser = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    return args, [open(p, "rb").read() for p in args.pages]


def closed_loop(system: str, callers: int, seconds: float, pages: list, read) -> dict:
    """Runs `read(page)`, which answers (lines read, {stage: seconds}), from `callers`
    threads over `pages` in turn; raises SystemExit with the first failure."""
    counter = itertools.count()
    lock = threading.Lock()
    latencies, lines, finished = [], [0], [0.0]
    stage_s = dict.fromkeys(STAGES, 0.0)
    began, failures = [], []
    start = threading.Barrier(callers, action=lambda: began.append(time.monotonic()))

    def caller() -> None:
        try:
            start.wait()
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                page = pages[next(counter) % len(pages)]
                sent = time.monotonic()
                read_lines, spent = read(page)
                took = time.monotonic() - sent
                with lock:
                    latencies.append(took)
                    finished[0] = max(finished[0], sent + took)
                    lines[0] += read_lines
                    for stage, s in spent.items():
                        stage_s[stage] += s
        except Exception as e:  # reported, and the run fails
            failures.append(repr(e))

    threads = [threading.Thread(target=caller) for _ in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failures:
        raise SystemExit(f"{system}: {failures[0]}")
    took = sorted(latencies)
    elapsed = finished[0] - began[0] if began and took else float("nan")

    def quantile(q: float) -> float:
        return took[round((len(took) - 1) * q)] * 1e3 if took else float("nan")

    return {
        "system": system, "callers": callers, "pages": len(took), "lines": lines[0],
        "seconds": elapsed, "pages_per_s": len(took) / elapsed,
        "p50_ms": quantile(0.5), "p99_ms": quantile(0.99),
        "stage_ms_per_page": {k: v * 1e3 / max(len(took), 1) for k, v in stage_s.items()},
    }
