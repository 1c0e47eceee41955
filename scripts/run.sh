#!/usr/bin/env bash
# The main job: installs what is missing, builds, and serves the embedded default model
# (models/default) on 127.0.0.1:8080. Extra arguments go to `sanctum serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-venv
exec build/sanctum serve "$@"
