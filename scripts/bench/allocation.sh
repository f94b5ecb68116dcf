#!/usr/bin/env bash
# One machine, two tasks: the autoscaling policy against the three ways of holding
# cores it is measured against, for real (in process, photos for the photo task) and
# in the simulator on the same profiles. experiments/two-tasks.toml serves
# `classify-photo` (EfficientNet-Lite) and `classify-image` (MobileNetV2) on instances
# of one thread, its budget the cores the process can run on; the load
# (experiments/two-tasks-load.toml, or LOAD=) sends each task bursts that never come
# at once. The policies, run in turn within each round, ROUNDS rounds:
#
#   autoscale      variant and instances per task, from the demand (INFaaS)
#   fixed-split    static: each task its half of the machine's cores, on the most
#                  accurate variant that answers its peak on them
#   static-peak    static: both peaks held at once, the machine's cores shared in
#                  proportion to what each task's peak needs on its most accurate
#                  variant (on 2 cores and instances of one thread: the fixed split)
#   replica-only   each task's most accurate variant, instances scaled on the queue
#                  (an instance per request queued, given up after 20 quiet ticks:
#                  the setting that holds at least autoscale's core-seconds in the
#                  simulator, so that the two compare at no more cores for autoscale)
#
# The peaks the static policies are sized for are the load file's busiest second of
# each task (read from the load, not guessed), scaled as the load is. Writes per run the request log,
# timeline, summary and plots, and results.md: per policy and round, per task and in
# all, the share answered within the SLO, needless refusals, effective accuracy,
# core-seconds held, the
# process's CPU time and the share of the machine's CPU time stolen by the hypervisor
# while it ran (steal.json), beside the simulator's figures for the same run.
#
#   bash scripts/bench/allocation.sh [OUT]   (default target/allocation; ~15 min a round)
#   ROUNDS=3                                 rounds (default 3)
#   ONLY="autoscale static-peak"             only these policies
#   LOAD=experiments/two-tasks-shapes-load.toml   another load of the two tasks
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/target/allocation}")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

CONFIG=experiments/two-tasks.toml
LOAD=${LOAD:-experiments/two-tasks-load.toml}
MODELLESS="$OUT/bin/modelless"
POLICIES="$ROOT/.modelless/policies"
EARLY=(--early-tick-queue 8)
# The machine's cores, split evenly between the two tasks by the fixed split.
MACHINE_CORES=$(nproc)

mkdir -p "$OUT"
rm -rf "$OUT"/round-* "$OUT/results.md"
bash scripts/build/release_cli.sh "$MODELLESS"

# The profiles are measured afresh: this machine's speed drifts by tens of percent
# within an hour, and policies plan on them. Loading the config then keeps them, with
# the machine, for the simulator.
echo "== profiles of $CONFIG" >&2
"$MODELLESS" profile "$CONFIG" --force --first-run-sessions 0 --image-secs 0 --out "$OUT/profile" >/dev/null 2>&1
"$MODELLESS" simulate --config "$CONFIG" --save-model "$OUT/model.json" --load "$LOAD" --oracle \
    --out "$OUT/probe" >/dev/null 2>&1

# The load's rates are scaled so that each task's busiest second asks PEAK_MARGIN
# times what one instance of its most accurate variant serves within the SLO on these
# profiles: each task's peak takes at least two instances, whatever this machine's speed.
PEAK_MARGIN=1.05
RATE_SCALE=$(python3 scripts/bench/allocation_table.py scale "$OUT/model.json" "$LOAD" "$PEAK_MARGIN")
SCALE=(--rate-scale "$RATE_SCALE")
# Each task's busiest second in the load, requests/s: what the static policies hold.
peaks=$(python3 scripts/bench/allocation_table.py peaks "$LOAD" "$RATE_SCALE")
split=$(python3 -c "print($MACHINE_CORES / 2)")
echo "== rates × $RATE_SCALE; peaks $peaks; the fixed split gives each task $split cores" >&2

# The machine's CPU ticks, all and stolen (given by the hypervisor to other guests):
# a run on a VM whose neighbours took its cores is late for reasons no policy has.
cpu_ticks() { awk '/^cpu / { t = 0; for (i = 2; i <= 9; i++) t += $i; print t, $9 }' /proc/stat; }

# name, module, parameters
POLICY_LIST=(
    "autoscale|autoscale|{}"
    "fixed-split|static-peak|{\"peak_per_s\":$peaks,\"cores_per_task\":$split}"
    "static-peak|static-peak|{\"peak_per_s\":$peaks}"
    "replica-only|replica-only|{\"queue_per_instance\":1,\"scale_down_after_ticks\":20}"
)

for round in $(seq 1 "${ROUNDS:-3}"); do
    for policy in "${POLICY_LIST[@]}"; do
        IFS='|' read -r label module parameters <<<"$policy"
        [[ -z "${ONLY:-}" || " $ONLY " == *" $label "* ]] || continue
        dir="$OUT/round-$round/$label"
        echo "-- round $round / $label: real run" >&2
        read -r total_before steal_before < <(cpu_ticks)
        "$MODELLESS" loadgen --config "$CONFIG" --load "$LOAD" "${SCALE[@]}" --images .modelless/photos \
            --policy "$POLICIES/$module.wasm" --policy-parameters "$parameters" "${EARLY[@]}" \
            --label "$label" --out "$dir/real" >/dev/null
        read -r total_after steal_after < <(cpu_ticks)
        echo "{\"steal_pct\": $(python3 -c "print(round(100 * ($steal_after - $steal_before) / max(1, $total_after - $total_before), 2))")}" \
            >"$dir/real/steal.json"
        "$MODELLESS" simulate --model "$OUT/model.json" --load "$LOAD" "${SCALE[@]}" --policy "$POLICIES/$module.wasm" \
            --policy-parameters "$parameters" "${EARLY[@]}" --label "$label" --out "$dir/sim" >/dev/null 2>&1
    done
done

python3 scripts/bench/allocation_table.py "$OUT" | tee "$OUT/results.md"
