#!/usr/bin/env bash
# Policies in Python, TypeScript, Go, Zig and AssemblyScript, with pinned toolchains
# under .modelless/toolchains (`make setup-policies`; scripts/setup/base.sh runs it for
# the tests). A language whose toolchain cannot be installed is skipped, and
# .modelless/policies/languages.txt says so. The Rust and C policies are
# scripts/policies/build.sh's, which scripts/setup/demo.sh runs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bash "$ROOT/scripts/setup/policy_toolchains.sh"
bash "$ROOT/scripts/policies/build_languages.sh"
