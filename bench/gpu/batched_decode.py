#!/usr/bin/env python3
"""Batched decode on a GPU: aggregate output tok/s of 1..N concurrent streams through `sanctum serve
--device cuda`, each stream a 128-token prompt and 64 greedy tokens, on a random 4-bit checkpoint at a
production shape (random_checkpoint.py) with the Qwen3 tokenizer (its 151,936-id vocabulary replaces
the shape's, so every sampled id decodes). Prints one row per concurrency with its ratio to one stream.

  SANCTUM_BIN=... python3 bench/gpu/batched_decode.py --shape qwen3_5-27b --levels 1,4,8,16 [--json OUT]
"""
import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "bench" / "server"))
import loadgen  # noqa: E402
import random_checkpoint  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "tokenizers" / "qwen3"


def make_model(shape: str, out: Path, layers: int | None) -> Path:
    config = random_checkpoint.hf_config(shape, layers)
    config["vocab_size"] = 151936
    random_checkpoint.write_mlx_4bit(out, config)
    with gzip.open(TOKENIZER / "tokenizer.json.gz", "rb") as src, open(out / "tokenizer.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(TOKENIZER / "tokenizer_config.json", out / "tokenizer_config.json")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3_5-27b", choices=sorted(random_checkpoint.SHAPES))
    ap.add_argument("--levels", default="1,4,8,16")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--layers", type=int, help="fewer layers than the shape's (a quick check of the script)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    binary = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    levels = [int(x) for x in args.levels.split(",")]
    with tempfile.TemporaryDirectory(prefix="batched-decode-") as tmp:
        model = make_model(args.shape, Path(tmp) / args.shape, args.layers)
        # Prompt lookup and the prompt cache off: every stream decodes one token per step from its own prefill.
        extra = ["--device", args.device, "--no-pld", "--prompt-cache-mb", "0", "--max-seqs", str(max(levels))]
        with loadgen.ServeProcess(binary, str(model), 8, extra, timeout=600) as srv:
            loadgen.run(srv.url, loadgen.LoadConfig(levels=[1], prompt_tokens=args.prompt_tokens, max_tokens=4, requests_per_client=1))
            cfg = loadgen.LoadConfig(levels=levels, prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens,
                                     requests_per_client=args.requests_per_client)
            rows = loadgen.run(srv.url, cfg, pid=srv.pid)
    one = next((r["aggregate_tok_s"] for r in rows if r["concurrency"] == 1), None)
    print(f"{args.shape}, 4-bit g64, prompt {args.prompt_tokens}, {args.max_tokens} tokens per stream")
    print(f"{'streams':>8}{'tok/s':>10}{'x one':>8}{'ttft p50 ms':>13}{'failed':>8}")
    for r in rows:
        ratio = f"{r['aggregate_tok_s'] / one:8.2f}" if one else f"{'':8}"
        failed = r["requests"] - r["completed"]
        print(f"{r['concurrency']:>8}{r['aggregate_tok_s']:>10.1f}{ratio}{r['ttft_p50_ms']:>13.1f}{failed:>8}")
    if args.json:
        args.json.write_text(json.dumps({"shape": args.shape, "levels": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
