#!/usr/bin/env bash
# The fleet on this machine, through scripts/fleet/run.sh:
#  1. Throughput, closed loop (CONCURRENCY clients, MobileNetV2-1.0, no policy), of
#     one replica spoken to directly (two ONNX Runtime threads that do not spin:
#     the load generator shares the cores), the same replica behind nginx, and
#     three one-thread replicas behind nginx, in ROUNDS interleaved rounds of
#     ROUND_S seconds. On one 2-core machine three replicas share the cores one
#     would have: this measures the balancer's and the split's cost, not scaling.
#  2. The steep trace (experiments/steep.toml, rates scaled to this machine as
#     scripts/bench/experiment.sh scales them) through nginx to three replicas steered by
#     slo-predictive, each replica's active variant polled every POLL_S seconds;
#     then the same trace through `modelless simulate --servers 3` (and 1) on the
#     same profiles.
# Writes each run's loadgen files, the polled variants, results.md and results.json.
#
#   bash scripts/bench/fleet.sh [OUT]      (default bench-fleet; ~6 min, more when profiles are measured)
#   ROUNDS=3 ROUND_S=10 CONCURRENCY=32 POLL_S=0.2 RATE_SCALE=<from the machine>
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-fleet}")"
ROUNDS="${ROUNDS:-3}"
ROUND_S="${ROUND_S:-10}"
CONCURRENCY="${CONCURRENCY:-32}"
POLL_S="${POLL_S:-0.2}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"
log() { echo "bench_fleet: $*" >&2; }

rm -rf "$OUT"
bash scripts/build/release_cli.sh "$OUT/bin/modelless"
export MODELLESS="$OUT/bin/modelless"
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$ROOT/.modelless/onnxruntime/lib/libonnxruntime.so}"

# Configs: the fleet's, without its policy or latency target and with
# MobileNetV2-1.0 active (replicas of one thread), and the same for a lone server
# (two threads).
sed -e "s|\.\./\.modelless|$ROOT/.modelless|g" experiments/fleet.toml >"$OUT/fleet.toml"
python3 - "$OUT" <<'PY'
import re, sys
out = sys.argv[1]
text = open(f"{out}/fleet.toml").read()
fixed = re.sub(r"\[policy\]\n(?:[^\n]+\n)*\n", "", text)
fixed = re.sub(r'^active = ".*"$', 'active = "mobilenetv2-1.0"', fixed, flags=re.M)
# No latency target: a closed loop past it would be refused at admission, and the
# refusals, answered at once, would be counted instead of the work.
fixed = re.sub(r"^latency_slo_ms = .*\n", "", fixed, flags=re.M)
open(f"{out}/fixed-replica.toml", "w").write(fixed)
lone = fixed.replace("intra_op_threads = 1", "intra_op_threads = 2")
open(f"{out}/fixed-lone.toml", "w").write(lone)
PY
cat >"$OUT/closed-load.toml" <<TOML
seed = 5
[[tasks]]
task = "classify-image"
slo_ms = 60000
pattern = { kind = "constant", rate = 1, duration_s = $ROUND_S }
TOML

# --- 1. Throughput ----------------------------------------------------------------
cat >"$OUT/rounds.sh" <<'ROUNDS'
set -euo pipefail
# Here FLEET_GRPC is the lone replica's nginx; THREE_GRPC the three replicas' nginx.
read -r -a lone_upstream <<<"$FLEET_GRPC_UPSTREAMS"
targets=("direct|http://${lone_upstream[0]}" "nginx-1|$FLEET_GRPC" "nginx-3|$THREE_GRPC")
for ((round = 0; round < ROUNDS; round++)); do
    for ((i = 0; i < ${#targets[@]}; i++)); do
        IFS='|' read -r name url <<<"${targets[$(((i + round) % ${#targets[@]}))]}"
        echo "bench_fleet: round $((round + 1))/$ROUNDS: $name" >&2
        "$MODELLESS" loadgen --grpc "$url" --config "$OUT/fixed-lone.toml" --load "$OUT/closed-load.toml" \
            --concurrency "$CONCURRENCY" --label "$name" --out "$OUT/throughput/$name-$round" >/dev/null 2>&1
    done
done
ROUNDS
log "throughput: $ROUNDS rounds of direct, nginx-1 and nginx-3"
export OUT ROUNDS CONCURRENCY
REPLICAS=3 CONFIG="$OUT/fixed-replica.toml" FLEET_DIR="$OUT/fleet-three" LIMIT_S=1200 \
    bash scripts/fleet/run.sh -- bash -c '
        export THREE_GRPC="$FLEET_GRPC"
        REPLICAS=1 CONFIG="$OUT/fixed-lone.toml" FLEET_DIR="$OUT/fleet-lone" GRPC_PORT=19000 HTTP_PORT=19080 \
            BASE_PORT=19100 LIMIT_S=1100 bash scripts/fleet/run.sh -- bash "$OUT/rounds.sh"'

# --- 2. The steep trace -------------------------------------------------------------
if [[ -z "${RATE_SCALE:-}" ]]; then
    # As scripts/bench/experiment.sh: MobileNetV2-1.4's closed-loop throughput here against
    # the 114 requests/s of the machine the loads were written for.
    "$MODELLESS" simulate --config experiments/classify.toml --save-model "$OUT/machine.json" \
        --load experiments/steep.toml --oracle --out "$OUT/machine" >/dev/null
    RATE_SCALE=$(python3 - "$OUT/machine.json" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
variant = next(v for t in model["tasks"] for v in t["variants"] if v["name"] == "mobilenetv2-1.4")
print(f"{variant['snapshot']['profile']['max_throughput']['requests_per_s'] / 114:.3f}")
PY
)
fi
log "steep trace, rates × $RATE_SCALE, through nginx to 3 replicas steered by slo-predictive"
cat >"$OUT/steep.sh" <<'STEEP'
set -euo pipefail
read -r -a pids <<<"$FLEET_PIDS"
# Every replica's active variant, polled from its /metrics.
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
) >"$OUT/steep/active.txt" &
poller=$!
date +%s.%N >"$OUT/steep/started_at"
"$MODELLESS" loadgen --grpc "$FLEET_GRPC" --config "$OUT/fleet.toml" --load experiments/steep.toml \
    --rate-scale "$RATE_SCALE" --label "fleet of 3 (real)" --out "$OUT/steep/real" >/dev/null 2>&1
kill "$poller"
STEEP
mkdir -p "$OUT/steep"
export RATE_SCALE POLL_S
BASE_PORT=18100 REPLICAS=3 CONFIG="$OUT/fleet.toml" FLEET_DIR="$OUT/fleet-steep" LIMIT_S=600 \
    bash scripts/fleet/run.sh -- bash "$OUT/steep.sh"
for servers in 3 1; do
    "$MODELLESS" simulate --config "$OUT/fleet.toml" --servers "$servers" --load experiments/steep.toml \
        --rate-scale "$RATE_SCALE" --policy .modelless/policies/slo-predictive.wasm --early-tick-queue 8 \
        --label "simulated, $servers server(s)" --out "$OUT/steep/sim-$servers" >/dev/null
done

python3 scripts/bench/fleet_table.py "$OUT" >"$OUT/results.md"
cat "$OUT/results.md"
