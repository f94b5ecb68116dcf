#!/usr/bin/env bash
# What an application that links `modelless` compiles: with the features an app turns
# on, none of the lab's crates; with the defaults (none), neither the Wasm policy
# host, nor the image decoders, nor the server. Fails naming the crate that should
# not be there, then tests that the leanest build refuses a policy and images with
# the feature they need.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

crates_of() {
    cargo tree -p modelless -e normal --locked --prefix none "$@" | awk '{ print $1 }' | sort -u
}

refuse() { # the build's name, then the crates it must not list
    local name="$1" listed
    shift
    listed="$(cat)"
    for crate in "$@"; do
        if grep -qx "$crate" <<<"$listed"; then
            echo "lean build: $name compiles $crate" >&2
            exit 1
        fi
    done
}

crates_of --features policies,images,server | refuse "modelless with the app features" \
    rand rand_distr plotters clap indicatif modelless-gp modelless-lab
# tokio's multi-threaded runtime is the server's, never the default's.
if cargo tree -p modelless -e normal,features --locked -i tokio 2>/dev/null | grep -q 'rt-multi-thread'; then
    echo "lean build: modelless with default features turns on tokio's rt-multi-thread" >&2
    exit 1
fi
crates_of | refuse "modelless with default features" \
    wasmtime cranelift-codegen image fast_image_resize jpeg-decoder zune-jpeg tonic hyper axum
# The featureless build refuses what it cannot serve, naming the feature.
cargo test -p modelless-runtime --no-default-features --locked --quiet --lib -- registry::config::tests
cargo test -p modelless --no-default-features --locked --quiet --lib -- policy_config::tests
echo "lean build: modelless with the app features and with the defaults compiles none of the named crates"
