#!/usr/bin/env bash
# Do replicas that switch variants in the same second cost SLO violations? Three
# replicas behind nginx (scripts/fleet/run.sh) under a steady open-loop load, steered by
# the schedule policy between two variants of equal cost (MobileNetV2-1.0 twice), so
# that only the switch itself can cost anything: every PERIOD_MS all replicas switch
# together, or staggered by a third of the period each, or (the control) never. The
# modes run in ROUNDS interleaved rounds; each replica's active variant is polled
# from /metrics. Writes each run's loadgen files, results.md and results.json.
#
#   bash scripts/bench/collisions.sh [OUT]      (default bench-collisions; ~6 min)
#   RATE=150 RUN_S=40 PERIOD_MS=5000 ROUNDS=2 POLL_S=0.1
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-collisions}")"
RATE="${RATE:-150}"
RUN_S="${RUN_S:-40}"
PERIOD_MS="${PERIOD_MS:-5000}"
ROUNDS="${ROUNDS:-2}"
export POLL_S="${POLL_S:-0.1}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"
log() { echo "bench_collisions: $*" >&2; }

rm -rf "$OUT"
bash scripts/build/release_cli.sh "$OUT/bin/modelless"
export MODELLESS="$OUT/bin/modelless"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so}"

# One config per mode and replica: the offset of its schedule.
config() { # mode replica offset_ms period_ms
    local model="$ROOT/.modelless/models/mobilenetv2_1.0.onnx"
    cat <<TOML
[onnxruntime]
intra_op_threads = 1
spinning = false

[policy]
module = "$ROOT/.modelless/policies/schedule.wasm"
tick_ms = 100
parameters = { variants = ["mobilenetv2-1.0", "mobilenetv2-1.0-twin"], period_ms = $4, offset_ms = $3 }

[[tasks]]
name = "classify-image"
active = "mobilenetv2-1.0"
latency_slo_ms = 150

[[tasks.variants]]
name = "mobilenetv2-1.0"
path = "$model"
accuracy = 71.8
preload = true
profile = "measure"
batching = { max_batch_size = 8, max_queue_delay_us = 0, max_queue_size = 4096 }

[[tasks.variants]]
name = "mobilenetv2-1.0-twin"
path = "$model"
accuracy = 71.8
preload = true
profile = "measure"
batching = { max_batch_size = 8, max_queue_delay_us = 0, max_queue_size = 4096 }

[server]
drain_timeout_s = 10
TOML
}
for ((i = 0; i < 3; i++)); do
    config never "$i" 0 100000000 >"$OUT/never-$i.toml"
    config together "$i" 0 "$PERIOD_MS" >"$OUT/together-$i.toml"
    config staggered "$i" $((i * PERIOD_MS / 3)) "$PERIOD_MS" >"$OUT/staggered-$i.toml"
done
cat >"$OUT/load.toml" <<TOML
seed = 9
[[tasks]]
task = "classify-image"
slo_ms = 150
pattern = { kind = "constant", rate = $RATE, duration_s = $RUN_S }
TOML
cat >"$OUT/run.sh" <<'RUN'
set -euo pipefail
read -r -a pids <<<"$FLEET_PIDS"
(
    while true; do
        now=$(date +%s.%N)
        for ((i = 0; i < ${#pids[@]}; i++)); do
            port=$((BASE_PORT + 2 * i + 1))
            active=$(curl -s --max-time 1 "http://127.0.0.1:$port/metrics" |
                awk '/^modelless_task_active_variant\{/ && $NF == 1 { match($0, /variant="[^"]*"/); print substr($0, RSTART + 9, RLENGTH - 10) }')
            echo "$now $i ${active:--}"
        done
        sleep "$POLL_S"
    done
) >"$RUN_DIR/active.txt" &
poller=$!
date +%s.%N >"$RUN_DIR/started_at"
"$MODELLESS" loadgen --grpc "$FLEET_GRPC" --config "${CONFIG//%i/0}" --load "$OUT/load.toml" \
    --label "$MODE" --out "$RUN_DIR/load" >/dev/null 2>&1
kill "$poller"
RUN
export OUT
modes=(never together staggered)
for ((round = 0; round < ROUNDS; round++)); do
    for ((m = 0; m < ${#modes[@]}; m++)); do
        mode="${modes[$(((m + round) % ${#modes[@]}))]}"
        log "round $((round + 1))/$ROUNDS: $mode"
        run_dir="$OUT/$mode-$round"
        mkdir -p "$run_dir"
        MODE="$mode" RUN_DIR="$run_dir" CONFIG="$OUT/$mode-%i.toml" BASE_PORT=18100 FLEET_DIR="$run_dir/fleet" \
            LIMIT_S=300 bash scripts/fleet/run.sh -- bash "$OUT/run.sh"
    done
done
python3 scripts/bench/collisions_table.py "$OUT" >"$OUT/results.md"
cat "$OUT/results.md"
