#!/usr/bin/env bash
# The public API of `modelless` (every feature an app can turn on but `tch` and
# `test-util`), as rustdoc lists it, against the reviewed list in sdk/public-api.txt:
# fails on any item added or removed there, and says how many items the crate root
# and the crate hold against the sizes an app's front door should keep to (30 and
# 120), and fails where a page links to an item of the engine (`modelless-runtime`)
# that `modelless` does not export. UPDATE=1 writes the list as it is now, for a change
# whose API was reviewed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
FEATURES="server,otel,ocr,nvml,warmup-predictor,policies,images"
ROOT_TARGET=30
ALL_TARGET=120
cd "$ROOT"
# Pages of items gone from the API would stay behind a new build.
rm -rf "$CARGO_TARGET_DIR/doc/modelless"
# Read at once: a later doc build with other features writes the same page.
RUSTDOCFLAGS="-D warnings" cargo doc --quiet --locked -p modelless --no-default-features --features "$FEATURES" \
    --no-deps
now="$(python3 scripts/build/public_api.py "$CARGO_TARGET_DIR/doc/modelless/all.html")"
# A type of the engine's that a page links to is one an app meets and cannot name.
unnameable="$(python3 scripts/build/public_api.py --unnameable "$CARGO_TARGET_DIR/doc/modelless" modelless_runtime)"
if [[ -n "$unnameable" ]]; then
    echo "public_api: pages of modelless link to items it does not export:" >&2
    printf '  %s\n' "$unnameable" >&2
    exit 1
fi
all=$(grep -c . <<<"$now")
root=$(grep -vc '::' <<<"$now" || true)
echo "public_api: $root items at the crate root (target $ROOT_TARGET), $all in all (target $ALL_TARGET)"
if [[ "${UPDATE:-}" == 1 ]]; then
    printf '%s\n' "$now" >sdk/public-api.txt
    echo "public_api: wrote sdk/public-api.txt"
fi
if ! diff -u sdk/public-api.txt <(printf '%s\n' "$now"); then
    echo "public_api: the public API differs from sdk/public-api.txt (above: - removed, + added);" >&2
    echo "  review it, then run UPDATE=1 bash scripts/build/public_api.sh and commit the list" >&2
    exit 1
fi
