#!/usr/bin/env bash
# Builds the modelless image with podman or buildah, from this machine's release
# binary, the shared libraries it and ONNX Runtime need (found with ldd), and a
# folder of models with their config.toml baked in at /models.
#
#   bash deploy/build-image.sh [MODELS_DIR] [TAG]
#       MODELS_DIR  default: the MobileNetV2 family with deploy/models.toml as config
#       TAG         default: localhost/modelless:dev
#   ROOTFS_ONLY=1   only gather the files (no image tool needed)
#   MODELLESS=PATH  put this build of modelless in (default: a release build)
#   ROOTFS=DIR      gather the files here (default: deploy/rootfs)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TAG="${2:-localhost/modelless:dev}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
log() { echo "build-image: $*" >&2; }

if [[ -n "${MODELLESS:-}" ]]; then
    BIN="$MODELLESS"
else
    (cd "$ROOT" && cargo build --quiet --release --locked -p modelless-lab)
    BIN="$CARGO_TARGET_DIR/release/modelless"
fi
ORT="${ORT_DYLIB_PATH:-$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so}"
[[ -e "$ORT" ]] || { log "no ONNX Runtime library at $ORT: run make setup"; exit 1; }

ROOTFS="${ROOTFS:-$ROOT/deploy/rootfs}"
rm -rf "$ROOTFS"
mkdir -p "$ROOTFS/opt/modelless/bin" "$ROOTFS/opt/modelless/lib" "$ROOTFS/models" "$ROOTFS/tmp"
cp "$BIN" "$ROOTFS/opt/modelless/bin/modelless"
cp -L "$ORT" "$ROOTFS/opt/modelless/lib/libonnxruntime.so"
# Every library either loads, at the path the loader looks for it (the dynamic loader
# itself included): the image has no other libc.
for file in "$BIN" "$ORT"; do
    ldd "$file" | awk '/=> \//{print $3} /^[ \t]*\/[^ ]+ \(/{print $1}'
done | sort -u | while read -r lib; do
    mkdir -p "$ROOTFS$(dirname "$lib")"
    cp -L "$lib" "$ROOTFS$lib"
done

if [[ -n "${1:-}" ]]; then
    cp -r "$1"/. "$ROOTFS/models/"
else
    cp "$ROOT"/.modelless/models/mobilenetv2_*.onnx "$ROOTFS/models/"
    cp "$ROOT/deploy/models.toml" "$ROOTFS/models/config.toml"
fi
[[ -e "$ROOTFS/models/config.toml" ]] || { log "no config.toml in the models folder"; exit 1; }
log "rootfs: $(du -sh "$ROOTFS" | cut -f1) in $ROOTFS"
[[ -n "${ROOTFS_ONLY:-}" ]] && exit 0

# The build context is the folder that holds rootfs/.
context="$(dirname "$ROOTFS")"
[[ "$(basename "$ROOTFS")" == rootfs ]] || { log "ROOTFS must be a folder named rootfs"; exit 1; }
if command -v podman >/dev/null; then
    podman build -f "$ROOT/deploy/Containerfile" -t "$TAG" "$context"
elif command -v buildah >/dev/null; then
    buildah bud -f "$ROOT/deploy/Containerfile" -t "$TAG" "$context"
else
    log "neither podman nor buildah is installed (apt-get install podman)"
    exit 1
fi
log "built $TAG"
