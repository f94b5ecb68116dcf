#!/usr/bin/env bash
# The Debian packages `make test` needs besides Rust and Python 3. Run by `make test`
# (before setup, which builds the C policy only where clang is) and by `.ci/run`.
# Installs what is missing with apt-get when run as root; otherwise names the one
# command to run first and exits non-zero, so that no test fails later for want of a
# tool. Installs nothing when everything is there, so running it every time is cheap.
set -euo pipefail

log() { echo "install_test_deps: $*" >&2; }

missing=()
# Debian ships venv's ensurepip (needed by scripts/setup/base.sh) in python3-venv.
python3 -c 'import ensurepip' 2>/dev/null || missing+=(python3-venv)
# .ci/run calls this before `make test`, on machines that may lack make.
command -v make >/dev/null || missing+=(make)
# The C policy module is built with clang's wasm32 target and wasm-ld.
command -v clang >/dev/null || missing+=(clang)
command -v wasm-ld >/dev/null || missing+=(lld)
# The TypeScript and AssemblyScript policies build with npm's toolchains, run by Node.js.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
# The fleet test puts nginx in front of modelless replicas.
command -v nginx >/dev/null || missing+=(nginx)
# The container test builds and runs the image with podman, through runc (crun
# refuses hybrid cgroup hierarchies), and polls its readiness with curl.
command -v podman >/dev/null || missing+=(podman)
command -v runc >/dev/null || missing+=(runc)
command -v curl >/dev/null || missing+=(curl)
# The OCI source tests push to and pull from a real registry (CNCF distribution).
command -v docker-registry >/dev/null || missing+=(docker-registry)
# The OCR pipeline's labelled pages are rendered in the DejaVu fonts.
[[ -f /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]] || missing+=(fonts-dejavu-core)

if [[ ${#missing[@]} -eq 0 ]]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    log "missing ${missing[*]} (Debian's package names): install them with your package manager, then re-run"
    exit 1
fi
if [[ $(id -u) -ne 0 ]]; then
    here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
    log "missing ${missing[*]}; run first: sudo bash $here/test_deps.sh"
    exit 1
fi
log "installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
