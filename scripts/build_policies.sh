#!/usr/bin/env bash
# Builds the policies of policies-wasm/ for wasm32-unknown-unknown and copies each
# module to .modelless/policies/<name>.wasm, where tests and examples load them.
# Cargo rebuilds only what changed, so running it every time is cheap.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$ROOT/.modelless/policies"
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/policies-wasm/target}"

cargo build --quiet --release --locked --target wasm32-unknown-unknown \
    --manifest-path "$ROOT/policies-wasm/Cargo.toml" --target-dir "$TARGET_DIR"
mkdir -p "$OUT"
for module in "$TARGET_DIR"/wasm32-unknown-unknown/release/modelless_policy_*.wasm; do
    name="$(basename "$module" .wasm)"
    name="${name#modelless_policy_}"
    cp "$module" "$OUT/${name//_/-}.wasm"
done
echo "[setup] policies: $(cd "$OUT" && ls *.wasm | tr '\n' ' ')" >&2
