#!/usr/bin/env python3
"""Generate the ONNX models modelless tests and benchmarks run against.

No network is reachable from dev/CI machines, so instead of downloading
pretrained checkpoints we build graphs with the real MobileNetV2 architecture
(same shapes, parameter counts and compute) filled with seeded random weights.
Accuracy numbers in the manifest are the published ones, registered as metadata.

Usage: gen_models.py --out DIR [--force] [--check]
"""
import argparse
import json
import os
import sys
import time
import zlib

# Bump whenever the produced files would change: it is the only thing the
# up-to-date check looks at.
GENERATOR_VERSION = 4
SEED = 20180113  # MobileNetV2 arXiv date; any fixed value keeps output deterministic
OPSET = 17
# onnx 1.23 stamps IR version 14 by default, which ORT 1.31 rejects (it reads up
# to 13). IR 8 is what onnx itself pairs with opset 17, so any ORT that runs
# opset 17 can load these files.
IR_VERSION = 8

# (width, published top-1) of the TF-Slim mobilenet_v2_<w>_224 checkpoints.
WIDTHS = [(0.35, 60.3), (0.5, 65.4), (0.75, 69.8), (1.0, 71.8), (1.4, 75.0)]
# Inverted-residual table (t, c, n, s) from Sandler et al. 2018, Table 2.
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
TINY = ["tiny.onnx", "tiny_fixed.onnx", "tiny_multi.onnx", "tiny_f16.onnx", "tiny_types.onnx"]
# An image-sized input that costs almost nothing to compute ([N,3,224,224] -> mean
# colour -> 1000 scores): what the host side of a batch costs shows plainly.
AVERAGE = "average_224.onnx"
# One task's variants as model zoos export them: the same job (image [N,3,8,8] -> 10
# scores) under other tensor names, output shapes, extra outputs and batch dimensions;
# zoo_misfit gives 12 scores and fits no such task.
# (file, input name, batch, outputs as (name, kind) where kind is "scores", "scores_4d",
# "scores_3d", "scores12" or "features")
ZOO = [
    ("zoo_a.onnx", "data_0", "N", [("prob", "scores")]),
    ("zoo_b.onnx", "gpu_0/data_0", "N", [("softmaxout_1", "scores_4d")]),
    ("zoo_c.onnx", "input", "N", [("features", "features"), ("logits", "scores_3d")]),
    ("zoo_d.onnx", "data_0", 1, [("prob", "scores")]),
    ("zoo_misfit.onnx", "data_0", "N", [("prob", "scores12")]),
]


def log(msg):
    print(f"gen_models: {msg}", file=sys.stderr, flush=True)


def mnv2_file(w):
    return f"mobilenetv2_{w}.onnx"


def up_to_date(out):
    """Cheap check done before importing onnx/numpy, so a no-op setup stays fast."""
    try:
        with open(os.path.join(out, "manifest.json")) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    files = TINY + [AVERAGE] + [z[0] for z in ZOO] + [mnv2_file(w) for w, _ in WIDTHS]
    return (m.get("generator_version") == GENERATOR_VERSION
            and all(os.path.isfile(os.path.join(out, p)) for p in files))


def make_divisible(v, divisor=8, min_value=None):
    # Reference rounding from the TF/torchvision implementations: nearest multiple
    # of 8, never dropping more than 10% below v.
    min_value = min_value or divisor
    new_v = max(min_value, int(v + divisor / 2) // divisor * divisor)
    if new_v < 0.9 * v:
        new_v += divisor
    return new_v


def rng_for(name):
    import numpy as np
    # Per-model stream, so adding/reordering models never changes existing ones.
    return np.random.default_rng([SEED, zlib.crc32(name.encode())])


def save(model, path):
    import onnx
    tmp = path + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, path)  # never leave a truncated model behind on interrupt


def write_json(path, value):
    """Written whole or not at all: a manifest present means its models are complete."""
    with open(path + ".tmp", "w") as f:
        json.dump(value, f, indent=2)
        f.write("\n")
    os.replace(path + ".tmp", path)


def make_model(graph, **meta):
    from onnx import helper
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                          ir_version=IR_VERSION, producer_name="modelless-gen_models",
                          producer_version=str(GENERATOR_VERSION))
    helper.set_model_props(m, {k: str(v) for k, v in meta.items()})
    return m


