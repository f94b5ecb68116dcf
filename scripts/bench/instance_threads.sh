#!/usr/bin/env bash
# How a variant's cores are best split into instances: EfficientNet-Lite0 on photos,
# one instance of 2 threads against 2 instances of 1 thread, closed loop at
# CONCURRENCY clients, in ROUNDS interleaved rounds of SECONDS each (the machine's
# speed drifts within a minute: only ratios within a round are compared).
#
#   ROUNDS=3 SECONDS_EACH=20 CONCURRENCY=8 bash scripts/bench/instance_threads.sh
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ROUNDS="${ROUNDS:-3}"
SECONDS_EACH="${SECONDS_EACH:-20}"
CONCURRENCY="${CONCURRENCY:-8}"
OUT="${OUT:-$ROOT/target/instance-threads}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so}"
bash "$ROOT/scripts/setup/base.sh"
cargo build --release --locked -q -p modelless-lab
CLI="$CARGO_TARGET_DIR/release/modelless"
mkdir -p "$OUT"
config() { # instances threads
    sed -e "s/^cores = 3/cores = 2/" \
        -e "s/^onnx = { intra_op_threads = 1 }/onnx = { intra_op_threads = $2 }\ninstances = $1/" \
        "$ROOT/experiments/lite-instances.toml" >"$OUT/lite-$1x$2.toml"
    # The copy lives beside the experiment's, so its relative paths still hold.
    cp "$OUT/lite-$1x$2.toml" "$ROOT/experiments/.lite-$1x$2.toml"
}
config 1 2
config 2 1
trap 'rm -f "$ROOT"/experiments/.lite-*.toml' EXIT
cat >"$OUT/load.toml" <<LOAD
[[tasks]]
task = "classify-photo"
[tasks.pattern]
kind = "constant"
rate = 1
duration_s = $SECONDS_EACH
LOAD
for round in $(seq 1 "$ROUNDS"); do
    for shape in 1x2 2x1; do
        echo "bench_instance_threads: round $round, $shape" >&2
        "$CLI" loadgen --config "$ROOT/experiments/.lite-$shape.toml" --load "$OUT/load.toml" \
            --images "$ROOT/.modelless/photos" --concurrency "$CONCURRENCY" \
            --out "$OUT/$shape-$round" >"$OUT/$shape-$round.log" 2>&1
    done
done
python3 - "$OUT" "$ROUNDS" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def figures(run):
    s = json.load(open(f"{out}/{run}/summary.json"))[0]
    return s["throughput_per_s"], s["p99_ms"]
print("| round | 1×2 answers/s | 2×1 answers/s | 2×1 / 1×2 | 1×2 p99 ms | 2×1 p99 ms |")
print("|---|---:|---:|---:|---:|---:|")
ratios = []
for r in range(1, rounds + 1):
    (a, ap), (b, bp) = figures(f"1x2-{r}"), figures(f"2x1-{r}")
    ratios.append(b / a)
    print(f"| {r} | {a:.1f} | {b:.1f} | {b / a:.2f} | {ap:.0f} | {bp:.0f} |")
print(f"\nmedian ratio of answers a second, 2 instances × 1 thread over 1 × 2: {sorted(ratios)[len(ratios) // 2]:.2f}")
PY
