#!/usr/bin/env python3
"""Make a copy of an ONNX variant for `modelless variants make`.

  make_variant.py fp16 IN.onnx OUT.onnx

fp16: weights and activations in half precision with ONNX Runtime's own converter
(onnxruntime.transformers.float16; onnxconverter-common's, the same code, where
onnxruntime's Python package is missing), inputs and outputs kept in fp32, so that
the copy takes and gives what the task's other variants do. Prints one JSON line
saying what was converted and what was kept in fp32.
"""
import json
import os
import sys


def fp16(src, dst):
    import onnx
    try:
        from onnxruntime.transformers.float16 import convert_float_to_float16
    except ImportError:
        from onnxconverter_common.float16 import convert_float_to_float16

    model = onnx.load(src)
    before = sum(1 for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT)
    # keep_io_types: the copy's inputs and outputs stay fp32 (casts at the edges).
    half = convert_float_to_float16(model, keep_io_types=True, disable_shape_infer=False)
    after = sum(1 for t in half.graph.initializer if t.data_type == onnx.TensorProto.FLOAT16)
    casts = sum(1 for n in half.graph.node if n.op_type == "Cast")
    tmp = dst + ".partial"
    onnx.save(half, tmp)
    os.replace(tmp, dst)
    return {"kind": "fp16", "weights_fp32": before, "weights_fp16": after, "casts": casts,
            "kept_fp32": "inputs and outputs"}


def main():
    if len(sys.argv) != 4 or sys.argv[1] not in ("fp16",):
        sys.exit(__doc__.strip().splitlines()[2].strip())
    kind, src, dst = sys.argv[1:]
    print(json.dumps(fp16(src, dst)))


if __name__ == "__main__":
    main()
