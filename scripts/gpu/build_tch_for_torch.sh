#!/usr/bin/env bash
# The release CLI with the `tch` feature, built against another PyTorch than the one
# tch is made for (2.13.0): the GPU machine's PyTorch is 2.11.0.
#
#   bash scripts/gpu/build_tch_for_torch.sh VERSION OUT
#
# - PyTorch VERSION from PyPI, in a venv of its own in the per-user cache (4.7 GB);
# - torch-sys's C++ wrappers copied and fitted to its headers: the operators that
#   PyTorch lacks raise "not in this PyTorch" (scripts/gpu/tch_stub_missing_ops.py);
# - this checkout's HEAD, exported to a scratch folder so that the patch leaves its
#   Cargo.lock alone, built with that torch-sys, LIBTORCH_BYPASS_VERSION_CHECK set;
# - stripped, at OUT.
# At run time the binary loads libtorch from LD_LIBRARY_PATH (that PyTorch's torch/lib).
set -euo pipefail
[ $# -eq 2 ] || { sed -n 5p "$0" | sed 's/^# *//'; exit 2; }
VERSION=$1 OUT=$(realpath -m "$2")
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${MODELLESS_CACHE:-$HOME/.cache/modelless}"
VENV="$CACHE/torch-$VERSION-venv"
log() { echo "build_tch_for_torch: $*" >&2; }

if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    log "installing torch==$VERSION from PyPI into $VENV (4.7 GB)"
    rm -rf "$VENV" && python3 -m venv "$VENV"
    "$VENV/bin/pip" install -q --no-cache-dir --disable-pip-version-check "torch==$VERSION" numpy
fi
INCLUDE="$("$VENV/bin/python" -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "include"))')"

cd "$ROOT"
SYS_VERSION="$(grep -A1 '^name = "torch-sys"$' Cargo.lock | sed -n 's/^version = "\(.*\)"$/\1/p')"
cargo fetch --locked -q
SRC="$(ls -d "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/"torch-sys-$SYS_VERSION" | head -1)"
SYS="$CACHE/torch-sys-$SYS_VERSION-for-$VERSION"
if [ ! -f "$SYS/.fitted" ]; then
    log "fitting torch-sys $SYS_VERSION's wrappers to PyTorch $VERSION's headers"
    rm -rf "$SYS" && cp -r "$SRC" "$SYS"
    python3 scripts/gpu/tch_stub_missing_ops.py "$SYS" "$INCLUDE" | sed 's/^/build_tch_for_torch: /' >&2
    touch "$SYS/.fitted"
fi

WORK="$CACHE/tch-$VERSION-workspace"
rm -rf "$WORK" && mkdir -p "$WORK"
git archive HEAD | tar -x -C "$WORK"
TARGET="${TCH_TARGET_DIR:-$CACHE/target-tch-$VERSION}"
log "building $(git rev-parse --short HEAD) with the tch feature in $TARGET"
(cd "$WORK" && LIBTORCH_USE_PYTORCH=1 LIBTORCH_BYPASS_VERSION_CHECK=1 PATH="$VENV/bin:$PATH" \
    CARGO_TARGET_DIR="$TARGET" cargo build --release -q -p modelless-lab --features tch \
    --config "patch.crates-io.torch-sys.path=\"$SYS\"")
strip -o "$OUT" "$TARGET/release/modelless"
log "wrote $OUT ($(du -h "$OUT" | cut -f1))"
