#!/usr/bin/env bash
# The steering comparison: how much of the attainable accuracy a policy takes, and how
# still it holds. Two families as one task each, the EfficientNet-Lite (accuracies
# close together, experiments/lite.toml, SLO 100 ms) and the MobileNetV2 widths (far
# apart, experiments/classify.toml, SLO 150 ms), in the simulator on this machine's
# profiles: constant Poisson loads at 15, 30 and 60 % of the most accurate variant's
# capacity, bursty traces whose busiest second is 4, 8 and 12 times the mean
# (experiments/bursty-*.toml, scaled so the cheapest variant keeps up), and for the
# MobileNetV2 the policy experiment's gentle and steep traces. Each load runs
# slo-predictive and cpu-threshold (early ticks at a queue of 8), the oracle, the
# offline optimum and the cheapest variant; the table gives each policy's share of the
# gain above the cheapest that the optimum takes, and that the oracle takes.
# REAL=1 then runs the constant loads of the EfficientNet-Lite for real (60 s each,
# in process, real photos) and their simulations beside them.
#
# FAMILIES picks the families (default "lite mobilenetv2"); LITE_CONFIG runs another
# config of the Lite task (say with int8 copies made by `modelless variants make`),
# and RATES_FROM=MODEL.json sets the loads' rates from that model's capacities, so
# that two configs meet the same loads.
#
#   bash scripts/bench/steering.sh [OUT]      (default experiments/steering; ~3 min, ~8 with REAL=1)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/experiments/steering}")"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

MODELLESS="$OUT/bin/modelless"
POLICIES="$ROOT/.modelless/policies"
EARLY=(--early-tick-queue 8)
# The bursty traces are written for a machine whose cheapest variant answers this many
# requests a second; the experiment's traces for one whose MobileNetV2-1.4 answers 114.
BURSTY_REFERENCE_PER_S=105
EXPERIMENT_REFERENCE_PER_S=114

rm -rf "$OUT"
mkdir -p "$OUT"
bash scripts/build/release_cli.sh "$MODELLESS"

# capacity MODEL WHICH: requests/s of the most accurate ("best") or cheapest variant.
capacity() {
    python3 - "$1" "$2" <<'PY'
import json, sys
task = json.load(open(sys.argv[1]))["tasks"][0]
variants = [(v["accuracy"], v["snapshot"]["profile"]["max_throughput"]["requests_per_s"]) for v in task["variants"]]
print(max(variants)[1] if sys.argv[2] == "best" else max(v[1] for v in variants))
PY
}

# run FAMILY MODEL NAME LOAD SCALE: every decider on one load.
run() {
    local family=$1 model=$2 name=$3 load=$4 scale=$5 dir="$OUT/$1/$3"
    echo "-- $family / $name (rates × $scale)" >&2
    "$MODELLESS" simulate --model "$model" --load "$load" --rate-scale "$scale" --policy "$POLICIES/slo-predictive.wasm" \
        "${EARLY[@]}" --label slo-predictive --against-optimum --out "$dir/slo-predictive" >/dev/null 2>&1
    "$MODELLESS" simulate --model "$model" --load "$load" --rate-scale "$scale" --policy "$POLICIES/cpu-threshold.wasm" \
        "${EARLY[@]}" --label cpu-threshold --out "$dir/cpu-threshold" >/dev/null 2>&1
    "$MODELLESS" simulate --model "$model" --load "$load" --rate-scale "$scale" --oracle --label oracle \
        --out "$dir/oracle" >/dev/null 2>&1
}

# constant FILE TASK RATE: a minute of Poisson arrivals at RATE.
constant() {
    printf 'seed = 7\n[[tasks]]\ntask = "%s"\npattern = { kind = "constant", rate = %s, duration_s = 60 }\n' "$2" "$3" >"$1"
}

for family in ${FAMILIES:-lite mobilenetv2}; do
    case $family in
        lite) config=${LITE_CONFIG:-experiments/lite.toml} task=classify-photo ;;
        mobilenetv2) config=experiments/classify.toml task=classify-image ;;
    esac
    model="$OUT/$family/model.json"
    echo "== $family: profiles of $config" >&2
    mkdir -p "$OUT/$family/loads"
    constant "$OUT/$family/loads/probe.toml" "$task" 1
    "$MODELLESS" simulate --config "$config" --save-model "$model" --load "$OUT/$family/loads/probe.toml" --oracle \
        --out "$OUT/$family/probe" >/dev/null 2>&1
    rates="${RATES_FROM:-$model}"
    best=$(capacity "$rates" best)
    cheapest=$(capacity "$rates" cheapest)
    for share in 15 30 60; do
        rate=$(python3 -c "print(round($best * $share / 100, 1))")
        constant "$OUT/$family/loads/constant-$share.toml" "$task" "$rate"
        run "$family" "$model" "constant-$share" "$OUT/$family/loads/constant-$share.toml" 1
    done
    bursty_scale=$(python3 -c "print(round($cheapest / $BURSTY_REFERENCE_PER_S, 3))")
    for peak in 4 8 12; do
        sed "s/^task = .*/task = \"$task\"/" "experiments/bursty-$peak.toml" >"$OUT/$family/loads/bursty-$peak.toml"
        run "$family" "$model" "bursty-$peak" "$OUT/$family/loads/bursty-$peak.toml" "$bursty_scale"
    done
    if [[ $family == mobilenetv2 ]]; then
        scale=$(python3 -c "print(round($best / $EXPERIMENT_REFERENCE_PER_S, 3))")
        for trace in gentle steep; do
            run "$family" "$model" "$trace" "experiments/$trace.toml" "$scale"
        done
    fi
done

if [[ -n "${REAL:-}" ]]; then
    for share in 15 30 60; do
        load="$OUT/lite/loads/constant-$share.toml"
        echo "-- lite / constant-$share: real run" >&2
        "$MODELLESS" loadgen --config "${LITE_CONFIG:-experiments/lite.toml}" --load "$load" --images .modelless/photos \
            --policy "$POLICIES/slo-predictive.wasm" "${EARLY[@]}" --label slo-predictive \
            --out "$OUT/lite/constant-$share/real" >/dev/null
    done
fi

python3 scripts/bench/steering_table.py "$OUT" | tee "$OUT/results.md"
