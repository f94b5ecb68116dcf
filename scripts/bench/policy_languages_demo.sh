#!/usr/bin/env bash
# The demo's burst (classify-photo, EfficientNet-Lite0/1/2 on real photos) steered by
# the policy of each language in turn: Rust's slo-predictive, then the shipped ones in
# Python, TypeScript, Go, Zig and AssemblyScript (and C's queue-guard), each a whole
# demo run. Prints and writes OUT/results.md: per policy, requests sent and failed,
# the share answered within the SLO, switches and the policy's own failures. A
# language not built (see .modelless/policies/languages.txt) is listed as skipped.
#
#   bash scripts/bench/policy_languages_demo.sh [OUT]   (default target/policy-languages; ~2 min a policy)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/target/policy-languages}")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
POLICIES="$ROOT/.modelless/policies"
cd "$ROOT"
mkdir -p "$OUT"

# language|module|parameters
RUNS=(
    "Rust|slo-predictive|"
    "Python|cpu-threshold-py|"
    "TypeScript|cheapest-meeting-slo-ts|"
    "Go|replica-only-go|"
    "Zig|static-zig|{\"variant\":\"efficientnet-lite0\"}"
    "AssemblyScript|schedule-as|{\"variants\":[\"efficientnet-lite2\",\"efficientnet-lite0\"],\"period_ms\":4000}"
    "C|queue-guard|"
)

cargo build --release --locked -p modelless-lab --example demo
demo="$CARGO_TARGET_DIR/release/examples/demo"
{
    echo "| language | policy | sent | failed | within the SLO | switches | policy failures |"
    echo "|---|---|---:|---:|---:|---:|---|"
} >"$OUT/results.md"
for run in "${RUNS[@]}"; do
    IFS='|' read -r language module parameters <<<"$run"
    if [[ ! -f "$POLICIES/$module.wasm" ]]; then
        echo "| $language | \`$module\` | skipped: not built | | | | |" >>"$OUT/results.md"
        continue
    fi
    echo "== $language: $module" >&2
    args=(--policy "$POLICIES/$module.wasm")
    [[ -n "$parameters" ]] && args+=(--parameters "$parameters")
    "$demo" "${args[@]}" >"$OUT/$module.log" 2>"$OUT/$module.err" || echo "   (exit status $?)" >&2
    line="$(grep -E '^[0-9]+ sent, ' "$OUT/$module.log" | tail -1)"
    policy="$(grep -E '^policy ' "$OUT/$module.log" | tail -1)"
    sent="$(sed -E 's/^([0-9]+) sent.*/\1/' <<<"$line")"
    failed="$(sed -E 's/.* ([0-9]+) failed;.*/\1/' <<<"$line")"
    in_slo="$(sed -E 's/.*\(([0-9.]+) % in the SLO\).*/\1/' <<<"$line")"
    switches="$(sed -E 's/.*; ([0-9]+) switches;.*/\1/' <<<"$line")"
    failures="$(sed -E 's/.*failures (\{[^}]*\}).*/\1/' <<<"$policy")"
    echo "| $language | \`$module\` | $sent | $failed | $in_slo % | $switches | $failures |" >>"$OUT/results.md"
    echo "   $line" >&2
done
cat "$OUT/results.md"
