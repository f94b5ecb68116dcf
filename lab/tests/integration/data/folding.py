"""Run by `variants::affine_steps_and_hard_swish_are_taken_into_the_convolutions_exactly`:
make_variant.py's float rewrite on an LCNet-like block (conv, scalar affine,
hard-swish written out, scalar affine, a padded depthwise conv and a 1x1 conv taking
it), which must give the same outputs with the element-wise steps gone. Arguments:
the folder of make_variant.py and a scratch folder."""
import sys
import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper
sys.path.insert(0, sys.argv[1])
import make_variant

rng = np.random.default_rng(3)
values = {"w1": rng.normal(size=(4, 3, 3, 3)), "b1": rng.normal(size=4), "a": [1.7], "b": [0.4], "three": [3.0],
          "zero": 0.0, "six": 6.0, "six_": [6.0], "c": [0.3], "d": [-0.25], "w2": rng.normal(size=(4, 1, 3, 3)),
          "w3": rng.normal(size=(2, 4, 1, 1)), "b3": rng.normal(size=2)}
inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in values.items()]
node = helper.make_node
nodes = [node("Conv", ["x", "w1", "b1"], ["y"], name="conv1", pads=[1, 1, 1, 1]),
         node("Mul", ["a", "y"], ["ya"], name="scale1"), node("Add", ["ya", "b"], ["yb"], name="shift1"),
         node("Add", ["yb", "three"], ["h1"], name="hs_add"), node("Clip", ["h1", "zero", "six"], ["h2"], name="hs_clip"),
         node("Mul", ["yb", "h2"], ["h3"], name="hs_mul"), node("Div", ["h3", "six_"], ["h"], name="hs_div"),
         node("Mul", ["c", "h"], ["hc"], name="scale2"), node("Add", ["hc", "d"], ["hd"], name="shift2"),
         node("Conv", ["hd", "w2"], ["z"], name="depthwise", group=4, pads=[1, 1, 1, 1]),
         node("Conv", ["hd", "w3", "b3"], ["v"], name="pointwise")]
graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 6, 7])],
                          [helper.make_tensor_value_info("z", TensorProto.FLOAT, [1, 4, 6, 7]),
                           helper.make_tensor_value_info("v", TensorProto.FLOAT, [1, 2, 6, 7])], inits)
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
before = model.SerializeToString()
counts = make_variant.folded(model)
assert counts == {"affine steps after convolutions": 1, "hard-swish activations": 1,
                  "affine steps before convolutions": 1}, counts
onnx.checker.check_model(model)
ops = [n.op_type for n in model.graph.node]
assert ops == ["Conv", "HardSwish", "Add", "Conv", "Conv"], ops
assert {"w1", "a", "b", "c"}.isdisjoint(t.name for t in model.graph.initializer), "unused weights are dropped"
x = rng.normal(size=(1, 3, 6, 7)).astype(np.float32) * 3
want = ort.InferenceSession(before, providers=["CPUExecutionProvider"]).run(None, {"x": x})
got = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
for a, b in zip(want, got):
    assert np.abs(a - b).max() <= 1e-4 * max(1.0, np.abs(a).max()), np.abs(a - b).max()
# A step some other operator also takes stays where it is.
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
model.graph.output.append(helper.make_tensor_value_info("hd", TensorProto.FLOAT, [1, 4, 6, 7]))
assert make_variant.folded(model)["affine steps before convolutions"] == 0

# The `folded` copy: written, timed, and the same outputs; refused with nothing to fold.
for value in list(graph.input) + list(graph.output):
    value.type.tensor_type.shape.dim[0].dim_param = "N"
src, dst = sys.argv[2] + "/block.onnx", sys.argv[2] + "/block.folded.onnx"
onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8), src)
report = make_variant.fp32_folded(src, dst)
assert report["kind"] == "folded" and report["rewritten"]["hard-swish activations"] == 1, report
assert report["speed_ratio"] > 0 and "exact" in report["rewritten_why"], report
x = np.concatenate([x, x * 0.5])
got = ort.InferenceSession(dst, providers=["CPUExecutionProvider"]).run(None, {"x": x})
want = ort.InferenceSession(src, providers=["CPUExecutionProvider"]).run(None, {"x": x})
assert all(np.abs(a - b).max() <= 1e-4 * max(1.0, np.abs(a).max()) for a, b in zip(want, got))
plain = helper.make_graph([node("Conv", ["x", "w3", "b3"], ["v"], name="only")], "plain", list(graph.input),
                          [helper.make_tensor_value_info("v", TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.array(values[k], np.float32), k) for k in ("w3", "b3")])
plain_model = helper.make_model(plain, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
plain_model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 4
onnx.save(plain_model, src)
try:
    make_variant.fp32_folded(src, dst + ".none")
    raise AssertionError("a model with nothing to fold was copied")
except SystemExit as refused:
    assert "nothing to fold" in str(refused), refused
print("ok")
