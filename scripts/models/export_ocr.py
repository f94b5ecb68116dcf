#!/usr/bin/env python3
"""Put PP-OCRv4's three ONNX models, as the `rapidocr-onnxruntime` wheel ships them,
where the `read-text` pipeline's config finds them, with the recogniser's dictionary.

- det.onnx: text detection (DBNet), pages of any height and width (multiples of 32)
- cls.onnx: text direction, lines of 48 × 192, upright or upside down
- rec.onnx: recognition, lines of 48 × W, CTC over the dictionary
- dictionary.txt: the characters the recogniser spells with, one a line, as the model
  carries them in its metadata (key `character`)

The wheel is installed (without its dependencies) by scripts/setup/base.sh from
scripts/setup/requirements-ocr-models.txt; nothing here imports it.

Usage: export_ocr.py --out DIR
"""
import argparse
import hashlib
import importlib.util
import os
import shutil
import sys

import onnx

MODELS = {
    "det.onnx": "ch_PP-OCRv4_det_infer.onnx",
    "cls.onnx": "ch_ppocr_mobile_v2.0_cls_infer.onnx",
    "rec.onnx": "ch_PP-OCRv4_rec_infer.onnx",
}


def wheel_models() -> str:
    spec = importlib.util.find_spec("rapidocr_onnxruntime")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("export_ocr: rapidocr-onnxruntime is not installed (run scripts/setup/base.sh)")
    return os.path.join(list(spec.submodule_search_locations)[0], "models")


def same(a: str, b: str) -> bool:
    if not os.path.exists(b):
        return False
    digest = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()  # noqa: E731
    return digest(a) == digest(b)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    source = wheel_models()
    for ours, theirs in MODELS.items():
        src, dst = os.path.join(source, theirs), os.path.join(args.out, ours)
        if not same(src, dst):
            shutil.copyfile(src, dst + ".tmp")
            os.replace(dst + ".tmp", dst)
    dictionary = os.path.join(args.out, "dictionary.txt")
    if not os.path.exists(dictionary):
        rec = onnx.load(os.path.join(args.out, "rec.onnx"), load_external_data=False)
        meta = {p.key: p.value for p in rec.metadata_props}
        if "character" not in meta:
            sys.exit("export_ocr: rec.onnx carries no `character` metadata")
        with open(dictionary + ".tmp", "w", encoding="utf-8") as f:
            f.write(meta["character"].rstrip("\n") + "\n")
        os.replace(dictionary + ".tmp", dictionary)
    print(f"export_ocr: PP-OCRv4 models and dictionary in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
