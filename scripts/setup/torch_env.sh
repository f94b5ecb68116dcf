#!/usr/bin/env bash
# Prints the environment a build or run with the `tch` feature needs, for `eval`:
# torch-sys finds libtorch through the venv's python (LIBTORCH_USE_PYTORCH=1), and the
# binaries load it from torch/lib at run time.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
VENV="$ROOT/.modelless/torch-venv"
[[ -x "$VENV/bin/python" ]] || { echo "torch_env: run scripts/setup/torch.sh first" >&2; exit 1; }
# The venv shared in the per-user cache, by its own path: torch-sys keeps the library
# path it found in the (shared) target folder, which must outlive this clone.
VENV="$(readlink -f "$VENV")"
lib="$("$VENV/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))' 2>/dev/null)"
echo "export LIBTORCH_USE_PYTORCH=1"
echo "export PATH=\"$VENV/bin:\$PATH\""
echo "export LD_LIBRARY_PATH=\"$lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
