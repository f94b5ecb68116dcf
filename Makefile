# Entry points for development and CI. Builds go to a target dir outside the clone,
# so fresh clones reuse earlier builds; override with CARGO_TARGET_DIR=...
CARGO_TARGET_DIR ?= $(HOME)/.cache/modelless/target
export CARGO_TARGET_DIR

.PHONY: setup demo test bench bench-switch fmt lint

# Python venv, ONNX Runtime library and generated models under .modelless/ (idempotent).
setup:
	bash scripts/setup.sh

demo: setup
	cargo run --release -p modelless-examples --example demo

test: setup
	cargo test --workspace --locked

bench: setup
	cargo bench -p modelless-runtime --bench serving

bench-switch: setup
	cargo bench -p modelless-runtime --bench switching

fmt:
	cargo fmt --all

lint:
	cargo clippy --workspace --all-targets -- -D warnings
