#!/usr/bin/env bash
# Steering the `read-text` pipeline under a load that rises past what its most
# accurate detection variant can serve (lab/examples/read_steer.rs): the policy
# (slo-predictive by default) against each detection variant alone, one after the
# other, on the same arrivals. Writes each run's pages to OUT/<run>.jsonl, the
# summaries to OUT/runs.jsonl, the table to OUT/results.md and the plot of the
# policy's run (latency over time, by detection variant) to OUT/results.svg.
#
#   bash scripts/bench/steer_ocr.sh [OUT]     (default steer-ocr; ~6 min)
#   LINES=1 FROM=2 TO=10 RUN_S=60 SLO_MS=1000 DETECT_SLO_MS=500 POLICY=slo-predictive
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/steer-ocr}")"
LINES="${LINES:-1}"
FROM="${FROM:-2}"
TO="${TO:-10}"
RUN_S="${RUN_S:-60}"
SLO_MS="${SLO_MS:-1000}"
DETECT_SLO_MS="${DETECT_SLO_MS:-500}"
POLICY="${POLICY:-slo-predictive}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

DOCS="$ROOT/.modelless/documents"
[ -f "$DOCS/labels.jsonl" ] || bash scripts/setup/base.sh
[ -f ".modelless/policies/$POLICY.wasm" ] || bash scripts/policies/build.sh
cargo build --release --locked -q -p modelless-lab --example read_steer
STEER="$CARGO_TARGET_DIR/release/examples/read_steer"
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
read -r -a pages <<<"$(python3 scripts/data/pages_with_lines.py "$DOCS" "$LINES")"
variants="$(python3 -c 'import tomllib; c = tomllib.load(open("examples/read_text.toml", "rb")); print(" ".join(v["name"] for t in c["tasks"] if t["name"] == "detect-text" for v in t["variants"]))')"
for run in policy $variants; do
    if [ "$run" = policy ]; then how=(--policy ".modelless/policies/$POLICY.wasm"); else how=(--variant "$run"); fi
    echo "  $run ..." >&2
    "$STEER" "${how[@]}" --slo-ms "$SLO_MS" --detect-slo-ms "$DETECT_SLO_MS" --from "$FROM" --to "$TO" \
        --seconds "$RUN_S" --out "$OUT/$run.jsonl" "${pages[@]}" 2>/dev/null >>"$OUT/runs.jsonl"
done
python3 scripts/bench/steer_ocr_table.py "$OUT" "$SLO_MS" | tee "$OUT/results.md"
echo "steer_ocr: $OUT/results.md, $OUT/results.svg" >&2
