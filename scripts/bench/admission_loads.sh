#!/usr/bin/env bash
# Admission on loads with bursts, before and after: slo-predictive on the policy
# experiment's steep trace (the MobileNetV2 family, experiments/classify.toml, SLO
# 150 ms) and on the bursty trace whose busiest second is 8 times its mean (the
# same family, its task renamed as scripts/bench/steering.sh renames it). Each load
# runs for real on this revision and, right after, on BASELINE's build with its own
# policies, then in the simulator on this revision's profiles. Rates are scaled as
# scripts/bench/experiment.sh and steering.sh scale them. results.md: per load and
# run, the share answered within the SLO, late answers, refusals and needless ones,
# and the simulator's late answers over the real run's.
#
#   bash scripts/bench/admission_loads.sh [OUT]   (default bench-admission-loads; ~15 min)
#   BASELINE=0afa2f0                              the revision to compare with
#   ONLY=bursty-8                                 only these loads
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-admission-loads}")"
BASELINE="${BASELINE:-0afa2f0}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"
log() { echo "admission_loads: $*" >&2; }

MODELLESS="$OUT/bin/modelless"
POLICIES="$ROOT/.modelless/policies"
EARLY=(--early-tick-queue 8)
rm -rf "$OUT/loads" && mkdir -p "$OUT/loads"
bash scripts/build/release_cli.sh "$MODELLESS"
log "building the baseline $BASELINE"
bash scripts/build/baseline.sh "$BASELINE" "$OUT/bin/baseline" "$OUT/bin/baseline-policies"

# capacity MODEL WHICH: requests/s of the variant named, or of the cheapest.
capacity() {
    python3 - "$1" "$2" <<'PY'
import json, sys
variants = json.load(open(sys.argv[1]))["tasks"][0]["variants"]
per_s = {v["name"]: v["snapshot"]["profile"]["max_throughput"]["requests_per_s"] for v in variants}
print(max(per_s.values()) if sys.argv[2] == "cheapest" else per_s[sys.argv[2]])
PY
}

# name, config, load, the variant the rates follow and its reference rate
SCENARIOS=(
    "steep|experiments/classify.toml|experiments/steep.toml|mobilenetv2-1.4|114"
    "bursty-8|experiments/classify.toml|$OUT/loads/bursty-8.toml|cheapest|105"
)
# The bursty trace names the photo task; the MobileNetV2 family serves `classify-image`.
sed 's/^task = .*/task = "classify-image"/' experiments/bursty-8.toml >"$OUT/loads/bursty-8.toml"
for scenario in "${SCENARIOS[@]}"; do
    IFS='|' read -r name config load follows reference <<<"$scenario"
    [[ -z "${ONLY:-}" || " $ONLY " == *" $name "* ]] || continue
    dir="$OUT/$name"
    rm -rf "$dir"
    "$MODELLESS" simulate --config "$config" --save-model "$dir/model.json" --load "$load" --oracle \
        --out "$dir/probe" >/dev/null 2>&1
    scale=$(python3 -c "print(round($(capacity "$dir/model.json" "$follows") / $reference, 3))")
    echo "$scale" >"$dir/rate_scale"
    log "$name: rates × $scale; real run"
    "$MODELLESS" loadgen --config "$config" --load "$load" --rate-scale "$scale" \
        --policy "$POLICIES/slo-predictive.wasm" "${EARLY[@]}" --label this --out "$dir/real" >/dev/null
    log "$name: real run on $BASELINE"
    "$OUT/bin/baseline" loadgen --config "$config" --load "$load" --rate-scale "$scale" \
        --policy "$OUT/bin/baseline-policies/slo-predictive.wasm" "${EARLY[@]}" --label baseline \
        --out "$dir/baseline" >/dev/null
    log "$name: simulated"
    "$MODELLESS" simulate --model "$dir/model.json" --load "$load" --rate-scale "$scale" \
        --policy "$POLICIES/slo-predictive.wasm" "${EARLY[@]}" --label sim --out "$dir/sim" >/dev/null 2>&1
done

python3 - "$OUT" <<'PY' | tee "$OUT/results.md"
import json, sys
from pathlib import Path

out = Path(sys.argv[1])
print("| load | run | sent | within SLO % | late | refused + expired | needless | switches |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for load in ("steep", "bursty-8"):
    late = {}
    for run in ("baseline", "real", "sim"):
        path = out / load / run / "summary.json"
        if not path.exists():
            continue
        row = next(r for r in json.loads(path.read_text()) if r["task"] != "all")
        late[run] = row["slo_violations"]
        needless = row.get("needless_refusals")
        label = {"baseline": "before", "real": "this", "sim": "simulated"}[run]
        print(f"| {load} | {label} | {row['sent']} | {100 - row['slo_violation_pct']:.2f} | {row['slo_violations']} "
              f"| {row['rejected']} + {row['expired']} | {'—' if needless is None else needless} | {row['variant_switches']} |")
    if late.get("real") and "sim" in late:
        print(f"| {load} | simulated late / real | | | {late['sim'] / late['real']:.2f} | | | |")
PY
