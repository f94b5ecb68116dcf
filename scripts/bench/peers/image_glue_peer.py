#!/usr/bin/env python3
"""The glue users write today, as a peer for the image benchmark: a Python service that
decodes with PIL, resizes (shorter side, centre crop, bicubic), normalises with numpy
and runs onnxruntime, requests served by a thread pool (onnxruntime and most of PIL
release the GIL). It is driven closed-loop: `--concurrency` callers, each sending its
next image when the last is answered, for `--seconds`.

Usage: image_glue_peer.py --model M.onnx --size 224 --image medium.jpg
           [--concurrency 32] [--threads 2] [--seconds 20] [--out result.json]

Prints and writes throughput and latency percentiles (ms), and the mean time of each
stage (decode, preprocess, compute) per request.
"""
import argparse
import io
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnxruntime as ort
from PIL import Image

CROP_FRACTION = 0.875


def preprocess(img: Image.Image, size: int, mean: float, std: float) -> np.ndarray:
    width, height = img.size
    side = CROP_FRACTION * min(width, height)
    box = ((width - side) / 2, (height - side) / 2, (width + side) / 2, (height + side) / 2)
    img = img.resize((size, size), Image.Resampling.BICUBIC, box=box)
    pixels = np.asarray(img, dtype=np.float32)
    return ((pixels - mean) / std).transpose(2, 0, 1)[None]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--image", required=True)
    parser.add_argument("--mean", type=float, default=127.0)
    parser.add_argument("--std", type=float, default=128.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2, help="the service's worker threads")
    parser.add_argument("--intra-op-threads", type=int, default=0, help="onnxruntime's; 0 lets it choose")
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--out")
    args = parser.parse_args()

    options = ort.SessionOptions()
    options.intra_op_num_threads = args.intra_op_threads
    session = ort.InferenceSession(args.model, options, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    encoded = open(args.image, "rb").read()
    service = ThreadPoolExecutor(max_workers=args.threads)
    stages = {"decode": 0.0, "preprocess": 0.0, "compute": 0.0}
    lock = threading.Lock()

    def handle(data: bytes) -> np.ndarray:
        started = time.perf_counter()
        img = Image.open(io.BytesIO(data)).convert("RGB")
        decoded = time.perf_counter()
        tensor = preprocess(img, args.size, args.mean, args.std)
        prepared = time.perf_counter()
        logits = session.run(None, {input_name: tensor})[0]
        done = time.perf_counter()
        with lock:
            stages["decode"] += decoded - started
            stages["preprocess"] += prepared - decoded
            stages["compute"] += done - prepared
        return logits

    handle(encoded)  # warm-up
    stages = dict.fromkeys(stages, 0.0)
    latencies = []
    deadline = time.perf_counter() + args.seconds

    def caller() -> None:
        while time.perf_counter() < deadline:
            sent = time.perf_counter()
            service.submit(handle, encoded).result()
            latency = time.perf_counter() - sent
            with lock:
                latencies.append(latency)

    began = time.perf_counter()
    callers = [threading.Thread(target=caller) for _ in range(args.concurrency)]
    for c in callers:
        c.start()
    for c in callers:
        c.join()
    elapsed = time.perf_counter() - began
    ms = np.array(latencies) * 1e3
    n = len(latencies)
    result = {
        "requests": n,
        "throughput_per_s": n / elapsed,
        "p50_ms": float(np.percentile(ms, 50)),
        "p99_ms": float(np.percentile(ms, 99)),
        "stage_ms": {k: v / n * 1e3 for k, v in stages.items()},
    }
    print(json.dumps(result))
    if args.out:
        json.dump(result, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
