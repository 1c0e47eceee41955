#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, checks the C++ layout (clang-format 14), then the
# C++ unit/op tests (ctest), the Python suites (parity with mlx-lm and transformers,
# tokenizer/chat-template oracles, CLI error cases, security, the live-server battery), and each
# libFuzzer target for a bounded time.
# Extra arguments go to pytest (e.g. -k parity).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== Format (clang-format 14)"
scripts/check_format.sh

echo "== C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j "$(nproc)"

echo "== Python suites (pytest)"
export SANCTUM_BIN="$PWD/build/sanctum"
.venv/bin/python -m pytest -q tests "$@"

echo "== Fuzzers (${FUZZ_SECONDS:-20} s each)"
FUZZ_SECONDS="${FUZZ_SECONDS:-20}" scripts/fuzz.sh
