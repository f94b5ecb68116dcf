#!/usr/bin/env python3
"""One precision bound of a static int8 copy, made in the converter's place.

  int8_bounds.py BOUND IN.onnx OUT.onnx CALIBRATION_DIR

BOUND is a16w8 (activations in 16 bits, weights in 8 with biases corrected: what
the weights alone lose), a8w16 (activations in 8 bits, weights in 16: what the
activations alone lose) or a16w16 (both in 16: the measurement's own floor). Each is
QDQ with per-channel weights, calibrated on the first two thirds of the inputs in
CALIBRATION_DIR (as make_variant.py reads them), the first three convolutions kept
in float as the Lite copies keep them. `scripts/int8_bounds.sh` has `modelless
variants make` measure each on the same images as the real copy; the 16-bit
tensors run through float kernels, so only their agreement means anything.
Prints the converter's one-line JSON report.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_variant as mv  # noqa: E402

BOUNDS = {"a16w8": ("QUInt16", "QInt8", True), "a8w16": ("QUInt8", "QInt16", False),
          "a16w16": ("QUInt16", "QInt16", False)}


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in BOUNDS:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    bound, src, dst, folder = sys.argv[1:]
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    activations, weights, correct = BOUNDS[bound]
    name, inputs = mv.read_inputs(folder, src)
    calibration = inputs[: len(inputs) * 2 // 3]
    prepared = dst + ".prepared.onnx"
    model = mv.named(src, prepared)
    convolutions = [n.name for n in model.graph.node if n.op_type == "Conv"][:3]
    if correct:
        weighted = [n for n in model.graph.node if n.op_type in ("Conv", "Gemm") and len(n.input) > 2]
        means = mv.input_means(prepared, name, calibration, {n.input[0] for n in weighted})
        mv.bias_corrected(model, means, set(convolutions))
        onnx.save(model, prepared)

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.inputs = iter([{name: x[None]} for x in calibration])

        def get_next(self):
            return next(self.inputs, None)

    mv.progress(f"{bound}: activations {activations}, weights {weights}")
    quantize_static(prepared, dst, Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                    activation_type=getattr(QuantType, activations), weight_type=getattr(QuantType, weights),
                    nodes_to_exclude=convolutions)
    os.remove(prepared)
    print(json.dumps({"kind": "int8-static", "bound": bound, "kept_float": convolutions,
                      "kept_float_why": f"precision bound {bound}, not a copy to serve"}))


if __name__ == "__main__":
    main()
