#!/usr/bin/env python3
"""One precision bound of a static int8 copy, made in the converter's place.

  int8_bounds.py BOUND IN.onnx OUT.onnx CALIBRATION_DIR

BOUND is a16w8 (activations in 16 bits, weights in 8 with biases corrected: what
the weights alone lose), a8w16 (activations in 8 bits, weights in 16: what the
activations alone lose), a16w16 (both in 16: the measurement's own floor) or a8w8
(both in 8, biases corrected: the copy the converter serves). Each is QDQ with
per-channel weights, calibrated on the first two thirds of the inputs in
CALIBRATION_DIR (as make_variant.py reads them), the first three convolutions kept
in float as the Lite copies keep them. `scripts/bench/int8_bounds.sh` has `modelless
variants make` measure each on the same images as the real copy; the 16-bit
tensors run through float kernels, so only their agreement means anything.

BOUND float-arithmetic takes a QDQ model as IN and writes the same model with float
arithmetic between its roundings: its weights dequantised, each activation's
QuantizeLinear/DequantizeLinear pair written out as Div, Round, Add, Clip, Sub and
Mul, which ONNX Runtime runs as written instead of in its int8 kernels. Measured
against IN, it shows how much of the answers the int8 arithmetic itself decides.
Prints the converter's one-line JSON report.
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_variant as mv  # noqa: E402

BOUNDS = {"a16w8": ("QUInt16", "QInt8", True), "a8w16": ("QUInt8", "QInt16", False),
          "a16w16": ("QUInt16", "QInt16", False), "a8w8": ("QUInt8", "QInt8", True)}


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in [*BOUNDS, "float-arithmetic"]:
        sys.exit(__doc__.strip().splitlines()[2].strip())
    bound, src, dst, folder = sys.argv[1:]
    if bound == "float-arithmetic":
        return with_float_arithmetic(src, dst)
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


def with_float_arithmetic(src, dst):
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper
    model = onnx.load(src)
    graph = model.graph
    values = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    nodes, added = [], []

    def constant(name, value):
        added.append(numpy_helper.from_array(np.asarray(value, np.float32), name))
        return name

    for node in graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in values:
            added.append(numpy_helper.from_array(dequantised(node, values).astype(np.float32), node.output[0]))
        elif node.op_type == "QuantizeLinear":
            x, scale, zero = node.input
            out = node.output[0]
            low, high = (0, 255) if values[zero].dtype == np.uint8 else (-128, 127)
            nodes += [helper.make_node("Div", [x, scale], [out + "_div"]),
                      helper.make_node("Round", [out + "_div"], [out + "_round"]),
                      helper.make_node("Add", [out + "_round", constant(out + "_zero", values[zero])], [out + "_add"]),
                      helper.make_node("Clip", [out + "_add", constant(out + "_low", low),
                                                constant(out + "_high", high)], [out])]
        elif node.op_type == "DequantizeLinear":
            q, scale = node.input[:2]
            out = node.output[0]
            nodes += [helper.make_node("Sub", [q, q + "_zero"], [out + "_sub"]),
                      helper.make_node("Mul", [out + "_sub", scale], [out])]
        else:
            nodes.append(node)
    used = {i for n in nodes for i in n.input}
    replaced = {i.name for i in added}
    kept = [i for i in graph.initializer if i.name in used and i.name not in replaced]
    del graph.node[:]
    graph.node.extend(nodes)
    del graph.initializer[:]
    graph.initializer.extend(kept + added)
    del graph.value_info[:]
    onnx.checker.check_model(model)
    onnx.save(model, dst)
    print(json.dumps({"kind": "int8-static", "bound": "float-arithmetic", "kept_float": [],
                      "kept_float_why": "the copy's roundings with float arithmetic between them, not a copy to serve"}))


def dequantised(node, values):
    """A weight's DequantizeLinear done once: (q - zero point) × scale, per channel."""
    import numpy as np
    q = values[node.input[0]].astype(np.float64)
    scale = values[node.input[1]].astype(np.float64)
    zero = values[node.input[2]].astype(np.float64) if len(node.input) > 2 else 0.0
    if scale.ndim == 1 and q.ndim > 1:
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        shape = [1] * q.ndim
        shape[axis] = -1
        scale = scale.reshape(shape)
        zero = np.reshape(zero, shape) if np.ndim(zero) else zero
    return (q - zero) * scale


if __name__ == "__main__":
    main()
