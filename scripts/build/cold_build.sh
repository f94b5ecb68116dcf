#!/usr/bin/env bash
# What an app pays to build modelless: the embedding app (examples/embedding), copied
# outside the workspace, built in release on an empty target dir with modelless's
# default features (its `readme` binary, the README's first example), then again with
# each feature set named after it added. Per step: wall time, crates compiled, those
# of them an earlier step had built (rebuilt), and the binary's size. Registry downloads are not timed (the crates are fetched first).
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

# step NAME FEATURES BIN: builds BIN with FEATURES; prints a row: the crates it
# compiled, and of them those an earlier step had compiled already (rebuilt because
# their features or dependencies changed).
step() {
    use "$2"
    cargo fetch --quiet --manifest-path "$manifest"
    local start end
    start=$(date +%s.%N)
    cargo build --release --offline --manifest-path "$manifest" --bin "$3" >"$WORK/build.log" 2>&1 ||
        { cat "$WORK/build.log" >&2; exit 1; }
    end=$(date +%s.%N)
    awk '$1 == "Compiling" { print $2, $3 }' "$WORK/build.log" | sort -u >"$WORK/now"
    local compiled rebuilt
    compiled=$(wc -l <"$WORK/now")
    rebuilt=$(comm -12 "$WORK/now" "$WORK/before" | wc -l)
    sort -u "$WORK/now" "$WORK/before" -o "$WORK/before"
    awk -v step="$1" -v features="${2:-(default)}" -v took="$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" \
        -v compiled="$compiled" -v rebuilt="$rebuilt" -v bytes="$(stat -c %s "$CARGO_TARGET_DIR/release/$3")" \
        'BEGIN { printf "| %s | %s | %.0f s | %d | %d | %.1f MB |\n", step, features, took, compiled, rebuilt, bytes / 1e6 }'
}

: >"$WORK/before"
echo "| step | features | time | crates compiled | of them rebuilt | binary |"
echo "|---|---|---:|---:|---:|---:|"
step cold "" readme
sets=("$@")
[[ ${#sets[@]} -gt 0 ]] || sets=(server policies,server)
for set in "${sets[@]}"; do
    log "adding $set"
    # The app's own binary steers with a policy: it builds once `policies` is on.
    step "then $set" "$set" "$([[ $set == *policies* ]] && echo embedding || echo readme)"
done
