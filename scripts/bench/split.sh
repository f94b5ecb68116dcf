#!/usr/bin/env bash
# Seed 004's figure for `read-text`: fused (one `modelless serve` runs the whole
# pipeline) against split (detection in one `modelless serve`, direction and
# recognition in another, the lines passed through Redis streams by
# lab/examples/read_split.rs), on pages of 1, 5, 10 and 25 lines: throughput with
# CALLERS callers, and latency at zero load (one caller) split by stage and broker.
# Starts redis-server (Debian's) and the three servers on loopback, runs fused and
# split one after the other in each cell, and stops everything it started. Writes
# OUT/runs.jsonl, the table OUT/results.md and the plot OUT/results.svg.
#
#   bash scripts/bench/split.sh [OUT]     (default bench-split; ~6 min)
#   RUN_S=8 CALLERS=8 LINES="1 5 10 25" WORKERS=32
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-split}")"
RUN_S="${RUN_S:-8}"
CALLERS="${CALLERS:-8}"
LINES="${LINES:-1 5 10 25}"
WORKERS="${WORKERS:-32}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

DOCS="$ROOT/.modelless/documents"
[ -f "$DOCS/labels.jsonl" ] || bash scripts/setup/base.sh
command -v redis-server >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -q redis-server >/dev/null
cargo build --release --locked -q -p modelless-lab --example read_split --bin modelless
SPLIT="$CARGO_TARGET_DIR/release/examples/read_split"
MODELLESS="$CARGO_TARGET_DIR/release/modelless"
mkdir -p "$OUT"
: >"$OUT/runs.jsonl"

pids=()
cleanup() { for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
redis-server --bind 127.0.0.1 --port 6390 --save "" --appendonly no >"$OUT/redis.log" 2>&1 &
pids+=($!)
serve() { # CONFIG GRPC_PORT HTTP_PORT
    "$MODELLESS" serve --config "$1" --grpc "127.0.0.1:$2" --http "127.0.0.1:$3" >"$OUT/serve-$2.log" 2>&1 &
    pids+=($!)
}
# Both ways pad lines alike, by steps as `read-line` must (it sees no page), so that
# the difference is the split's. Beside the examples' level, for their relative paths.
mkdir -p target
sed 's/^line_padding = .*/line_padding = "steps"/' examples/read_text.toml >target/read_text_steps.toml
serve target/read_text_steps.toml 8301 8300
serve examples/read_text_find.toml 8311 8310
serve examples/read_text_read.toml 8321 8320
for port in 8300 8310 8320; do
    for _ in $(seq 1 120); do curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null && break; sleep 1; done
    curl -sf "http://127.0.0.1:$port/v2/health/ready" >/dev/null || { echo "server on $port not ready" >&2; exit 1; }
done

pages_of() { python3 scripts/data/pages_with_lines.py "$DOCS" "$1"; }

cell=0
for lines in $LINES; do
    read -r -a pages <<<"$(pages_of "$lines")"
    for callers in 1 "$CALLERS"; do
        cell=$((cell + 1))
        if [ $((cell % 2)) -eq 1 ]; then order="fused split"; else order="split fused"; fi
        for mode in $order; do
            if [ "$mode" = fused ]; then how=(--fused 127.0.0.1:8301); else
                how=(--split 127.0.0.1:8311,127.0.0.1:8321 --redis redis://127.0.0.1:6390 --workers "$WORKERS"); fi
            line="$("$SPLIT" "${how[@]}" --callers "$callers" --seconds "$RUN_S" "${pages[@]}")"
            python3 -c 'import json, sys; r = json.loads(sys.argv[1]); r["page_lines"] = int(sys.argv[2]); print(json.dumps(r))' \
                "$line" "$lines" | tee -a "$OUT/runs.jsonl" >&2
        done
    done
done
python3 scripts/bench/split_table.py "$OUT" | tee "$OUT/results.md"
echo "bench_split: $OUT/results.md, $OUT/results.svg" >&2
