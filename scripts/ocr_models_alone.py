#!/usr/bin/env python3
"""The three OCR models alone: about the most pages a second that any server of them
can read on this machine. Each page's model inputs are recorded once as RapidOCR
makes them (its detection input, its direction batches, its recognition batches of
six lines), then replayed from N threads in a closed loop for S seconds with nothing
in between: no decoding, resizing, cutting or text decoding. The replay's sessions
are ONNX Runtime's defaults (memory arena on, one intra-op thread a core), not
RapidOCR's (arena off), which cost it time of their own. Prints one JSON line in the
format of lab/examples/read_load.rs (system "models"). Runs in RapidOCR's venv
(scripts/setup_rapidocr.sh).

    ocr_models_alone.py --callers N --seconds S PAGE...
"""
import argparse
import itertools
import json
import threading
import time

import onnxruntime
from rapidocr_onnxruntime import RapidOCR

STAGES = ("detect", "direction", "recognize")


class Recorder:
    """Stands in for an ONNX Runtime session: runs it and keeps what it was fed."""

    def __init__(self, session, stage, runs):
        self.session, self.stage, self.runs = session, stage, runs

    def run(self, outputs, feed):
        self.runs.append((self.stage, self.session, outputs, feed))
        return self.session.run(outputs, feed)

    def __getattr__(self, name):
        return getattr(self.session, name)


def recorded_runs(ocr, pages):
    """Each page's model runs, in the order RapidOCR makes them."""
    runs = []
    infers = {"detect": ocr.text_det.infer, "direction": ocr.text_cls.infer, "recognize": ocr.text_rec.session}
    for stage, infer in infers.items():
        infer.session = Recorder(infer.session, stage, runs)
    per_page = []
    for page in pages:
        runs.clear()
        ocr(page)
        per_page.append(list(runs))
    for infer in infers.values():
        infer.session = infer.session.session
    fresh = {}
    for runs in per_page:
        for i, (stage, session, outputs, feed) in enumerate(runs):
            if session._model_path not in fresh:
                options = onnxruntime.SessionOptions()
                # Three sessions, three thread pools: spinning, one's idle threads
                # take the cores from the next one's.
                options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                fresh[session._model_path] = onnxruntime.InferenceSession(
                    session._model_path, options, providers=["CPUExecutionProvider"])
            runs[i] = (stage, fresh[session._model_path], outputs, feed)
    for runs in per_page:  # a session's first run at a shape is slow
        for _, session, outputs, feed in runs:
            session.run(outputs, feed)
    return per_page


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--callers", type=int, default=1)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("pages", nargs="+")
    args = parser.parse_args()
    ocr = RapidOCR()
    pages = recorded_runs(ocr, [open(p, "rb").read() for p in args.pages])
    counter = itertools.count()
    lock = threading.Lock()
    latencies, finished, lines = [], [0.0], [0]
    stage_s = dict.fromkeys(STAGES, 0.0)
    began = []
    start = threading.Barrier(args.callers, action=lambda: began.append(time.monotonic()))

    def caller() -> None:
        start.wait()
        end = time.monotonic() + args.seconds
        while time.monotonic() < end:
            runs = pages[next(counter) % len(pages)]
            sent = time.monotonic()
            spent = dict.fromkeys(STAGES, 0.0)
            for stage, session, outputs, feed in runs:
                at = time.monotonic()
                session.run(outputs, feed)
                spent[stage] += time.monotonic() - at
            took = time.monotonic() - sent
            with lock:
                latencies.append(took)
                finished[0] = max(finished[0], sent + took)
                lines[0] += sum(len(next(iter(feed.values()))) for stage, _, _, feed in runs if stage == "recognize")
                for stage, s in spent.items():
                    stage_s[stage] += s

    threads = [threading.Thread(target=caller) for _ in range(args.callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = sorted(latencies)
    elapsed = finished[0] - began[0]

    def quantile(q: float) -> float:
        return took[round((len(took) - 1) * q)] * 1e3

    print(json.dumps({
        "system": "models", "callers": args.callers, "pages": len(took), "lines": lines[0],
        "seconds": elapsed, "pages_per_s": len(took) / elapsed,
        "p50_ms": quantile(0.5), "p99_ms": quantile(0.99),
        "stage_ms_per_page": {k: v * 1e3 / max(len(took), 1) for k, v in stage_s.items()},
    }))


if __name__ == "__main__":
    main()
