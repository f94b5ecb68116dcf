#!/usr/bin/env bash
# The image benchmark, closed loop at concurrency 32 on one EfficientNet-Lite variant:
# modelless fed photos (medium 500x375 and large 3564x2880 JPEGs, decoded and resized
# on its pool) against the same task fed ready tensors, and against the Python glue
# users write today (scripts/bench/peers/image_glue_peer.py: PIL, numpy, onnxruntime, a thread
# pool). The runs are interleaved, in rounds, in one go, so that the machine's drift
# falls on all of them alike. Writes every run's files, results.md (the ratios) and
# results.svg.
#
#   bash scripts/bench/images.sh [OUT]     (default bench-images; ~5 min)
#   ROUNDS=3 RUN_S=10 VARIANT=efficientnet-lite0 CONCURRENCY=32 THREADS=2
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
OUT="$(realpath -m "${1:-$ROOT/bench-images}")"
ROUNDS="${ROUNDS:-3}"
RUN_S="${RUN_S:-10}"
VARIANT="${VARIANT:-efficientnet-lite0}"
CONCURRENCY="${CONCURRENCY:-32}"
# Worker threads of the peer's service, and of modelless's preprocessing pool.
THREADS="${THREADS:-$(nproc)}"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}"
cd "$ROOT"

# Outside OUT, which is made anew below; the setup comes first: the venv reads the manifest.
MODELLESS="$CARGO_TARGET_DIR/bench-images/modelless"
bash scripts/build/release_cli.sh "$MODELLESS"
PYTHON="$ROOT/.modelless/venv/bin/python"
IMAGES="$ROOT/.modelless/images/bench"
MODELS="$ROOT/.modelless/efficientnet"
RESOLUTION=$("$PYTHON" -c "import json,sys; print(next(v['resolution'] for v in json.load(open(sys.argv[1]))['variants'] if v['name']==sys.argv[2]))" "$MODELS/manifest.json" "$VARIANT")

rm -rf "$OUT"
mkdir -p "$OUT"
# The example config with absolute paths, the variant asked for active, and the pool
# sized like the peer's service.
sed -e "s|\.\./\.modelless|$ROOT/.modelless|g" -e "s|^active = .*|active = \"$VARIANT\"|" \
    -e "s|^# threads:.*|threads = $THREADS|" examples/images.toml >"$OUT/config.toml"
# The SLO is far off: every request is answered, and throughput is what is measured.
cat >"$OUT/load.toml" <<TOML
[[tasks]]
task = "classify-photo"
slo_ms = 60000
pattern = { kind = "constant", rate = 1, duration_s = $RUN_S }
TOML

run_modelless() { # feed (tensors|medium|large), round
    local feed=$1 round=$2 images=()
    [[ $feed != tensors ]] && images=(--images "$IMAGES/$feed.jpg")
    "$MODELLESS" loadgen --config "$OUT/config.toml" --load "$OUT/load.toml" --concurrency "$CONCURRENCY" \
        "${images[@]}" --label "modelless-$feed" --out "$OUT/round$round/modelless-$feed" >/dev/null 2>"$OUT/round$round/modelless-$feed.log"
}

run_peer() { # size, round
    "$PYTHON" scripts/bench/peers/image_glue_peer.py --model "$MODELS/$VARIANT.onnx" --size "$RESOLUTION" \
        --image "$IMAGES/$1.jpg" --concurrency "$CONCURRENCY" --threads "$THREADS" --seconds "$RUN_S" \
        --out "$OUT/round$2/peer-$1.json" >/dev/null
}

RUNS=(modelless-tensors modelless-medium peer-medium modelless-large peer-large)
started=$SECONDS
for round in $(seq 1 "$ROUNDS"); do
    mkdir -p "$OUT/round$round"
    # Each round starts one further along the list.
    for i in "${!RUNS[@]}"; do
        run=${RUNS[$(((i + round - 1) % ${#RUNS[@]}))]}
        echo "[round $round/$ROUNDS, $((SECONDS - started)) s] $run"
        case $run in
            modelless-*) run_modelless "${run#modelless-}" "$round" ;;
            peer-*) run_peer "${run#peer-}" "$round" ;;
        esac
    done
done
"$PYTHON" scripts/bench/images_table.py "$OUT" --variant "$VARIANT" --concurrency "$CONCURRENCY" | tee "$OUT/results.md"
echo "wrote $OUT/results.md and $OUT/results.svg"
