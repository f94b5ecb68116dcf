"""Run by `variants::biases_corrected_for_rounded_weights_give_each_output_its_float_mean`:
make_variant.py's bias correction on a grouped 1x1 convolution and a Gemm, whose
means carry over exactly. Arguments: the folder of make_variant.py and a scratch folder."""
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
sys.path.insert(0, sys.argv[1])
import make_variant

rng = np.random.default_rng(7)
conv_w = rng.normal(size=(6, 2, 1, 1)).astype(np.float32)
gemm_w = rng.normal(size=(3, 6)).astype(np.float32)
nodes = [helper.make_node("Conv", ["x", "cw", "cb"], ["y"], name="conv", group=2),
         helper.make_node("GlobalAveragePool", ["y"], ["p"], name="pool"),
         helper.make_node("Flatten", ["p"], ["f"], name="flat"),
         helper.make_node("Gemm", ["f", "gw", "gb"], ["z"], name="gemm", transB=1)]
inits = [numpy_helper.from_array(conv_w, "cw"), numpy_helper.from_array(np.zeros(6, np.float32), "cb"),
         numpy_helper.from_array(gemm_w, "gw"), numpy_helper.from_array(np.zeros(3, np.float32), "gb")]
graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 5])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 3])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
path = sys.argv[2] + "/m.onnx"
onnx.save(model, path)
inputs = [(rng.normal(size=(4, 5, 5)) + np.array([3, -2, 1, 5])[:, None, None]).astype(np.float32) for _ in range(16)]
means = make_variant.input_means(path, "x", inputs, {"x", "f"})
assert make_variant.bias_corrected(model, means, set()) == 2

def rounded(w):
    flat = w.reshape(w.shape[0], -1)
    scale = np.abs(flat).max(axis=1, keepdims=True) / 127
    return (np.rint(flat / scale) * scale).reshape(w.shape).astype(np.float32)

quantised = onnx.ModelProto()
quantised.CopyFrom(model)
for init in quantised.graph.initializer:
    if init.name in ("cw", "gw"):
        init.CopyFrom(numpy_helper.from_array(rounded(numpy_helper.to_array(init)), init.name))
original = make_variant.session(path)
corrected = make_variant.session(quantised.SerializeToString())
quantised_plain = onnx.ModelProto()
quantised_plain.CopyFrom(quantised)
for init in quantised_plain.graph.initializer:
    if init.name in ("cb", "gb"):
        init.CopyFrom(numpy_helper.from_array(np.zeros_like(numpy_helper.to_array(init)), init.name))
plain = make_variant.session(quantised_plain.SerializeToString())
want = np.mean([original.run(None, {"x": x[None]})[0] for x in inputs], axis=0)
got = np.mean([corrected.run(None, {"x": x[None]})[0] for x in inputs], axis=0)
off = np.mean([plain.run(None, {"x": x[None]})[0] for x in inputs], axis=0)
assert np.abs(off - want).max() > 1e-4, ("rounding must shift the mean for the test to mean anything", off - want)
assert np.abs(got - want).max() < 1e-5 * max(1, np.abs(want).max()), (got, want)
print("ok", float(np.abs(off - want).max()), float(np.abs(got - want).max()))
