#!/usr/bin/env bash
# The read-text pipeline with int8 copies of its stages (made by `modelless variants
# make CONFIG --task detect-text|recognize-text --kind int8-static`) against the
# float stages, in four setups: float, int8 detection, int8 recognition, both.
# For each: the character accuracy on the labelled pages (lab/examples/read_pages.rs
# scored by scripts/bench/ocr_accuracy.py), and pages a second for CALLERS callers in a
# closed loop on the LINES-line pages (lab/examples/read_load.rs), the setups run
# one after another in each round, their order rotating, and each one's pages a
# second divided by float's of the same round. With DET_FOLDED and REC_FOLDED (the
# `--kind folded` copies: float32, the same outputs), two setups more: each int8
# stage beside the other stage's folded copy, as a task with both kinds of copies
# can serve it. Writes OUT/accuracy.txt, OUT/runs.jsonl and OUT/results.md.
#
#   bash scripts/bench/ocr_copies.sh CONFIG [OUT]     (default OUT: bench-ocr-copies)
#   DET=det-736 DET_COPY=det-736-int8-static REC=rec-v4 REC_COPY=rec-v4-int8-static
#   DET_FOLDED= REC_FOLDED= (unset: the four setups alone)
#   ROUNDS=3 RUN_S=8 CALLERS=8 LINES=10 PAGES=200 (pages read for accuracy)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CONFIG="$(realpath "${1:?usage: ocr_copies.sh CONFIG [OUT]}")"
OUT="$(realpath -m "${2:-$ROOT/bench-ocr-copies}")"
DET="${DET:-det-736}" DET_COPY="${DET_COPY:-det-736-int8-static}"
REC="${REC:-rec-v4}" REC_COPY="${REC_COPY:-rec-v4-int8-static}"
ROUNDS="${ROUNDS:-3}" RUN_S="${RUN_S:-8}" CALLERS="${CALLERS:-8}" LINES="${LINES:-10}" PAGES="${PAGES:-200}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

DOCS="$ROOT/.modelless/documents"
[ -f "$DOCS/labels.jsonl" ] || bash scripts/setup/base.sh
cargo build --release --locked -q -p modelless-lab --example read_load --example read_pages
BIN="$CARGO_TARGET_DIR/release/examples"
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"
: >"$OUT/accuracy.txt"

SETUPS="float det rec both"
if [ -n "${DET_FOLDED:-}" ] && [ -n "${REC_FOLDED:-}" ]; then
    SETUPS="$SETUPS det+folded rec+folded"
fi
variants() { # SETUP → detection and recognition variants
    case $1 in
        float) echo "$DET $REC" ;;
        det) echo "$DET_COPY $REC" ;;
        rec) echo "$DET $REC_COPY" ;;
        both) echo "$DET_COPY $REC_COPY" ;;
        det+folded) echo "$DET_COPY $REC_FOLDED" ;;
        rec+folded) echo "$DET_FOLDED $REC_COPY" ;;
    esac
}

for setup in $SETUPS; do
    read -r det rec <<<"$(variants "$setup")"
    echo "reading $PAGES pages with $det and $rec" >&2
    "$BIN/read_pages" --config "$CONFIG" --detect "$det" --recognize "$rec" --pages "$PAGES" \
        --out "$OUT/read-$setup.jsonl"
    echo "$setup: $(python3 scripts/bench/ocr_accuracy.py "$DOCS" "$OUT/read-$setup.jsonl")" | tee -a "$OUT/accuracy.txt" >&2
done

read -r -a pages <<<"$(python3 scripts/data/pages_with_lines.py "$DOCS" "$LINES")"
for round in $(seq 1 "$ROUNDS"); do
    order=($SETUPS)
    shift_by=$(((round - 1) % ${#order[@]}))
    order=("${order[@]:shift_by}" "${order[@]:0:shift_by}")
    for setup in "${order[@]}"; do
        read -r det rec <<<"$(variants "$setup")"
        line="$("$BIN/read_load" --config "$CONFIG" --detect "$det" --recognize "$rec" \
            --callers "$CALLERS" --seconds "$RUN_S" "${pages[@]}")"
        python3 -c 'import json,sys; r=json.loads(sys.argv[1]); r.update(round=int(sys.argv[2]), setup=sys.argv[3]); print(json.dumps(r))' \
            "$line" "$round" "$setup" >>"$OUT/runs.jsonl"
        tail -1 "$OUT/runs.jsonl" | python3 -c 'import json, sys
r = json.load(sys.stdin)
print("  round %d, %s: %.2f pages/s, p50 %.0f ms" % (r["round"], r["setup"], r["pages_per_s"], r["p50_ms"]), file=sys.stderr)'
    done
done

python3 - "$OUT" "$CALLERS" "$LINES" $SETUPS <<'PY' | tee "$OUT/results.md"
import json, statistics, sys
from pathlib import Path
out, callers, lines, setups = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
runs = [json.loads(l) for l in open(out / "runs.jsonl")]
accuracy = {l.split(":")[0]: l.split("character accuracy ")[1].split(" %")[0] for l in open(out / "accuracy.txt")}
print(f"| setup | character accuracy | pages/s ({callers} callers, {lines}-line pages) | × float (median of rounds) |")
print("|---|---:|---:|---:|")
for setup in setups:
    mine = {r["round"]: r["pages_per_s"] for r in runs if r["setup"] == setup}
    base = {r["round"]: r["pages_per_s"] for r in runs if r["setup"] == "float"}
    ratios = [mine[k] / base[k] for k in mine if k in base]
    print(f"| {setup} | {accuracy.get(setup, '?')} % | {statistics.median(mine.values()):.2f} | "
          f"{statistics.median(ratios):.2f}× |")
PY
