#!/usr/bin/env bash
# Overload without collapse: one variant (MobileNetV2-1.0), no policy, offered 0.8,
# 1.5, 2 and 4 times its capacity for PHASE_S seconds each, in one open-loop run.
# The capacity is measured in the same run (closed loop, CONCURRENCY clients), before
# and after the load: the machine's speed drifts within minutes, so goodput is held
# to the mean of the two.
# With BASELINE=<git revision> the same load also goes to that revision's build,
# right after, for the before/after table. Writes each run's loadgen files (plots
# included), results.md (per phase: goodput, late share, refusals by reason, the
# refusal latency, peak RSS) and results.json.
#
#   bash scripts/bench_overload.sh [OUT]      (default bench-overload; ~3 min a build)
#   BASELINE=436d92c PHASE_S=30 MULTIPLES="0.8 1.5 2 4" CONCURRENCY=32
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-overload}")"
PHASE_S="${PHASE_S:-30}"
MULTIPLES="${MULTIPLES:-0.8 1.5 2 4}"
CONCURRENCY="${CONCURRENCY:-32}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"
log() { echo "bench_overload: $*" >&2; }

bash scripts/setup.sh
rm -rf "$OUT"
mkdir -p "$OUT/bin"
log "building this revision"
cargo build --quiet --release --locked -p modelless --features cli
cp "$CARGO_TARGET_DIR/release/modelless" "$OUT/bin/admission"
if [[ -n "${BASELINE:-}" ]]; then
    log "building the baseline $BASELINE (the first time: a full release build)"
    bash scripts/build_baseline.sh "$BASELINE" "$OUT/bin/baseline"
fi
sed -e "s|\.\./\.modelless|$ROOT/.modelless|g" experiments/overload.toml >"$OUT/config.toml"

cat >"$OUT/capacity-load.toml" <<TOML
[[tasks]]
task = "classify"
slo_ms = 60000
pattern = { kind = "constant", rate = 1, duration_s = 15 }
TOML
# Prints the answers/s of a closed-loop run of this revision's build, to OUT/NAME.
capacity() {
    log "measuring capacity ($1): closed loop, $CONCURRENCY clients, 15 s"
    "$OUT/bin/admission" loadgen --config "$OUT/config.toml" --load "$OUT/capacity-load.toml" \
        --concurrency "$CONCURRENCY" --label "$1" --out "$OUT/$1" >/dev/null 2>"$OUT/$1.log"
    python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[0]['throughput_per_s'])" "$OUT/$1/summary.json"
}
CAPACITY=$(capacity capacity-before)
log "capacity: $CAPACITY answers/s"

# One rate per second: each multiple of the capacity for PHASE_S seconds.
python3 - "$CAPACITY" "$PHASE_S" $MULTIPLES >"$OUT/rates.csv" <<'PY'
import sys
capacity, phase_s, multiples = float(sys.argv[1]), int(sys.argv[2]), [float(m) for m in sys.argv[3:]]
for m in multiples:
    for _ in range(phase_s):
        print(f"{capacity * m:.1f}")
PY
cat >"$OUT/load.toml" <<TOML
seed = 5
[[tasks]]
task = "classify"
slo_ms = 150
pattern = { kind = "trace", file = "$OUT/rates.csv" }
TOML

BUILDS=(admission)
[[ -n "${BASELINE:-}" ]] && BUILDS+=(baseline)
for build in "${BUILDS[@]}"; do
    log "offering $MULTIPLES x capacity to $build, $PHASE_S s each"
    "$OUT/bin/$build" loadgen --config "$OUT/config.toml" --load "$OUT/load.toml" --label "$build" \
        --out "$OUT/$build" >/dev/null 2>"$OUT/$build.log"
    # Measured again after this build's run: the machine drifts within minutes.
    [[ "$build" == admission ]] && CAPACITY_AFTER=$(capacity capacity-after)
done
python3 scripts/bench_overload_table.py --capacity "$CAPACITY" "$CAPACITY_AFTER" --phase-s "$PHASE_S" \
    --multiples $MULTIPLES --runs "${BUILDS[@]/#/$OUT/}" --out "$OUT"
cat "$OUT/results.md"
