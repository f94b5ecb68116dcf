#!/usr/bin/env bash
# Reading pages: modelless's `read-text` pipeline in process (lab/examples/read_load.rs)
# against RapidOCR as its users run it (scripts/bench/peers/rapidocr_load.py: one RapidOCR()
# called from N threads), the same PP-OCRv4 models on the same ONNX Runtime. Closed
# loops of 1, 8 and 32 callers on labelled pages of 1, 5, 10 and 25 lines. A third
# run per cell replays the models' own inputs with nothing in between
# (scripts/bench/peers/ocr_models_alone.py): what no server of these models can beat here. The
# runs of a cell follow each other, their order rotating from cell to cell, so that
# the machine's drift falls on all alike. Writes each run's JSON line to
# OUT/runs.jsonl, the table (throughput ratios, p50/p99, stage times) to
# OUT/results.md and the plot to OUT/results.svg.
#
#   bash scripts/bench/ocr.sh [OUT]     (default bench-ocr; ~15 min a round)
#   ROUNDS=1 RUN_S=6 CALLERS="1 8 32" LINES="1 5 10 25"
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-ocr}")"
ROUNDS="${ROUNDS:-1}"
RUN_S="${RUN_S:-6}"
CALLERS="${CALLERS:-1 8 32}"
LINES="${LINES:-1 5 10 25}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

DOCS="$ROOT/.modelless/documents"
[ -f "$DOCS/labels.jsonl" ] || bash scripts/setup/base.sh
RAPIDOCR="$(bash scripts/setup/rapidocr.sh)"
cargo build --release --locked -q -p modelless-lab --example read_load
LOAD="$CARGO_TARGET_DIR/release/examples/read_load"
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"

pages_of() { python3 scripts/data/pages_with_lines.py "$DOCS" "$1"; }

run() { # SYSTEM ROUND LINES CALLERS PAGES...
    local system=$1 round=$2 lines=$3 callers=$4
    shift 4
    local line
    if [ "$system" = modelless ]; then
        line="$("$LOAD" --callers "$callers" --seconds "$RUN_S" "$@")"
    elif [ "$system" = rapidocr ]; then
        line="$("$RAPIDOCR" scripts/bench/peers/rapidocr_load.py --callers "$callers" --seconds "$RUN_S" "$@")"
    else
        line="$("$RAPIDOCR" scripts/bench/peers/ocr_models_alone.py --callers "$callers" --seconds "$RUN_S" "$@")"
    fi
    python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(round=int(sys.argv[2]), page_lines=int(sys.argv[3])); print(json.dumps(r))' \
        "$line" "$round" "$lines" >>"$OUT/runs.jsonl"
    tail -1 "$OUT/runs.jsonl" | python3 -c 'import json, sys
r = json.load(sys.stdin)
print("  round %d, %d-line pages, %d callers, %s: %.2f pages/s, p50 %.0f ms"
      % (r["round"], r["page_lines"], r["callers"], r["system"], r["pages_per_s"], r["p50_ms"]), file=sys.stderr)'

}

cell=0
for round in $(seq 1 "$ROUNDS"); do
    for lines in $LINES; do
        read -r -a pages <<<"$(pages_of "$lines")"
        for callers in $CALLERS; do
            cell=$((cell + 1))
            case $((cell % 3)) in
                1) order="modelless rapidocr models" ;;
                2) order="rapidocr models modelless" ;;
                *) order="models modelless rapidocr" ;;
            esac
            for system in $order; do
                run "$system" "$round" "$lines" "$callers" "${pages[@]}"
            done
        done
    done
done
python3 scripts/bench/ocr_table.py "$OUT" | tee "$OUT/results.md"
echo "bench_ocr: $OUT/results.md, $OUT/results.svg" >&2
