#!/usr/bin/env python3
"""The random-weight MLX benchmark checkpoints, with the Qwen3 tokenizer beside them.

The same shapes as bench/cpu_vs_mlx.py, saved once under bench/out/<shape>-q<bits>g64 by mlx-lm
(so run it with the test venv, which has mlx). The tokenizer lets `sanctum serve` and the GGUF
converter speak text; its 151,669 ids sit inside every shape's vocabulary, the rest are padding.

Usage: .venv/bin/python bench/peers/checkpoints.py --shape qwen2-0.5b --bits 4 8
"""
from __future__ import annotations

import argparse
import gzip
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
OUT = ROOT / "bench" / "out"
TOKENIZER_DIR = ROOT / "tests" / "data" / "tokenizers" / "qwen3"


def checkpoint_dir(shape: str, bits: int) -> Path:
    return OUT / f"{shape}-q{bits}g64"


def add_tokenizer(out: Path) -> None:
    if (out / "tokenizer.json").exists():
        return
    with gzip.open(TOKENIZER_DIR / "tokenizer.json.gz", "rb") as src, open(out / "tokenizer.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(TOKENIZER_DIR / "tokenizer_config.json", out / "tokenizer_config.json")


def build(shape: str, bits: int) -> Path:
    out = checkpoint_dir(shape, bits)
    if not (out / "config.json").exists():
        sys.path.insert(0, str(ROOT / "tools"))
        sys.path.insert(0, str(ROOT / "bench"))
        import tiny_models
        from cpu_vs_mlx import SHAPES
        # seed 0 for every bit width: the 4- and 8-bit files quantize the same bf16 weights.
        model = tiny_models.make_model(SHAPES[shape], seed=0)
        tiny_models.save_checkpoint(model, SHAPES[shape], out, bits=bits, group_size=64)
    add_tokenizer(out)
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True)
    ap.add_argument("--bits", type=int, nargs="+", default=[4, 8], choices=[4, 8])
    a = ap.parse_args()
    for bits in a.bits:
        print(build(a.shape, bits))
    return 0


if __name__ == "__main__":
    sys.exit(main())
