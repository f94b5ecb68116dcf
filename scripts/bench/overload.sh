#!/usr/bin/env bash
# Overload without collapse: one variant (MobileNetV2-1.0), no policy, offered 0.8,
# 1.5, 2 and 4 times its capacity for PHASE_S seconds each (open loop, Poisson).
# The machine's speed drifts by tens of percent within minutes, so the capacity
# (closed loop, CONCURRENCY clients, CAPACITY_S seconds) is measured before the first
# phase and after every phase, and each phase's goodput is held to the mean of the
# two measurements either side of it. With BASELINE=<git revision> every phase is
# offered to that revision's build too, right after this one's, for the
# before/after table. Writes each run's loadgen files (plots included), results.md
# (per phase: goodput, late share, refusals by reason, the refusal latency, peak
# RSS) and results.json.
#
#   bash scripts/bench/overload.sh [OUT]      (default bench-overload; ~4 min, 6 with a baseline)
#   BASELINE=436d92c PHASE_S=30 MULTIPLES="0.8 1.5 2 4" CONCURRENCY=32 CAPACITY_S=10
#
# With photos: CONFIG=experiments/overload-photos.toml TASK=classify-photo SLO_MS=500
# IMAGE_SIZES=500x375,3564x2880 sends photo-like JPEGs of those sizes, mixed (Lite0
# with its `preprocess`; decoding shares the cores with the session).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-overload}")"
PHASE_S="${PHASE_S:-30}"
MULTIPLES="${MULTIPLES:-0.8 1.5 2 4}"
CONCURRENCY="${CONCURRENCY:-32}"
CAPACITY_S="${CAPACITY_S:-10}"
CONFIG="${CONFIG:-experiments/overload.toml}"
TASK="${TASK:-classify}"
SLO_MS="${SLO_MS:-150}"
IMAGES=()
[[ -n "${IMAGE_SIZES:-}" ]] && IMAGES=(--image-sizes "$IMAGE_SIZES")
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"
log() { echo "bench_overload: $*" >&2; }

rm -rf "$OUT"
log "building this revision"
bash scripts/build/release_cli.sh "$OUT/bin/admission"
if [[ -n "${BASELINE:-}" ]]; then
    log "building the baseline $BASELINE (the first time: a full release build)"
    bash scripts/build/baseline.sh "$BASELINE" "$OUT/bin/baseline"
fi
sed -e "s|\.\./\.modelless|$ROOT/.modelless|g" "$CONFIG" >"$OUT/config.toml"

cat >"$OUT/capacity-load.toml" <<TOML
[[tasks]]
task = "$TASK"
slo_ms = 60000
pattern = { kind = "constant", rate = 1, duration_s = $CAPACITY_S }
TOML
# Prints the answers/s of a closed-loop run of this revision's build, to OUT/NAME.
capacity() {
    log "measuring capacity ($1): closed loop, $CONCURRENCY clients, $CAPACITY_S s"
    "$OUT/bin/admission" loadgen --config "$OUT/config.toml" --load "$OUT/capacity-load.toml" \
        --concurrency "$CONCURRENCY" ${IMAGES[@]+"${IMAGES[@]}"} --label "$1" --out "$OUT/$1" \
        >/dev/null 2>"$OUT/$1.log"
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[0]['throughput_per_s'])" "$OUT/$1/summary.json"
}
CAPACITIES=("$(capacity capacity-0)")
log "capacity: ${CAPACITIES[0]} answers/s; the phases offer multiples of it"

BUILDS=(admission)
[[ -n "${BASELINE:-}" ]] && BUILDS+=(baseline)
phase=0
for multiple in $MULTIPLES; do
    phase=$((phase + 1))
    rate=$(python3 -c "import sys; print(f'{float(sys.argv[1]) * float(sys.argv[2]):.1f}')" "${CAPACITIES[0]}" "$multiple")
    cat >"$OUT/load-x$multiple.toml" <<TOML
seed = 5
[[tasks]]
task = "$TASK"
slo_ms = $SLO_MS
pattern = { kind = "constant", rate = $rate, duration_s = $PHASE_S }
TOML
    for build in "${BUILDS[@]}"; do
        log "offering $multiple x capacity ($rate/s) to $build for $PHASE_S s"
        "$OUT/bin/$build" loadgen --config "$OUT/config.toml" --load "$OUT/load-x$multiple.toml" \
            ${IMAGES[@]+"${IMAGES[@]}"} --label "$build" --out "$OUT/$build-x$multiple" \
            >/dev/null 2>"$OUT/$build-x$multiple.log"
    done
    CAPACITIES+=("$(capacity "capacity-$phase")")
done
python3 scripts/bench/overload_table.py --capacities "${CAPACITIES[@]}" --phase-s "$PHASE_S" --slo-ms "$SLO_MS" \
    --multiples $MULTIPLES --builds "${BUILDS[@]}" --dir "$OUT"
cat "$OUT/results.md"
