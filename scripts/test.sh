#!/usr/bin/env bash
# Runs every test: installs what is missing, builds, then C++ unit/op tests (ctest) and the Python
# suites (parity with mlx-lm, tokenizer/chat-template oracles, CLI error cases).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== C++ tests (ctest)"
ctest --test-dir build --output-on-failure -j "$(nproc)"

echo "== Python suites (pytest)"
export SANCTUM_BIN="$PWD/build/sanctum"
.venv/bin/python -m pytest -q tests "$@"
