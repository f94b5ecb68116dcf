#!/usr/bin/env bash
# What an app pays to build modelless: the embedding app (examples/embedding), copied
# outside the workspace, built in release on an empty target dir with modelless's
# default features (its `readme` binary, the README's first example), then again with
# each feature set named after it added. Per step: wall time, crates compiled, and
# the binary's size. Registry downloads are not timed (the crates are fetched first).
#
#   bash scripts/build/cold_build.sh [FEATURES...]   (default: "server" "policies,server")
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
WORK="$(mktemp -d)"
trap 'rm -rf "$WORK"' EXIT
log() { echo "cold_build: $*" >&2; }

cp -r "$ROOT/examples/embedding/." "$WORK/app"
export CARGO_TARGET_DIR="$WORK/target"
unset CARGO_INCREMENTAL RUSTFLAGS
manifest="$WORK/app/Cargo.toml"

# use FEATURES: the app's dependency on modelless, by absolute path, with FEATURES.
use() {
    local list
    list="$(sed 's/[^,][^,]*/"&"/g; s/,/, /g' <<<"$1")"
    sed -i "s|^modelless = .*|modelless = { path = \"$ROOT/sdk\", features = [$list] }|" "$manifest"
}

# step NAME FEATURES BIN: builds BIN with FEATURES; prints a row.
step() {
    use "$2"
    cargo fetch --quiet --manifest-path "$manifest"
    local start end compiled
    start=$(date +%s.%N)
    compiled=$(cargo build --release --offline --manifest-path "$manifest" --bin "$3" 2>&1 | tee "$WORK/$1.log" |
        grep -c '^ *Compiling' || true)
    end=$(date +%s.%N)
    grep -q '^ *Finished' "$WORK/$1.log" || { cat "$WORK/$1.log" >&2; exit 1; }
    awk -v step="$1" -v features="${2:-(default)}" -v took="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" \
        -v compiled="$compiled" -v bytes="$(stat -c %s "$CARGO_TARGET_DIR/release/$3")" \
        'BEGIN { printf "| %s | %s | %.0f s | %d | %.1f MB |\n", step, features, took, compiled, bytes / 1e6 }'
}

echo "| step | features | time | crates compiled | binary |"
echo "|---|---|---:|---:|---:|"
step cold "" readme
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(server policies,server)
for set in "${sets[@]}"; do
    log "adding $set"
    # The app's own binary steers with a policy: it builds once `policies` is on.
    step "then $set" "$set" "$([[ $set == *policies* ]] && echo embedding || echo readme)"
done
