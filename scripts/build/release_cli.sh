#!/usr/bin/env bash
# What the scripts that run `modelless` need first: the setup (venv, ONNX Runtime,
# models, policies) and the release CLI, copied to DEST so that a rebuild while they
# run does not change what they measure.
#
#   bash scripts/build/release_cli.sh DEST
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
DEST="${1:?usage: release_cli.sh DEST}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"

bash "$ROOT/scripts/setup/base.sh"
(cd "$ROOT" && cargo build --quiet --release --locked -p modelless-lab)
mkdir -p "$(dirname "$DEST")"
cp "$CARGO_TARGET_DIR/release/modelless" "$DEST.partial"
mv "$DEST.partial" "$DEST"
