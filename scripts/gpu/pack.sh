#!/usr/bin/env bash
# Here, before a GPU session: everything scripts/gpu/check.sh needs on the GPU machine,
# in the git-ignored .gpu-pack/ and .gpu-kit/, from a fresh checkout in one command (see
# ../shared/gpu/README.md for how they travel: prov.zst alone first, the rest in the
# next call).
#  - ONNX Runtime's GPU build, packed by the kit (once);
#  - the release CLI, stripped and compressed;
#  - the same CLI with the `tch` feature, built against the GPU machine's PyTorch
#    (2.11.0) by scripts/gpu/build_tch_for_torch.sh, for a TorchScript variant on cuda:0
#    (TORCHSCRIPT=0 leaves it out: it takes a 4.7 GB venv and a few minutes);
#  - onnxconverter-common and packaging (pure Python) for the fp16 copy, where the GPU
#    machine's Python has onnx but neither onnxruntime nor packaging;
#  - the photos the fp16 copy is checked on (.modelless/ is not carried);
#  - the kit itself.
# The GPU machine takes at most 8 paths and 64 MiB a call, so the pack travels in two:
#   first:  .gpu-pack/prov.zst .gpu-pack/zstd .gpu-kit   (bash .gpu-kit/unpack.sh .gpu-pack)
#   second: .gpu-pack/{core.zst,libonnxruntime_providers_shared.so,zstd,modelless.zst,
#           modelless-tch.zst,pylib,photos} .gpu-kit
#           (bash .gpu-kit/unpack.sh .gpu-pack && bash scripts/gpu/check.sh "$OUT")
#   a rerun, in the call right after: .gpu-kit (ONLY="..." bash scripts/gpu/check.sh "$OUT")
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
KIT=${KIT:-../shared/gpu}
# The venv (pip, onnxconverter-common's wheel) and the photos come from the setup.
bash scripts/setup/base.sh
mkdir -p .gpu-pack
[ -s .gpu-pack/prov.zst ] || bash "$KIT/pack_ort_gpu.sh" .gpu-pack
target=${CARGO_TARGET_DIR:-$HOME/.cache/modelless/target}
CARGO_TARGET_DIR=$target cargo build --release --locked -p modelless-lab
strip -o /tmp/modelless-stripped "$target/release/modelless"
zstd -q -f -19 /tmp/modelless-stripped -o .gpu-pack/modelless.zst
if [ "${TORCHSCRIPT:-1}" = 1 ]; then
    bash scripts/gpu/build_tch_for_torch.sh 2.11.0 /tmp/modelless-tch-stripped
    zstd -q -f -19 /tmp/modelless-tch-stripped -o .gpu-pack/modelless-tch.zst
else
    rm -f .gpu-pack/modelless-tch.zst
fi
rm -rf .gpu-pack/pylib && mkdir -p .gpu-pack/pylib
wheel_dir=$(mktemp -d)
.modelless/venv/bin/pip download -q --no-deps -d "$wheel_dir" onnxconverter-common==1.16.0 packaging==25.0
for wheel in "$wheel_dir"/*.whl; do .modelless/venv/bin/python -m zipfile -e "$wheel" .gpu-pack/pylib; done
rm -rf .gpu-pack/photos && cp -r .modelless/photos .gpu-pack/photos
rm -rf .gpu-kit && cp -r "$KIT" .gpu-kit
du -sh .gpu-pack/* | sed 's/^/gpu_pack: /'
