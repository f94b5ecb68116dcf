#!/usr/bin/env bash
# A venv with RapidOCR and its dependencies at .modelless/rapidocr-venv, for comparing
# the read-text pipeline with it (scripts/bench/peers/rapidocr_pages.py). Re-running is cheap.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.modelless/rapidocr-venv"
REQ="$ROOT/scripts/setup/requirements-rapidocr.txt"
hash="$(sha256sum "$REQ" | cut -d' ' -f1)"
if [[ ! -x "$VENV/bin/pip" || "$(cat "$VENV/requirements.sha256" 2>/dev/null)" != "$hash" ]]; then
    echo "setup_rapidocr: installing RapidOCR into $VENV" >&2
    rm -rf "$VENV"
    python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REQ"
    echo "$hash" >"$VENV/requirements.sha256"
fi
echo "$VENV/bin/python"
