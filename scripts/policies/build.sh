#!/usr/bin/env bash
# Builds the policies of policies-wasm/ for wasm32-unknown-unknown (Rust crates, and
# C sources under policies-wasm/c/) and puts each module at
# .modelless/policies/<name>.wasm, where tests and examples load them.
# Cargo rebuilds only what changed, so running it every time is cheap.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$ROOT/.modelless/policies"
# Apart from the root workspace's: both build the policy crates, cdylibs whose files
# carry no hash, and would overwrite each other's.
TARGET_DIR="${CARGO_TARGET_DIR:-$ROOT/target}/policies-wasm"

cargo build --quiet --release --locked --target wasm32-unknown-unknown \
    --manifest-path "$ROOT/policies-wasm/Cargo.toml" --target-dir "$TARGET_DIR"
mkdir -p "$OUT"
for module in "$TARGET_DIR"/wasm32-unknown-unknown/release/modelless_policy_*.wasm; do
    name="$(basename "$module" .wasm)"
    name="${name#modelless_policy_}"
    cp "$module" "$OUT/${name//_/-}.wasm"
done
# Policies in C (policies-wasm/c/<name>/policy.c): clang's wasm32 target and wasm-ld
# (Debian: clang, lld). Each is also built natively with its test driver, so that tests
# can compare its decisions with the module's.
if command -v clang >/dev/null && command -v wasm-ld >/dev/null; then
    mkdir -p "$OUT/native"
    for dir in "$ROOT"/policies-wasm/c/*/; do
        name="$(basename "$dir")"
        clang --target=wasm32-unknown-unknown -O2 -nostdlib -Wl,--no-entry -Wall -Werror \
            -o "$OUT/$name.wasm" "$dir/policy.c"
        cc -O2 -Wall -Werror -Wno-unused-function -o "$OUT/native/$name" "$dir/policy.c" "$dir/test_native.c"
    done
else
    echo "[setup] warning: clang or wasm-ld missing (Debian: clang lld): the C policies are not built" >&2
fi
echo "[setup] policies: $(cd "$OUT" && ls *.wasm | tr '\n' ' ')" >&2
