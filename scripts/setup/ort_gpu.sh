#!/usr/bin/env bash
# ONNX Runtime's GPU build for ONNX variants on `cuda:N`: PyPI's onnxruntime-gpu
# 1.31.1 (built for CUDA 13) with the CUDA and cuDNN libraries it names as extras,
# under .modelless/ort-gpu (about 2 GB; the CPU build of scripts/setup/base.sh stays the
# default). Run after scripts/setup/base.sh. Idempotent. Prints, for `eval`, the library
# to name in `library_path` or ORT_DYLIB_PATH (as MODELLESS_ORT_GPU_LIB) and the CUDA
# libraries' folders on LD_LIBRARY_PATH:
#   eval "$(bash scripts/setup/ort_gpu.sh)"; ORT_DYLIB_PATH="$MODELLESS_ORT_GPU_LIB" …
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
STATE="$ROOT/.modelless"
DIR="$STATE/ort-gpu"
VERSION="1.31.1"
PIP="$STATE/venv/bin/pip"

log() { echo "setup_ort_gpu: $*" >&2; }

[[ -x "$PIP" ]] || { log "error: run scripts/setup/base.sh first"; exit 1; }
if [[ ! -f "$DIR/.installed-$VERSION" ]]; then
    log "installing onnxruntime-gpu $VERSION with CUDA 13 and cuDNN from PyPI into $DIR"
    rm -rf "$DIR"
    "$PIP" install -q --disable-pip-version-check --target "$DIR" "onnxruntime-gpu[cuda,cudnn]==$VERSION" >&2
    touch "$DIR/.installed-$VERSION"
fi
libs=("$DIR"/onnxruntime/capi/libonnxruntime.so.*.*.*)
[[ -f "${libs[0]}" ]] || { log "error: no libonnxruntime.so.X.Y.Z in $DIR/onnxruntime/capi"; exit 1; }
cuda_libs="$(find "$DIR/nvidia" -type d -name lib 2>/dev/null | sort | paste -sd: -)"
echo "export MODELLESS_ORT_GPU_LIB=\"${libs[0]}\""
echo "export LD_LIBRARY_PATH=\"$cuda_libs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
