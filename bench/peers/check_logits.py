#!/usr/bin/env python3
"""Correctness gate for the GGUF conversion: the same prompt through llama.cpp and sanctum.

For each shape and bit width, feeds one short prompt (token ids) to llama.cpp (the converted GGUF)
and to `sanctum logits --matmul-precision f32` (the MLX checkpoint) and compares every position's
logits: greedy next-token agreement, max and mean |delta logit|, and their correlation. The two
files hold the same random weights, but quantized differently (Q4_0 / Q8_0 blocks of 32 against
MLX affine groups of 64) and llama.cpp rounds activations to 8 bits, so the gate expects agreement,
not identity; 8-bit / Q8_0 is the tight check. It fails (exit 1) where greedy tokens agree at fewer
than --min-agree of the positions. --float f32 hands llama.cpp the dequantized weights themselves:
then the logits must match to rounding up to the first position where a MoE top-k near-tie flips
(random routers have many), which "close prefix" reports.

Usage: .venv-bench/bin/python bench/peers/check_logits.py [--shapes qwen2-0.5b ...] [--bits 8 4] [--float f32] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
import llama_peer  # noqa: E402
import mlx_to_gguf  # noqa: E402

SHAPES = ["qwen2-0.5b", "qwen3_5-0.8b", "qwen3_5_moe-small"]
TOKENIZER_IDS = 151643  # ordinary (non-special) ids of the Qwen3 tokenizer every shape carries


def gguf_for(shape: str, bits: int, float_type: str | None, tmp: Path) -> tuple[Path, Path]:
    ckpt = ROOT / "bench" / "out" / f"{shape}-q{bits}g64"
    if not (ckpt / "config.json").exists():
        raise FileNotFoundError(f"{ckpt}: build it first with .venv/bin/python bench/peers/checkpoints.py --shape {shape}")
    if float_type:  # several GB: written for this check only
        out = tmp / f"{ckpt.name}-{float_type}.gguf"
        mlx_to_gguf.convert(ckpt, out, float_type)
        return ckpt, out
    out = ckpt.parent / f"{ckpt.name}.gguf"
    if not out.exists():
        mlx_to_gguf.convert(ckpt, out)
    return ckpt, out


def sanctum_logits(binary: str, ckpt: Path, ids: list[int], threads: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logits.npy"
        subprocess.run([binary, "logits", "--model", str(ckpt), "--prompt-ids", ",".join(map(str, ids)), "--out", str(out),
                        "--matmul-precision", "f32", "--threads", str(threads)], check=True, capture_output=True)
        return np.load(out)


def compare(ours: np.ndarray, peer: np.ndarray) -> dict:
    delta = np.abs(ours - peer)
    agree = (ours.argmax(-1) == peer.argmax(-1))
    corr = [float(np.corrcoef(a, b)[0, 1]) for a, b in zip(ours, peer)]
    # Where the two first part: with random routers a top-k near-tie can flip on rounding alone,
    # and attention and the recurrent state carry that position's difference to every later one.
    close = np.abs(ours - peer).mean(-1) < 0.05 * np.abs(ours).mean()
    first_apart = int(np.argmin(close)) if not close.all() else len(close)
    return {"close_prefix": first_apart,"positions": int(len(agree)), "greedy_agree": int(agree.sum()), "max_abs_delta": float(delta.max()),
            "mean_abs_delta": float(delta.mean()), "mean_abs_logit": float(np.abs(ours).mean()),
            "min_correlation": float(min(corr))}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=SHAPES, choices=SHAPES)
    ap.add_argument("--bits", nargs="+", type=int, default=[8, 4], choices=[4, 8])
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--float", choices=["f32", "f16"],
                    help="give llama.cpp the dequantized weights unquantized: isolates the conversion from Q4_0/Q8_0 rounding")
    ap.add_argument("--min-agree", type=float, default=0.75)
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    ids = llama_peer.random_tokens(a.tokens, TOKENIZER_IDS, seed=3)
    rows = []
    print(f"{'shape':20}{'gguf':>6}{'greedy agree':>14}{'max |d|':>10}{'mean |d|':>10}{'mean |logit|':>14}{'min corr':>10}"
          f"{'close prefix':>14}")
    for shape in a.shapes:
        for bits in a.bits:
            with tempfile.TemporaryDirectory(dir=ROOT / "bench" / "out") as tmp:
                ckpt, gguf = gguf_for(shape, bits, a.float, Path(tmp))
                ours = sanctum_logits(a.sanctum, ckpt, ids, a.threads)
                peer = llama_peer.LlamaPeer(str(gguf), a.threads, n_ctx=max(64, a.tokens))
                try:
                    theirs = peer.all_logits(ids)
                finally:
                    peer.close()
            r = {"shape": shape, "bits": bits, "gguf": a.float or ("Q8_0" if bits == 8 else "Q4_0"),
                 **compare(ours, theirs[:, :ours.shape[1]])}
            rows.append(r)
            qname = r["gguf"]
            print(f"{shape:20}{qname:>6}{r['greedy_agree']:>8}/{r['positions']:<5}{r['max_abs_delta']:10.3f}"
                  f"{r['mean_abs_delta']:10.4f}{r['mean_abs_logit']:14.3f}{r['min_correlation']:10.4f}"
                  f"{r['close_prefix']:>14}", flush=True)
    if a.json:
        a.json.write_text(json.dumps({"prompt_ids": ids, "rows": rows}, indent=2))
    failed = [f"{r['shape']} {r['gguf']}" for r in rows if r["greedy_agree"] < a.min_agree * r["positions"]]
    if failed:
        print(f"greedy agreement below {a.min_agree:.0%} for: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
