#!/usr/bin/env python3
"""Generate the TorchScript modules the `tch` backend's tests and benchmarks run.

Like gen_models.py, nothing is downloaded: the MobileNetV2 family is built with
torch.nn at the published widths (same architecture, seeded random weights; the
accuracies in the manifest are the published top-1 figures of the TF-Slim
checkpoints, metadata only). The tiny modules reuse the ONNX tiny model's weights
(from that manifest), so both backends must give the same answers.

For each module the manifest records the outputs PyTorch itself computed for a fixed
input, which the Rust tests compare with what they get through libtorch.

Usage: gen_torchscript.py --onnx-models DIR --out DIR [--force]
"""
import argparse
import json
import math
import os
import sys

import torch
from torch import nn

GENERATOR_VERSION = 1
SEED = 20180113
WIDTHS = [(0.35, 60.3), (0.5, 65.4), (0.75, 69.8), (1.0, 71.8), (1.4, 75.0)]
BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
          (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)]
# The fixed input the manifest's expected outputs are for: 2 images.
PROBE_BATCH = 2


def log(msg):
    print(f"gen_torchscript: {msg}", file=sys.stderr)


def make_divisible(v, divisor=8):
    new_v = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return new_v + divisor if new_v < 0.9 * v else new_v


def conv(cin, cout, k=1, stride=1, groups=1, relu6=True):
    layers = [nn.Conv2d(cin, cout, k, stride, k // 2, groups=groups, bias=True)]
    if relu6:
        layers.append(nn.ReLU6())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    def __init__(self, cin, cout, stride, t):
        super().__init__()
        hidden = cin * t
        layers = [] if t == 1 else [conv(cin, hidden)]
        layers += [conv(hidden, hidden, 3, stride, groups=hidden), conv(hidden, cout, relu6=False)]
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x):
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """Sandler et al. 2018, with batch norm folded into the convolutions' biases, as an
    exported inference graph has it."""

    def __init__(self, width):
        super().__init__()
        cin = make_divisible(32 * width)
        layers = [conv(3, cin, 3, 2)]
        for t, c, n, s in BLOCKS:
            cout = make_divisible(c * width)
            for i in range(n):
                layers.append(InvertedResidual(cin, cout, s if i == 0 else 1, t))
                cin = cout
        last = make_divisible(1280 * max(1.0, width))
        layers.append(conv(cin, last))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(last, 1000)
        for m in self.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                fan_in = m.weight[0].numel()
                nn.init.normal_(m.weight, std=math.sqrt(2.0 / fan_in))
                nn.init.normal_(m.bias, std=0.01)

    def forward(self, x):
        return self.classifier(self.features(x).mean((2, 3)))


class Tiny(nn.Module):
    """relu(x·W + b), the ONNX tiny model."""

    def __init__(self, w, b):
        super().__init__()
        self.w = nn.Parameter(torch.tensor(w, dtype=torch.float32), requires_grad=False)
        self.b = nn.Parameter(torch.tensor(b, dtype=torch.float32), requires_grad=False)

    def forward(self, x):
        return torch.relu(x @ self.w + self.b)


class TinyPair(Tiny):
    """Two outputs of two types: relu(x·W + b), and how many of each row's inputs are
    positive (int64)."""

    def forward(self, x):
        return torch.relu(x @ self.w + self.b), (x > 0).sum(1)


def probe_image():
    """A fixed, seedless input: 2 images with a smooth pattern."""
    n = PROBE_BATCH * 3 * 224 * 224
    values = torch.arange(n, dtype=torch.float32).reshape(PROBE_BATCH, 3, 224, 224)
    return torch.sin(values * 0.001) * 0.5


def up_to_date(out, onnx_manifest_mtime):
    try:
        with open(os.path.join(out, "torchscript.json")) as f:
            m = json.load(f)
    except (OSError, ValueError):
        return False
    files = [v["file"] for v in m.get("variants", [])] + [t["file"] for t in m.get("tiny", [])]
    return (m.get("generator_version") == GENERATOR_VERSION
            and m.get("torch_version") == torch.__version__.split("+")[0]
            and m.get("onnx_manifest_mtime") == onnx_manifest_mtime
            and all(os.path.isfile(os.path.join(out, f)) for f in files))


def save(module, example, path):
    module.eval()
    with torch.no_grad():
        scripted = torch.jit.trace(module, example)
    scripted.save(path + ".tmp")
    os.replace(path + ".tmp", path)
    return scripted


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--onnx-models", required=True, help="folder of gen_models.py's output")
    ap.add_argument("--out", required=True)
    ap.add_argument("--force", action="store_true")
    args = ap.parse_args()
    onnx_manifest = os.path.join(args.onnx_models, "manifest.json")
    mtime = int(os.path.getmtime(onnx_manifest))
    if not args.force and up_to_date(args.out, mtime):
        log(f"TorchScript modules up to date (generator v{GENERATOR_VERSION}) in {args.out}")
        return
    os.makedirs(args.out, exist_ok=True)
    torch.manual_seed(SEED)
    with open(onnx_manifest) as f:
        weights = json.load(f)["tiny_weights"]

    tiny = []
    row = torch.tensor([[0.5, -1.0, 2.0, 0.25]])
    for name, cls in [("tiny.pt", Tiny), ("tiny_pair.pt", TinyPair)]:
        log(f"building {name}")
        save(cls(weights["W"], weights["b"]), row, os.path.join(args.out, name))
        tiny.append({"file": name})

    variants = []
    image = probe_image()
    for width, top1 in WIDTHS:
        name = f"mobilenetv2_{width}.pt"
        log(f"building {name}")
        model = MobileNetV2(width)
        scripted = save(model, image[:1], os.path.join(args.out, name))
        with torch.no_grad():
            logits = scripted(image)
        variants.append({
            "name": f"mobilenetv2-{width}-ts", "file": name, "width": width, "top1": top1,
            "params": sum(p.numel() for p in model.parameters()),
            # The first 8 logits of each probe image, as PyTorch computes them.
            "probe_logits": logits[:, :8].tolist(),
        })

    manifest = {
        "generator_version": GENERATOR_VERSION,
        "torch_version": torch.__version__.split("+")[0],
        "onnx_manifest_mtime": mtime,
        "probe": "sin(0.001 * arange(2*3*224*224)) * 0.5, shape [2, 3, 224, 224]",
        "tiny": tiny,
        "variants": variants,
        "accuracy_source": "published top-1 of the TF-Slim mobilenet_v2_<w>_224 checkpoints (metadata; weights are random)",
    }
    with open(os.path.join(args.out, "torchscript.json.tmp"), "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(os.path.join(args.out, "torchscript.json.tmp"), os.path.join(args.out, "torchscript.json"))
    log(f"wrote {len(variants)} MobileNetV2 modules and {len(tiny)} tiny ones to {args.out}")


if __name__ == "__main__":
    main()
