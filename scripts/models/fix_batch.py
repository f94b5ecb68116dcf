#!/usr/bin/env python3
"""Copies ONNX models with their batch dimension fixed at 1, as many model zoos
export them: the graph's inputs and outputs get dimension 0 of size 1, the rest of
the graph is left as it is. Each copy is checked with ONNX Runtime to give, for one
row, what the original gives.

Usage: fix_batch.py --out DIR MODEL.onnx ...   (writes DIR/<name>_b1.onnx)
"""
import argparse
import os
import sys

import numpy as np
import onnx
import onnxruntime as ort


def fixed(model):
    for value in list(model.graph.input) + list(model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].Clear()
            dims[0].dim_value = 1
    # Shapes inferred for the open batch would contradict the fixed one.
    del model.graph.value_info[:]
    return model


def same_answer(original, copy):
    a, b = ort.InferenceSession(original), ort.InferenceSession(copy)
    feed = {}
    rng = np.random.default_rng(0)
    for spec in b.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in spec.shape]
        feed[spec.name] = rng.standard_normal(shape).astype(np.float32)
    for x, y in zip(a.run(None, feed), b.run(None, feed)):
        if x.shape != y.shape or not np.allclose(x, y, rtol=1e-4, atol=1e-5):
            return False
    return True


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for path in args.models:
        name = os.path.splitext(os.path.basename(path))[0] + "_b1.onnx"
        target = os.path.join(args.out, name)
        if os.path.exists(target) and os.path.getmtime(target) >= os.path.getmtime(path):
            continue
        model = fixed(onnx.load(path))
        onnx.checker.check_model(model)
        onnx.save(model, target + ".tmp")
        if not same_answer(path, target + ".tmp"):
            os.remove(target + ".tmp")
            sys.exit(f"fix_batch: {name} does not answer as {path} does")
        os.replace(target + ".tmp", target)
        print(f"fix_batch: wrote {target}", file=sys.stderr)


if __name__ == "__main__":
    main()