# ---------------------------------------------------------------- tiny models
def tiny_weights():
    import numpy as np
    rng = rng_for("tiny")
    w = rng.standard_normal((4, 3), dtype=np.float32)
    b = (0.1 * rng.standard_normal(3)).astype(np.float32)
    return w, b


def build_tiny(out):
    import numpy as np
    from onnx import TensorProto as T, helper, numpy_helper as nh
    vi = helper.make_tensor_value_info
    w, b = tiny_weights()
    inits = [nh.from_array(w, "W"), nh.from_array(b, "b")]
    affine = [helper.make_node("MatMul", ["input", "W"], ["xw"]),
              helper.make_node("Add", ["xw", "b"], ["pre"]),
              helper.make_node("Relu", ["pre"], ["output"])]

    # MatMul+Add (not Gemm) so the batch dim is just broadcast and stays symbolic.
    for name, batch in (("tiny", "N"), ("tiny_fixed", 1)):
        g = helper.make_graph(affine, name, [vi("input", T.FLOAT, [batch, 4])],
                              [vi("output", T.FLOAT, [batch, 3])], inits)
        save(make_model(g), os.path.join(out, f"{name}.onnx"))

    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "W"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["y"]),
         helper.make_node("Add", ["k", "one"], ["k_next"])],
        "tiny_multi",
        [vi("x", T.FLOAT, ["N", 4]), vi("k", T.INT64, ["N", 2])],
        [vi("y", T.FLOAT, ["N", 3]), vi("k_next", T.INT64, ["N", 2])],
        inits + [nh.from_array(np.array(1, np.int64), "one")])
    save(make_model(g), os.path.join(out, "tiny_multi.onnx"))

    g = helper.make_graph(
        [helper.make_node("Mul", ["input", "two"], ["output"])], "tiny_f16",
        [vi("input", T.FLOAT16, ["N", 4])], [vi("output", T.FLOAT16, ["N", 4])],
        [nh.from_array(np.array(2, np.float16), "two")])
    save(make_model(g), os.path.join(out, "tiny_f16.onnx"))

    # The remaining element types the serving protocols carry: INT32, UINT8, BOOL.
    g = helper.make_graph(
        [helper.make_node("Add", ["i32", "one32"], ["i32_next"]),
         helper.make_node("Identity", ["u8"], ["u8_out"]),
         helper.make_node("Not", ["flag"], ["flag_not"])],
        "tiny_types",
        [vi("i32", T.INT32, ["N", 2]), vi("u8", T.UINT8, ["N", 2]), vi("flag", T.BOOL, ["N", 2])],
        [vi("i32_next", T.INT32, ["N", 2]), vi("u8_out", T.UINT8, ["N", 2]), vi("flag_not", T.BOOL, ["N", 2])],
        [nh.from_array(np.array(1, np.int32), "one32")])
    save(make_model(g), os.path.join(out, "tiny_types.onnx"))


def average_weights():
    import numpy as np
    return rng_for(AVERAGE).standard_normal((3, 1000), dtype=np.float32)


def build_average(out):
    from onnx import TensorProto as T, helper, numpy_helper as nh
    vi = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("ReduceMean", ["input"], ["mean"], axes=[2, 3], keepdims=0),
         helper.make_node("MatMul", ["mean", "W"], ["logits"])],
        "average_224", [vi("input", T.FLOAT, ["N", 3, 224, 224])], [vi("logits", T.FLOAT, ["N", 1000])],
        [nh.from_array(average_weights(), "W")])
    save(make_model(g), os.path.join(out, AVERAGE))


# ---------------------------------------------------------------- model zoo
def zoo_weights(file, classes):
    import numpy as np
    rng = rng_for(file)
    return rng.standard_normal((3, classes), dtype=np.float32), rng.standard_normal(classes, dtype=np.float32)


