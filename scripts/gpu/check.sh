#!/usr/bin/env bash
# The GPU check, extending ../shared/gpu/check.sh (under 10 minutes on an H100): run on
# the GPU machine from the project root after the kit's unpack.sh, with the release CLI
# at $MODELLESS (default /tmp/modelless). Measures, in one run:
#  - `modelless profile`: the fit's R² and its batch-1 prediction;
#  - in process: fp32 at 1, 16 and 64 callers, the fp16 copy at 64 callers;
#  - served over KServe V2 gRPC at 16 and 64 callers, with the server's threads' CPU
#    and its batch sizes sampled while the load runs, then an open loop at 80 % of the
#    capacity the stored profile states (admission by that profile refuses nothing);
#  - the same gRPC load at 16 callers with cuDNN's heuristic search, without padding
#    batches to warmed sizes, and with every size warmed instead;
#  - `modelless variants make`: the fp16 copy and its top-1 agreement on photos;
#  - where the pack has the CLI built with `tch` for this PyTorch (modelless-tch.zst),
#    a TorchScript ResNet-50 in process at 1 and 64 callers;
#  - fp32 in process at 64 callers with batches staged in pinned memory, with two
#    instances, with TF32 and NHWC, and with CUDA graphs (at 1 caller too);
#  - PyTorch eager at batch 1, 8 and 64 (the kit's torch_baseline.py), and what a
#    batch of 64 takes to reach the GPU from pageable and from pinned memory.
# Without a GPU, DEVICE=cpu MODEL=path.onnx SECONDS_EACH=3 runs the same steps on the
# CPU (a dry run of the script). Prints the runs and the bars they are judged by
# (scripts/gpu/verdict.py) at the end. The steps no bar needs (the alternatives,
# TorchScript) are skipped when less of BUDGET seconds (540) is left than they take.
#
# RESULTS_DIR (the first argument) gets two files, brought up to date after every step
# so that a run stopped by the machine's time limit still brings its figures: the
# verdict, and results.tar.gz with every log, summary and sample (the GPU machine sends
# back at most 8 files a call).
#
# Everything is measured in WORK_DIR (default /tmp/gpu-check), which outlasts the call
# as long as the machine does. ONLY="in64 torch" reruns just the named steps there,
# with the model, the fp16 copy and the stored profile of the last run, and judges all
# the runs again: the verdict names the steps to rerun where a ratio is within 10 % of
# its bar. Steps: fp16 profile in1 in16 in64 fp16_64 torch grpc16 grpc64 admit80
# heur16 nopad16 warmall16 ts1 ts64 in64_pinned in64_two in64_nhwc in1_graph in64_graph.
set -u
KIT=${KIT:-.gpu-kit}; DEVICE=${DEVICE:-cuda:0}; S_EACH=${SECONDS_EACH:-12}; ONLY=${ONLY:-}
[ "$DEVICE" = cpu ] || . "$KIT/env.sh"
B=${MODELLESS:-/tmp/modelless}; W=${WORK_DIR:-/tmp/gpu-check}; S=$(date +%s); RES=${1:-$W/results}
if [ -z "$ONLY" ]; then rm -rf "$W"; elif [ ! -s "$W/gpu.toml" ]; then echo "ONLY needs a whole run in $W first"; exit 2; fi
mkdir -p "$W" "$RES"
export PYTHONPATH=${PYTHONPATH:-}:$PWD/.gpu-pack/pylib MODELLESS_PYTHON=${MODELLESS_PYTHON:-python3}
t() { echo "== [$(( $(date +%s) - S ))s] $*"; }
want() { [ -z "$ONLY" ] || [[ " $ONLY " == *" $1 "* ]]; }
# A call brings back files of at most 16 MiB: the plots go first when it would not fit.
save() {
  python3 scripts/gpu/verdict.py $W > $W/verdict.md 2>&1; cp $W/verdict.md "$RES/"
  local tgz="$RES/results.tar.gz" skip
  for skip in "" "*.svg"; do
    tar czf "$tgz" -C $W --exclude=./results --exclude='*.onnx' --exclude='*.pt' --exclude=requests.jsonl \
      ${skip:+--exclude="$skip"} . 2>/dev/null
    [ "$(stat -c %s "$tgz")" -lt 15000000 ] && break
  done
}
# The steps that no bar needs run only while this much of the run's budget is left.
BUDGET=${BUDGET:-540}
time_for() { # seconds what
  local left=$(( BUDGET - ($(date +%s) - S) )); [ $left -ge $1 ] && return
  t "skipped: $2 ($left s of the budget left, $1 needed)"; return 1
}
mkdir -p /tmp/models
MODEL=${MODEL:-}
if [ -z "$MODEL" ]; then MODEL=/tmp/models/resnet50.onnx; want fp16 && python3 "$KIT/export_resnet.py" "$MODEL" | tail -1; fi
FP16=${MODEL%.onnx}.fp16.onnx
# A whole run starts without the profiles a last one stored beside the model.
[ -n "$ONLY" ] || rm -f "$(dirname "$MODEL")"/resnet50*.profile.json
variant() { # name path [extra TOML lines]
  printf '[[tasks.variants]]\nname = "%s"\npath = "%s"\naccuracy = 76.1\ndevice = "%s"\npreload = true\nbatching = { max_batch_size = 64, max_queue_delay_us = 1000 }\n%s\n' "$1" "$2" "$DEVICE" "${3:-}"
}
task() { printf '[[tasks]]\nname = "%s"\nlatency_slo_ms = 100\n' "$1"; }
load() { printf '[[tasks]]\ntask = "%s"\n[tasks.pattern]\nkind = "constant"\nrate = %s\nduration_s = %s\n' "$1" "${2:-100}" "$S_EACH"; }

