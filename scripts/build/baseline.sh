#!/usr/bin/env bash
# Builds the CLI of another git revision, for before/after benchmarks, and copies it
# to DEST; with POLICIES, also that revision's policy modules, into that folder. In a worktree and a target folder of its own (built once, then reused
# incrementally): in the shared one its binary would take the place of this
# revision's.
#
#   bash scripts/build/baseline.sh REVISION DEST [POLICIES]   (the first time: a full release build)
set -euo pipefail

REVISION="$1"
DEST="$(realpath -m "$2")"
POLICIES="${3:+$(realpath -m "$3")}"
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
# Kept, at the same path, so that the next build of the same revision finds its
# outputs fresh (cargo goes by the sources' paths and times).
SRC="$CARGO_TARGET_DIR/baseline/src"
git -C "$ROOT" worktree prune
if [[ -e "$SRC/.git" ]] && git -C "$SRC" checkout --quiet --detach "$REVISION" 2>/dev/null; then
    :
else
    rm -rf "$SRC"
    git -C "$ROOT" worktree add --detach --force "$SRC" "$REVISION" >/dev/null
fi
(cd "$SRC" && CARGO_TARGET_DIR="$CARGO_TARGET_DIR/baseline" \
    cargo build --quiet --release --locked -p modelless-lab)
mkdir -p "$(dirname "$DEST")"
cp "$CARGO_TARGET_DIR/baseline/release/modelless" "$DEST"
if [[ -n "$POLICIES" ]]; then
    (cd "$SRC" && CARGO_TARGET_DIR="$CARGO_TARGET_DIR/baseline" bash scripts/policies/build.sh 2>/dev/null)
    mkdir -p "$POLICIES"
    cp "$SRC"/.modelless/policies/*.wasm "$POLICIES"
fi
