#!/usr/bin/env python3
"""The three OCR models alone: about the most pages a second that any server of them
can read on this machine. Each page's model inputs are recorded once as RapidOCR
makes them (its detection input, its direction batches, its recognition batches of
six lines), then replayed from N threads in a closed loop for S seconds with nothing
in between: no decoding, resizing, cutting or text decoding. The replay's sessions
are ONNX Runtime's defaults (memory arena on, one intra-op thread a core), not
RapidOCR's (arena off), which cost it time of their own. Prints one JSON line in the
format of lab/examples/read_load.rs (system "models"). Runs in RapidOCR's venv
(scripts/setup/rapidocr.sh).

    ocr_models_alone.py --callers N --seconds S PAGE...
"""
import json
import time

import onnxruntime
from rapidocr_onnxruntime import RapidOCR

from closed_loop import STAGES, closed_loop, load_arguments


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
    args, pages = load_arguments(__doc__)
    pages = recorded_runs(RapidOCR(), pages)

    def replay(runs):
        spent = dict.fromkeys(STAGES, 0.0)
        for stage, session, outputs, feed in runs:
            at = time.monotonic()
            session.run(outputs, feed)
            spent[stage] += time.monotonic() - at
        lines = sum(len(next(iter(feed.values()))) for stage, _, _, feed in runs if stage == "recognize")
        return lines, spent

    print(json.dumps(closed_loop("models", args.callers, args.seconds, pages, replay)))


if __name__ == "__main__":
    main()
