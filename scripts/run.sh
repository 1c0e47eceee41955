#!/usr/bin/env bash
# The main job: installs what is missing, builds, prepares a small qwen2 model (random weights, MLX
# 4-bit format, made with mlx-lm) under models/demo-qwen2 if absent, and generates from it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
model=models/demo-qwen2
if [ ! -f "$model/config.json" ]; then
  .venv/bin/python tools/make_tiny_model.py --arch qwen2 --out "$model" --quantize 4 --hidden 256 --layers 4
fi
exec build/sanctum generate --model "$model" --prompt-ids 1,2,3,4,5 --max-tokens 32 --temperature 0 "$@"