def build_zoo(out):
    """Mean colour of the image -> affine -> scores, each variant with its own weights."""
    import numpy as np
    from onnx import TensorProto as T, helper, numpy_helper as nh
    vi = helper.make_tensor_value_info
    for file, input_name, batch, outputs in ZOO:
        classes = 12 if any(kind == "scores12" for _, kind in outputs) else 10
        w, b = zoo_weights(file, classes)
        nodes = [helper.make_node("ReduceMean", [input_name], ["mean"], axes=[2, 3], keepdims=0),
                 helper.make_node("MatMul", ["mean", "W"], ["xw"]),
                 helper.make_node("Add", ["xw", "b"], ["scores"])]
        inits = [nh.from_array(w, "W"), nh.from_array(b, "b")]
        graph_outputs = []
        for name, kind in outputs:
            if kind == "features":
                nodes.append(helper.make_node("Identity", ["mean"], [name]))
                graph_outputs.append(vi(name, T.FLOAT, [batch, 3]))
            elif kind == "scores_4d":
                inits.append(nh.from_array(np.array([2, 3], np.int64), "axes23"))
                nodes.append(helper.make_node("Unsqueeze", ["scores", "axes23"], [name]))
                graph_outputs.append(vi(name, T.FLOAT, [batch, classes, 1, 1]))
            elif kind == "scores_3d":
                inits.append(nh.from_array(np.array([1], np.int64), "axis1"))
                nodes.append(helper.make_node("Unsqueeze", ["scores", "axis1"], [name]))
                graph_outputs.append(vi(name, T.FLOAT, [batch, 1, classes]))
            else:
                nodes.append(helper.make_node("Identity", ["scores"], [name]))
                graph_outputs.append(vi(name, T.FLOAT, [batch, classes]))
        g = helper.make_graph(nodes, file[:-5], [vi(input_name, T.FLOAT, [batch, 3, 8, 8])], graph_outputs, inits)
        save(make_model(g), os.path.join(out, file))


def validate_zoo(out, session, expect):
    import numpy as np
    rng = np.random.default_rng(1)
    for file, input_name, batch, outputs in ZOO:
        n = 1 if batch == 1 else 3
        x = rng.standard_normal((n, 3, 8, 8), dtype=np.float32)
        got = session(file).run(None, {input_name: x})
        classes = 12 if any(kind == "scores12" for _, kind in outputs) else 10
        w, b = zoo_weights(file, classes)
        want = x.mean(axis=(2, 3)) @ w + b
        for (name, kind), y in zip(outputs, got):
            if kind != "features":
                expect(np.allclose(y.reshape(n, classes), want, atol=1e-5), f"{file} output {name}")
    log(f"zoo models ok: {', '.join(z[0] for z in ZOO)}")


