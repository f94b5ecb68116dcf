#!/usr/bin/env bash
# Frees the disk that a long-lived cargo target folder piles up: test and example
# executables nothing has run for DAYS days (builds for other features, profiles or
# revisions; each links ONNX Runtime's, wasmtime's and libtorch's bindings) and
# incremental state. Cargo rebuilds whatever it still needs.
#   bash scripts/build/prune_target.sh [TARGET_DIR] [DAYS]
set -euo pipefail
TARGET="${1:-${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}}"
DAYS="${2:-3}"
[[ -d "$TARGET" ]] || exit 0
before="$(du -sm "$TARGET" | cut -f1)"
# Executables are the files named `<name>-<16 hex>` with no extension. Running one
# updates its access time at least daily (relatime), so an old one went unused.
find "$TARGET" -path '*/deps/*' -type f -regextype posix-extended -regex '.*/[^./]+-[0-9a-f]{16}' \
    -atime "+$DAYS" -delete
find "$TARGET" -maxdepth 3 -type d -name incremental -prune -exec rm -rf {} +
echo "prune_target: $TARGET from ${before} MB to $(du -sm "$TARGET" | cut -f1) MB" >&2
