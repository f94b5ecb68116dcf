# Entry points for development and CI. Builds go to a target dir outside the clone,
# so fresh clones reuse earlier builds; override with CARGO_TARGET_DIR=...
CARGO_TARGET_DIR ?= $(HOME)/.cache/modelless/target
export CARGO_TARGET_DIR

.PHONY: setup setup-demo setup-policies setup-torch test-deps demo test bench bench-gpu bench-switch bench-policy bench-serve profile fmt lint

# What the demo needs, under .modelless/: the Python venv, the ONNX Runtime library,
# the Rust policies, the pretrained variants and photos (idempotent).
setup-demo:
	bash scripts/setup/demo.sh

# Everything the tests need besides (test models, OCR models and pages, images, the
# policies in every language, the manifest validator), under .modelless/ (idempotent).
setup:
	bash scripts/setup/base.sh

# The policies in Python, TypeScript, Go, Zig and AssemblyScript, and their pinned
# toolchains (setup runs it too).
setup-policies: setup-demo
	bash scripts/setup/policies.sh

# PyTorch (its own venv, 4.7 GB) and the TorchScript modules, for the `tch` feature.
setup-torch: setup
	bash scripts/setup/torch.sh

# What a build with the `tch` feature needs: libtorch through the venv's python.
TORCH_ENV = eval "$$(bash scripts/setup/torch_env.sh)" &&

demo: setup-demo
	cargo run --release -p modelless-lab --example demo

# The Debian packages the tests need (clang, lld, nginx, podman, runc, …): installed when
# run as root, else named with the command to run first.
test-deps:
	bash scripts/setup/test_deps.sh

# test-deps before setup, which builds the C policy only where clang is; make runs
# prerequisites in order, and this keeps that order under -j too.
.NOTPARALLEL: test
test: test-deps setup-torch
	# The runtime's modules import only from their own layer and those below, and no
	# modules of the runtime or the lab import each other in a circle.
	cargo run --locked -q -p modelless-layers -- --quiet
	# An application linking modelless compiles none of the lab's crates, and the
	# default build (no feature) none of the policy host's, the images' or the server's.
	bash scripts/build/lean.sh
	# The public API of `modelless`, against the reviewed list in sdk/public-api.txt.
	bash scripts/build/public_api.sh
	# An app outside the workspace, built from the manifest the README copies (with the
	# README's first example as its `readme` binary), run for an answer, a policy
	# reload and a serve that stops at once.
	cargo build --locked --manifest-path examples/embedding/Cargo.toml --bins
	cargo run --locked -q --manifest-path examples/embedding/Cargo.toml --bin embedding -- 0
	# The release CLI without libtorch: the container test builds its image from it.
	cargo build --release --locked -p modelless-lab
	$(TORCH_ENV) cargo test --workspace --all-features --locked
	# The API docs build without a broken or private link.
	$(TORCH_ENV) RUSTDOCFLAGS="-D warnings" cargo doc --workspace --all-features --no-deps --locked
	# The GPU tests are ignored (and listed so) where no NVIDIA GPU is; where one is, they run.
	@if nvidia-smi -L >/dev/null 2>&1; then \
		eval "$$(bash scripts/setup/ort_gpu.sh)" && \
		$(TORCH_ENV) cargo test -p modelless --all-features --locked --test integration -- --include-ignored gpu::; \
	else echo "no NVIDIA GPU (nvidia-smi lists none): the GPU tests above were ignored"; fi
	# A target dir of its own: the policy crates are cdylibs, whose files carry no hash,
	# so builds of them by this workspace and by the root one (the sdk's tests call them
	# natively) would overwrite each other.
	cargo test --manifest-path policies-wasm/Cargo.toml --locked --target-dir $(CARGO_TARGET_DIR)/policies-wasm

bench: setup
	cargo bench -p modelless-runtime --bench serving --bench batch_cost

bench-switch: setup
	cargo bench -p modelless-runtime --bench switching

bench-policy: setup
	cargo bench -p modelless --bench policy_round_trip --bench policy_languages

# TorchScript variants on the first GPU: fits, warm-up predictor error, throughput
# against the raw loop (table and plot in target/profiles-gpu).
bench-gpu: setup-torch
	$(TORCH_ENV) cargo run --release -p modelless-lab --features tch -- profile examples/gpu.toml --force --out target/profiles-gpu

# gRPC over loopback against in-process calls, at concurrency 1 and 32.
bench-serve: setup
	cargo bench -p modelless --features server --bench kserve_overhead

# Profiles of every variant in examples/classify.toml, stored beside the models.
profile: setup
	cargo run --release -p modelless-lab -- profile examples/classify.toml --out target/profiles

fmt:
	cargo fmt --all

lint: setup-torch
	$(TORCH_ENV) cargo clippy --workspace --all-targets --all-features -- -D warnings