{ task photos; variant resnet50 "$MODEL" 'preprocess = { size = 224, mean = [123.7, 116.3, 103.5], std = [58.4, 57.1, 57.4] }'; } > $W/photos.toml
PHOTOS=.gpu-pack/photos; [ -d $PHOTOS ] || PHOTOS=.modelless/photos
{ task classify-gpu; variant resnet50 "$MODEL"; task classify-fp16; variant resnet50-fp16 "$FP16"; } > $W/gpu.toml
{ task classify-gpu; variant resnet50 "$MODEL" '[tasks.variants.onnx.cuda]
conv_algo_search = "heuristic"'; } > $W/heuristic.toml
{ task classify-gpu; variant resnet50 "$MODEL" 'warmup = { pad_to_warmed = false }'; } > $W/nopad.toml
{ task classify-gpu; variant resnet50 "$MODEL" "warmup = { batch_sizes = [$(seq -s ', ' 64 -1 1)], pad_to_warmed = false }"; } > $W/warmall.toml
{ task classify-gpu; variant resnet50 "$MODEL" 'instances = 2'; } > $W/two.toml
{ task classify-gpu; variant resnet50 "$MODEL" '[tasks.variants.onnx.cuda]
pinned_inputs = true'; } > $W/pinned.toml
{ task classify-gpu; variant resnet50 "$MODEL" '[tasks.variants.onnx.cuda]
tf32 = true
prefer_nhwc = true'; } > $W/nhwc.toml
{ task classify-gpu; variant resnet50 "$MODEL" '[tasks.variants.onnx.cuda]
cuda_graph = true'; } > $W/graph.toml
load classify-gpu > $W/load.toml; load classify-fp16 > $W/load16.toml
if want fp16; then t "fp16 copy, checked on photos"
  timeout 240 $B variants make $W/photos.toml --task photos --from resnet50 --photos $PHOTOS --images 500 > $W/fp16.log 2>&1
  tail -4 $W/fp16.log; save
fi

if want profile; then t profile
  timeout 150 $B profile $W/gpu.toml --force --out $W/prof --first-run-sessions 0 --warm-runs 20 --throughput-secs 4 > $W/prof.log 2>&1
  grep -E '^\||not kept' $W/prof.log | head -6
  # The stored profiles hold each batch size's measured latency: the curve the fit is judged on.
  cp -f "$(dirname "$MODEL")"/resnet50*.profile.json $W/ 2>/dev/null
fi
# The stored profiles stay: every run below is admitted by them, as a served model is.
CAPACITY=$(grep -s -m1 '^| resnet50 |' $W/prof.log | awk -F'|' '{gsub(/ /, "", $8); print $8}')
load classify-gpu "$(python3 -c "print(round(0.8 * float('${CAPACITY:-0}' or 0)))")" > $W/load80.toml; save

in_process() { # name config load callers [binary]
  want $1 || return 0; t "in process: $1"; rm -rf $W/$1
  timeout 90 "${5:-$B}" loadgen --config $W/$2.toml --load $W/$3.toml --concurrency $4 --out $W/$1 > $W/$1.log 2>&1 || tail -3 $W/$1.log
  save
}
for run in "in1 load 1" "in16 load 16" "in64 load 64" "fp16_64 load16 64"; do set -- $run; in_process $1 gpu $2 $3; done
if [ "$DEVICE" != cpu ] && want torch; then t "PyTorch eager"; timeout 120 python3 "$KIT/torch_baseline.py" $W/torch.json | grep resnet50
  # What a batch of 64 images costs to reach the GPU from pageable and from pinned memory:
  # what staging batches in pinned memory would save.
  timeout 60 python3 -c 'import json, sys, time, torch
x = torch.randn(64, 3, 224, 224); pinned = x.pin_memory(); res = {}
for name, src in (("pageable", x), ("pinned", pinned)):
    for _ in range(5): src.cuda(); torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(50): src.to("cuda", non_blocking=True); torch.cuda.synchronize()
    res[name + " ms"] = round((time.perf_counter() - t) / 50 * 1e3, 3)
print("host to GPU, a batch of 64 (38.5 MB):", res); json.dump(res, open(sys.argv[1], "w"))' $W/h2d.json
  save; fi

serve() { # config
  # The runtime logs each thread's id with its full name, which top cuts to 15 bytes.
  RUST_LOG=warn,modelless_runtime::model::instance=debug $B serve --config "$1" --http 127.0.0.1:8000 --grpc 127.0.0.1:8001 > $W/serve.log 2>&1 & SP=$!
  for _ in $(seq 150); do curl -sf localhost:8000/v2/health/ready >/dev/null && return; sleep 1; done
  echo "serve did not become ready"; tail -5 $W/serve.log
}
grpc() { # name callers (0: open loop at the rate of load80.toml)
  want $1 || return 0; rm -rf $W/$1
  local LOAD=(--load $W/load.toml --concurrency $2); [ "$2" = 0 ] && LOAD=(--load $W/load80.toml)
  timeout 90 $B loadgen --grpc http://127.0.0.1:8001 --config $W/gpu.toml "${LOAD[@]}" --out $W/$1 > $W/$1.log 2>&1 &
  local LP=$!; sleep $(( S_EACH / 2 ))
  # The second frame: a second's average (top's first frame is not).
  top -H -b -n 2 -d 1 -p $SP | awk '/^ *PID/ { frame++ } frame == 2' | sed -n 1,7p > $W/$1.top
  sed 's/\x1b\[[0-9;]*m//g' $W/serve.log | grep -o 'thread="[^"]*" tid=[0-9]*' | sed 's/thread="\([^"]*\)" tid=/\1 /' > $W/tids
  awk 'NR == FNR { name[$2] = $1; next } { print $0, ($1 in name ? "= " name[$1] : "") }' $W/tids $W/$1.top > $W/$1.threads
  curl -s localhost:8000/metrics | grep -E '^modelless_(inference_(count|exec_count|compute_infer_duration_us|compute_input_duration_us|queue_duration_us)|gpu_utilization)' | head -20 > $W/$1.metrics
  wait $LP || tail -3 $W/$1.log; save
  echo "-- $1: busiest server threads:"; cat $W/$1.threads
}
if want grpc16 || want grpc64 || want admit80; then
  t "serve: gRPC 16 and 64 callers, then open loop at 80 % of the profile's capacity ($CAPACITY/s)${ONLY:+: only $ONLY}"
  serve $W/gpu.toml; grpc grpc16 16; grpc grpc64 64
  # Without a capacity (the profile failed) there is no 80 % of it to offer.
  if [ -n "$CAPACITY" ]; then grpc admit80 0; elif want admit80; then
    t "skipped: open loop at 80 % (the profile states no capacity)"; fi
  kill $SP; wait $SP 2>/dev/null
fi
for alt in "heur16 heuristic 60 cuDNN's heuristic search" "nopad16 nopad 60 batches not padded to warmed sizes" \
  "warmall16 warmall 120 every size up to 64 warmed, none padded"; do set -- $alt
  want $1 || continue; time_for $3 "gRPC 16, ${*:4}" || continue
  t "serve, ${*:4}: gRPC 16"; serve $W/$2.toml; grpc $1 16; kill $SP; wait $SP 2>/dev/null
done

# TorchScript: the CLI built against this machine's PyTorch, its libtorch from torch/lib.
TCH=${MODELLESS_TCH:-/tmp/modelless-tch}
[ -x "$TCH" ] || [ ! -s .gpu-pack/modelless-tch.zst ] || { zstd -q -d -f .gpu-pack/modelless-tch.zst -o "$TCH" 2>/dev/null \
  || .gpu-pack/zstd -q -d -f .gpu-pack/modelless-tch.zst -o "$TCH"; chmod +x "$TCH"; }
if [ -x "$TCH" ] && { want ts1 || want ts64; } && time_for 80 "TorchScript on $DEVICE"; then t "TorchScript on $DEVICE"
  TORCH_LIB=${TORCH_LIB:-$(python3 -c 'import os, torch; print(os.path.join(os.path.dirname(torch.__file__), "lib"))')}
  TS=${TS_MODEL:-/tmp/models/resnet50.pt}
  [ -s "$TS" ] || python3 -c 'import sys, torch, torchvision
m = torchvision.models.resnet50(weights=None).eval()
torch.jit.trace(m, torch.randn(1, 3, 224, 224)).save(sys.argv[1])' "$TS"
  { task classify-ts; variant resnet50-ts "$TS" 'format = "torchscript"
torchscript = { inputs = [{ name = "input", dtype = "f32", shape = [-1, 3, 224, 224] }], outputs = [{ name = "logits", dtype = "f32", shape = [-1, 1000] }] }'; } > $W/ts.toml
  load classify-ts > $W/loadts.toml
  LIBS=${LD_LIBRARY_PATH:-}; export LD_LIBRARY_PATH=$TORCH_LIB${LIBS:+:$LIBS}
  in_process ts1 ts loadts 1 "$TCH"; in_process ts64 ts loadts 64 "$TCH"
  LD_LIBRARY_PATH=$LIBS
fi

# Settings whose defaults are still to be chosen: batches staged in pinned memory, two
# sessions (streams) taking turns with the host's work, TF32 with NHWC kernels, and
# each batch size's run captured as a CUDA graph (alone, and at 64 callers).
for alt in "in64_pinned pinned 64" "in64_two two 64" "in64_nhwc nhwc 64" "in1_graph graph 1" "in64_graph graph 64"; do
  set -- $alt
  want $1 && time_for 30 "in process at $3 callers, $2" && in_process $1 $2 load $3
done

save; echo; cat $W/verdict.md; grep -m1 'agreement' $W/fp16.log
t done