# ---------------------------------------------------------------- MobileNetV2
class Net:
    """Accumulates nodes/initializers and counts params and multiply-adds."""

    def __init__(self, name):
        self.rng = rng_for(name)
        self.nodes, self.inits = [], []
        self.params = self.madds = 0
        self.n = 0

    def _name(self, kind):
        self.n += 1
        return f"{kind}{self.n}"

    def init(self, name, arr):
        from onnx import numpy_helper as nh
        self.inits.append(nh.from_array(arr, name))
        return name

    def conv(self, x, cin, cout, hw, k=1, stride=1, groups=1, relu6=True):
        import numpy as np
        from onnx import helper
        fan_in = cin // groups * k * k
        # He-normal keeps activation variance ~constant through the ReLU stack;
        # the bias stands in for the folded BatchNorm shift.
        w = (self.rng.standard_normal((cout, cin // groups, k, k), dtype=np.float32)
             * np.float32(np.sqrt(2.0 / fan_in)))
        b = (0.01 * self.rng.standard_normal(cout)).astype(np.float32)
        name = self._name("conv")
        out_hw = (hw + 2 * (k // 2) - k) // stride + 1
        self.nodes.append(helper.make_node(
            "Conv", [x, self.init(name + ".w", w), self.init(name + ".b", b)],
            [name], kernel_shape=[k, k], strides=[stride, stride],
            pads=[k // 2] * 4, group=groups))
        self.params += w.size + b.size
        self.madds += cout * out_hw * out_hw * fan_in
        if not relu6:
            return name, out_hw
        self.nodes.append(helper.make_node("Clip", [name, "zero", "six"], [name + ".r"]))
        return name + ".r", out_hw


def build_mobilenetv2(width, path):
    import numpy as np
    from onnx import TensorProto as T, helper
    net = Net(f"mobilenetv2_{width}")
    net.init("zero", np.array(0, np.float32))
    net.init("six", np.array(6, np.float32))

    cin = make_divisible(32 * width)
    x, hw = net.conv("input", 3, cin, 224, k=3, stride=2)
    for t, c, n, s in BLOCKS:
        cout = make_divisible(c * width)
        for i in range(n):
            stride = s if i == 0 else 1
            hidden = cin * t
            y = x
            if t != 1:  # the t=1 block has no expansion conv in the paper
                y, _ = net.conv(y, cin, hidden, hw)
            y, out_hw = net.conv(y, hidden, hidden, hw, k=3, stride=stride, groups=hidden)
            y, _ = net.conv(y, hidden, cout, out_hw, relu6=False)  # linear bottleneck
            if stride == 1 and cin == cout:
                res = net._name("add")
                net.nodes.append(helper.make_node("Add", [x, y], [res]))
                y = res
            x, cin, hw = y, cout, out_hw
    last = make_divisible(1280 * max(1.0, width))  # head never shrinks below 1280
    x, hw = net.conv(x, cin, last, hw)
    net.nodes += [helper.make_node("GlobalAveragePool", [x], ["pool"]),
                  helper.make_node("Flatten", ["pool"], ["flat"], axis=1)]
    fc_w = (net.rng.standard_normal((1000, last), dtype=np.float32)
            * np.float32(np.sqrt(2.0 / last)))
    fc_b = (0.01 * net.rng.standard_normal(1000)).astype(np.float32)
    net.nodes.append(helper.make_node(
        "Gemm", ["flat", net.init("fc.w", fc_w), net.init("fc.b", fc_b)], ["logits"],
        transB=1))
    net.params += fc_w.size + fc_b.size
    net.madds += fc_w.size

    g = helper.make_graph(
        net.nodes, f"mobilenetv2_{width}",
        [helper.make_tensor_value_info("input", T.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", T.FLOAT, ["N", 1000])], net.inits)
    save(make_model(g, width=width, generator_version=GENERATOR_VERSION), path)
    return net.params, net.madds


# ---------------------------------------------------------------- validation
def validate(out, manifest):
    import numpy as np
    import onnx
    graphs = manifest["tiny"] + [manifest["average"]] + manifest["zoo"]
    for f in graphs + [v["file"] for v in manifest["variants"]]:
        onnx.checker.check_model(os.path.join(out, f), full_check=True)
    try:
        import onnxruntime as ort
    except ImportError:
        log("onnxruntime not importable; checked graphs only")
        return

    def session(f):
        return ort.InferenceSession(os.path.join(out, f), providers=["CPUExecutionProvider"])

    def expect(cond, what):
        if not cond:
            raise SystemExit(f"gen_models: validation failed: {what}")

    rng = np.random.default_rng(0)
    w, b = tiny_weights()
    for f, batches in (("tiny.onnx", (1, 3)), ("tiny_fixed.onnx", (1,))):
        s = session(f)
        for n in batches:
            x = rng.standard_normal((n, 4), dtype=np.float32)
            (y,) = s.run(None, {"input": x})
            expect(y.shape == (n, 3) and np.allclose(y, np.maximum(x @ w + b, 0), atol=1e-5), f)
    s = session("tiny_multi.onnx")
    for n in (1, 3):
        x = rng.standard_normal((n, 4), dtype=np.float32)
        k = rng.integers(-100, 100, (n, 2), dtype=np.int64)
        y, kn = s.run(["y", "k_next"], {"x": x, "k": k})
        expect(np.allclose(y, x @ w + b, atol=1e-5) and kn.dtype == np.int64
               and (kn == k + 1).all(), "tiny_multi.onnx")
    s = session("tiny_f16.onnx")
    for n in (1, 3):
        x = rng.standard_normal((n, 4)).astype(np.float16)
        (y,) = s.run(None, {"input": x})
        expect(y.dtype == np.float16 and (y == x * np.float16(2)).all(), "tiny_f16.onnx")
    s = session("tiny_types.onnx")
    for n in (1, 3):
        i = rng.integers(-1000, 1000, (n, 2), dtype=np.int32)
        u = rng.integers(0, 256, (n, 2), dtype=np.uint8)
        f = rng.integers(0, 2, (n, 2)).astype(bool)
        i2, u2, f2 = s.run(["i32_next", "u8_out", "flag_not"], {"i32": i, "u8": u, "flag": f})
        expect(i2.dtype == np.int32 and (i2 == i + 1).all() and (u2 == u).all() and (f2 == ~f).all(),
               "tiny_types.onnx")
    log(f"tiny models ok: {', '.join(manifest['tiny'])}")
    x = rng.standard_normal((2, 3, 224, 224), dtype=np.float32)
    (y,) = session(manifest["average"]).run(None, {"input": x})
    expect(np.allclose(y, x.mean(axis=(2, 3)) @ average_weights(), atol=1e-4), manifest["average"])
    validate_zoo(out, session, expect)

    for v in manifest["variants"]:
        s = session(v["file"])
        x3 = rng.standard_normal((3, 3, 224, 224), dtype=np.float32)
        (y3,) = s.run(None, {"input": x3})
        expect(y3.shape == (3, 1000) and np.isfinite(y3).all(), f"{v['file']} batch 3")
        scale = float(np.abs(y3).max())
        expect(scale < 1000, f"{v['file']} logits blew up ({scale:.3g})")
        times = []
        for i in range(3):  # each row alone must match its row in the batch
            t0 = time.perf_counter()
            (y1,) = s.run(None, {"input": x3[i:i + 1]})
            times.append(time.perf_counter() - t0)
            err = float(np.abs(y1[0] - y3[i]).max()) / scale
            expect(y1.shape == (1, 1000) and err <= 1e-5,
                   f"{v['file']} batch-1 vs batch-3 row {i}: rel err {err:.2e}")
        for _ in range(5):
            t0 = time.perf_counter()
            s.run(None, {"input": x3[:1]})
            times.append(time.perf_counter() - t0)
        ms = 1000 * sorted(times[1:])[len(times[1:]) // 2]  # median, first run is warm-up
        log(f"{v['file']}: params {v['params'] / 1e6:.2f}M, {v['mflops']} M multiply-adds, "
            f"{ms:.1f} ms/image at batch 1, max|logit| {scale:.1f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true", help="regenerate even if up to date")
    ap.add_argument("--check", action="store_true", help="validate existing models only")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    if args.check:
        with open(os.path.join(out, "manifest.json")) as f:
            validate(out, json.load(f))
        return
    if not args.force and up_to_date(out):
        log(f"models up to date (generator v{GENERATOR_VERSION}) in {out}")
        return

    os.makedirs(out, exist_ok=True)
    manifest_path = os.path.join(out, "manifest.json")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)  # written last, so its presence means "complete"
    build_tiny(out)
    build_average(out)
    build_zoo(out)
    variants = []
    for width, top1 in WIDTHS:
        log(f"building {mnv2_file(width)}")
        params, madds = build_mobilenetv2(width, os.path.join(out, mnv2_file(width)))
        variants.append({"name": f"mobilenetv2-{width}", "file": mnv2_file(width),
                         "width": width, "top1": top1, "params": params,
                         "mflops": round(madds / 1e6, 1)})
    w, b = tiny_weights()
    manifest = {
        "generator_version": GENERATOR_VERSION,
        "family": "mobilenetv2",
        "input": {"name": "input", "shape": [-1, 3, 224, 224], "dtype": "float32"},
        "output": {"name": "logits", "shape": [-1, 1000], "dtype": "float32"},
        "accuracy_source": "published ImageNet top-1 of the TensorFlow-Slim MobileNetV2 "
                           "checkpoints at 224x224 (Sandler et al., 2018); random weights "
                           "here, so accuracy is registered metadata only",
        "variants": variants,
        "tiny": TINY,
        "average": AVERAGE,
        "zoo": [z[0] for z in ZOO],
        # Exact f32 values of W [4,3] and b [3] shared by tiny/tiny_fixed/tiny_multi,
        # so tests in other languages can compute expected outputs.
        "tiny_weights": {"W": w.tolist(), "b": b.tolist()},
    }
    validate(out, manifest)  # before the manifest exists: a failure means "redo next time"
    write_json(manifest_path, manifest)
    log(f"wrote {len(TINY) + 1 + len(ZOO) + len(variants)} models and manifest.json to {out}")


if __name__ == "__main__":
    main()
