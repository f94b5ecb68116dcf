#!/usr/bin/env bash
# What a static int8 copy of an image variant can agree at most, on the same 500
# images `modelless variants make` judges the real copy on: the copy made with the
# activations in 16 bits and the weights in 8 (biases corrected), with the
# activations in 8 and the weights in 16, with both in 16 (the floor of the
# measurement itself) and with both in 8 (the copy served). Each is made by
# scripts/models/int8_bounds.py standing in for the converter, then measured and added by
# the command as a copy is, to a scratch config beside a scratch copy of the model.
# Last, the served copy takes the original's place and is compared with itself run
# with float arithmetic between its roundings: how much of its answers ONNX
# Runtime's int8 arithmetic alone decides. Prints each bound's agreement lines.
#
#   bash scripts/bench/int8_bounds.sh [CONFIG] [TASK] [VARIANT]
#   (default: experiments/lite.toml classify-photo efficientnet-lite0)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CONFIG="$(realpath "${1:-$ROOT/experiments/lite.toml}")"
TASK="${2:-classify-photo}" VARIANT="${3:-efficientnet-lite0}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"
[ -d .modelless/photos ] || bash scripts/setup/base.sh
cargo build --release --locked -q -p modelless-lab
BIN="$CARGO_TARGET_DIR/release/modelless"
PYTHON="${MODELLESS_PYTHON:-$ROOT/.modelless/venv/bin/python}"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so}"

WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
# The config with the variant alone, its model copied into the scratch folder so
# that the bounds are written there.
"$PYTHON" - "$CONFIG" "$TASK" "$VARIANT" "$WORK" <<'PY'
import os, shutil, sys, tomllib
config, task, variant, work = sys.argv[1:]
with open(config, "rb") as f:
    data = tomllib.load(f)
t = next(t for t in data["tasks"] if t["name"] == task)
v = next(v for v in t["variants"] if v["name"] == variant)
base = os.path.dirname(config)
model = os.path.join(work, os.path.basename(v["path"]))
shutil.copy(os.path.join(base, v["path"]), model)
fields = lambda d: "\n".join(f"{k} = {toml(x)}" for k, x in d.items() if k != "variants")
def toml(x):
    if isinstance(x, str): return '"' + x.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(x, bool): return "true" if x else "false"
    if isinstance(x, list): return "[" + ", ".join(toml(i) for i in x) + "]"
    if isinstance(x, dict): return "{ " + ", ".join(f"{k} = {toml(i)}" for k, i in x.items()) + " }"
    return repr(x)
if "labels" in t:
    t["labels"] = os.path.join(base, t["labels"])
v = {**v, "path": model}
open(os.path.join(work, "base.toml"), "w").write(
    f"[[tasks]]\n{fields({**t, 'active': variant})}\n\n[[tasks.variants]]\n{fields(v)}\n")
PY
cat >"$WORK/converter" <<SH
#!/bin/sh
# Stands in for make_variant.py: \$1 is "-" (the script, on stdin), then KIND IN OUT DIR.
cat >/dev/null
exec "$PYTHON" "$ROOT/scripts/models/int8_bounds.py" "\$BOUND" "\$3" "\$4" "\$5"
SH
chmod +x "$WORK/converter"
measure() { # BOUND CONFIG
    echo "== $1"
    BOUND=$1 MODELLESS_PYTHON="$WORK/converter" "$BIN" variants make "$2" \
        --task "$TASK" --from "$VARIANT" --kind int8-static 2>"$WORK/$1.err" | grep -E "agreement|keeps its answer" \
        || { tail -5 "$WORK/$1.err"; exit 1; }
}
for bound in a16w8 a8w16 a16w16 a8w8; do
    cp "$WORK/base.toml" "$WORK/$bound.toml"
    measure "$bound" "$WORK/$bound.toml"
done
# The served copy (the last one made) as the original, in a folder of its own.
MODEL="$(sed -n 's/^path = "\(.*\)"$/\1/p' "$WORK/base.toml")"
mkdir "$WORK/served"
cp "${MODEL%.onnx}.int8-static.onnx" "$WORK/served/$(basename "$MODEL")"
sed "s#^path = \".*\"#path = \"$WORK/served/$(basename "$MODEL")\"#" "$WORK/base.toml" >"$WORK/served.toml"
measure float-arithmetic "$WORK/served.toml"
