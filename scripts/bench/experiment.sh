#!/usr/bin/env bash
# The policy comparison: the MobileNetV2 family on this machine, one task and then
# three co-located, under a gentle trace (warm-up ramp) and a steep one (flash
# crowd). Every policy runs for real (in process, open-loop load) and in the
# simulator on the profiles the real runs use, and again with batches timed as the
# real runs' sessions ran them (calibrated); the oracle and the offline optimum run in
# the simulator only.
# Writes per run the request log, timeline, summary and plots, and results.md, the
# table of them all.
#
#   bash scripts/bench/experiment.sh [OUT]      (default experiments/results; ~23 min, ~30 with the first release build)
#   ONLY="three-tasks-steep"              only these scenarios
#   BASELINE=<git revision>               each real run again on that revision's build
#                                         and its own policy modules, right after this
#                                         one's (before/after table)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/experiments/results}")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

MODELLESS="$OUT/bin/modelless"
POLICIES="$ROOT/.modelless/policies"
# The runtime ticks a policy early when a queue reaches this (the same for all).
EARLY=(--early-tick-queue 8)
# The loads' rates are written for a machine on which MobileNetV2-1.4 answers 114
# requests/s (closed loop, batches of 8: what the profiles of the machine they were
# tuned on measured); every run here offers the same share of what this machine
# answers. Loading the one-task config measures the profiles (stored beside the
# models and reused from then on). RATE_SCALE=1 sends the rates as written.
REFERENCE_PER_S=114

# name, module, parameters
POLICY_LIST=(
    "static-largest|static|{}"
    "static-smallest|static|{\"variant\":\"mobilenetv2-0.35\"}"
    "cpu-threshold|cpu-threshold|{}"
    "cheapest-meeting-slo|cheapest-meeting-slo|{}"
    "slo-predictive|slo-predictive|{}"
)
# name, config, load
SCENARIOS=(
    "one-task-gentle|classify.toml|gentle.toml"
    "one-task-steep|classify.toml|steep.toml"
    "three-tasks-gentle|classify-3.toml|gentle-3.toml"
    "three-tasks-steep|classify-3.toml|steep-3.toml"
)

rm -rf "$OUT"
bash scripts/build/release_cli.sh "$MODELLESS"
started=$SECONDS
if [[ -n "${BASELINE:-}" ]]; then
    echo "== building the baseline $BASELINE (the first time: a full release build)" >&2
    bash scripts/build/baseline.sh "$BASELINE" "$OUT/bin/baseline" "$OUT/bin/baseline-policies"
fi
if [[ -z "${RATE_SCALE:-}" ]]; then
    "$MODELLESS" simulate --config experiments/classify.toml --save-model "$OUT/machine/model.json" \
        --load experiments/steep.toml --oracle --out "$OUT/machine" >/dev/null
    RATE_SCALE=$(python3 - "$OUT/machine/model.json" "$REFERENCE_PER_S" <<'PY'
import json, sys
model = json.load(open(sys.argv[1]))
variant = next(v for t in model["tasks"] for v in t["variants"] if v["name"] == "mobilenetv2-1.4")
print(f"{variant['snapshot']['profile']['max_throughput']['requests_per_s'] / float(sys.argv[2]):.3f}")
PY
)
fi
echo "== rates scaled by $RATE_SCALE (this machine against the one the loads were written for)" >&2
SCALE=(--rate-scale "$RATE_SCALE")
for scenario in "${SCENARIOS[@]}"; do
    IFS='|' read -r name config load <<<"$scenario"
    [[ -z "${ONLY:-}" || " $ONLY " == *" $name "* ]] || continue
    config="experiments/$config" load="experiments/$load" dir="$OUT/$name"
    echo "== $name: $config, $load ($((SECONDS - started)) s so far)" >&2
    # Loading the runtime once measures the profiles that are missing (stored beside
    # the models, so only the first scenario pays) and keeps them for the simulator.
    # The oracle ticks once a second, on the second it foresees: no early ticks. The
    # offline optimum and the cheapest variant bound the gain a policy can take.
    "$MODELLESS" simulate --config "$config" --save-model "$dir/model.json" --load "$load" "${SCALE[@]}" --oracle \
        --against-optimum --out "$dir/sim/oracle" --label oracle >/dev/null
    for policy in "${POLICY_LIST[@]}"; do
        IFS='|' read -r label module parameters <<<"$policy"
        echo "-- $name / $label: real run" >&2
        "$MODELLESS" loadgen --config "$config" --load "$load" "${SCALE[@]}" --policy "$POLICIES/$module.wasm" \
            --policy-parameters "$parameters" "${EARLY[@]}" --label "$label" --out "$dir/real/$label" >/dev/null
        if [[ -n "${BASELINE:-}" ]]; then
            echo "-- $name / $label: real run on the baseline" >&2
            "$OUT/bin/baseline" loadgen --config "$config" --load "$load" "${SCALE[@]}" \
                --policy "$OUT/bin/baseline-policies/$module.wasm" --policy-parameters "$parameters" "${EARLY[@]}" \
                --label "$label" --out "$dir/baseline/$label" >/dev/null
        fi
        "$MODELLESS" simulate --model "$dir/model.json" --load "$load" "${SCALE[@]}" --policy "$POLICIES/$module.wasm" \
            --policy-parameters "$parameters" "${EARLY[@]}" --label "$label" --out "$dir/sim/$label" >/dev/null
    done
    # Again on the machine as the real runs found it: every batch timed as the
    # sessions ran them there (runs.csv). The oracle's calibration takes every real
    # run; each policy's takes the other policies' runs, not its own.
    echo "-- $name: simulations calibrated on the real runs" >&2
    "$MODELLESS" simulate --model "$dir/model.json" --calibrate "$dir"/real/* \
        --save-model "$dir/model-calibrated.json" --load "$load" "${SCALE[@]}" --oracle --against-optimum \
        --out "$dir/sim-calibrated/oracle" --label oracle >/dev/null 2>"$dir/calibration.txt"
    for policy in "${POLICY_LIST[@]}"; do
        IFS='|' read -r label module parameters <<<"$policy"
        others=()
        for run in "$dir"/real/*; do
            [[ "$(basename "$run")" == "$label" ]] || others+=("$run")
        done
        "$MODELLESS" simulate --model "$dir/model.json" --calibrate "${others[@]}" --load "$load" "${SCALE[@]}" \
            --policy "$POLICIES/$module.wasm" --policy-parameters "$parameters" "${EARLY[@]}" \
            --label "$label" --out "$dir/sim-calibrated/$label" >/dev/null 2>&1
    done
done
{
    echo "Every load's rates × $RATE_SCALE: MobileNetV2-1.4 answers that many times the $REFERENCE_PER_S requests/s"
    echo "of the machine the loads were written for."
    echo
    python3 scripts/bench/experiment_table.py "$OUT"
} >"$OUT/results.md"
cat "$OUT/results.md"
echo "experiment done in $((SECONDS - started)) s; results in $OUT" >&2
