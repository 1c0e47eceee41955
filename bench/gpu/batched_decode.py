#!/usr/bin/env python3
"""Batched decode on a GPU: aggregate output tok/s of 1..N concurrent streams through `sanctum serve
--device cuda`, each stream a 128-token prompt and 64 greedy tokens, on a random 4-bit checkpoint at a
production shape (random_checkpoint.py) with the Qwen3 tokenizer (its 151,936-id vocabulary replaces
the shape's, so every sampled id decodes). Prints one row per concurrency with its ratio to one stream.

  SANCTUM_BIN=... python3 bench/gpu/batched_decode.py --shape qwen3_5-27b --levels 1,4,8,16 [--json OUT]

--tune KNOB=VALUE (repeatable) passes a tuning knob to the server. --trace CSV injects the kernel
trace library (SANCTUM_KERNEL_TRACE_LIB, bench/gpu/kernel_trace.cc) into the server and then prints,
for the last level, where the GPU's time went: the share of the level's wall time some kernel ran,
and the kernels by summed time with their launch counts per output token.
Run it with one level: the trace costs host time, so its tok/s are not the untraced figures.
"""
import argparse
import csv
import gzip
import json
import os
import shutil
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "bench" / "server"))
import loadgen  # noqa: E402
import random_checkpoint  # noqa: E402
from trace_decode import short_name  # noqa: E402

TOKENIZER = ROOT / "tests" / "data" / "tokenizers" / "qwen3"


def make_model(shape: str, out: Path, layers: int | None) -> Path:
    config = random_checkpoint.hf_config(shape, layers)
    config["vocab_size"] = 151936
    random_checkpoint.write_mlx_4bit(out, config)
    with gzip.open(TOKENIZER / "tokenizer.json.gz", "rb") as src, open(out / "tokenizer.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(TOKENIZER / "tokenizer_config.json", out / "tokenizer_config.json")
    return out


def summarize_trace(trace: Path, level: dict, show: int = 30) -> None:
    """Kernels that ran during `level` (its wall window on the GPU clock is taken as the trace's last
    `level["wall_s"]` seconds of kernels): busy share, and per kernel the summed time and launches."""
    kernels = []
    with trace.open() as f:
        for row in csv.DictReader(f):
            if row["grid"] != "-":
                kernels.append((int(row["start_ns"]), int(row["end_ns"]), short_name(row["name"])))
    if not kernels:
        print("no kernels in the trace: was SANCTUM_KERNEL_TRACE_LIB loaded?")
        return
    kernels.sort()
    end = max(k[1] for k in kernels)
    begin = end - int(level["wall_s"] * 1e9)
    window = [k for k in kernels if k[0] >= begin]
    busy, reach = 0, begin
    for start, stop, _ in window:  # the union of the kernels' intervals
        if stop > reach:
            busy += stop - max(start, reach)
            reach = stop
    by_name = defaultdict(lambda: [0, 0])
    for start, stop, name in window:
        by_name[name][0] += stop - start
        by_name[name][1] += 1
    tokens = max(1, level["completed"] * level.get("max_tokens", 1))
    print(f"trace, {level['concurrency']} streams: {len(window)} kernels in {level['wall_s']:.2f} s, "
          f"GPU busy {100 * busy / max(1, end - begin):.1f}% of the wall time")
    print(f"{'kernel':<48}{'ms':>10}{'share':>8}{'launches':>10}{'per token':>11}")
    total = sum(v[0] for v in by_name.values())
    for name, (ns, count) in sorted(by_name.items(), key=lambda kv: -kv[1][0])[:show]:
        print(f"{name[:47]:<48}{ns / 1e6:>10.1f}{100 * ns / total:>7.1f}%{count:>10}{count / tokens:>11.2f}")


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
    ap.add_argument("--trace", type=Path, help="write the server's kernel trace here and summarize the last level")
    ap.add_argument("--tune", action="append", default=[], metavar="KNOB=VALUE", help="passed to the server (repeatable)")
    args = ap.parse_args()
    if args.trace:
        if not os.environ.get("SANCTUM_KERNEL_TRACE_LIB"):
            raise SystemExit("--trace needs SANCTUM_KERNEL_TRACE_LIB (the built libsanctum_kernel_trace.so)")
        os.environ.update({"CUDA_INJECTION64_PATH": os.environ["SANCTUM_KERNEL_TRACE_LIB"], "SANCTUM_KERNEL_TRACE": str(args.trace)})
    binary = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    levels = [int(x) for x in args.levels.split(",")]
    with tempfile.TemporaryDirectory(prefix="batched-decode-") as tmp:
        model = make_model(args.shape, Path(tmp) / args.shape, args.layers)
        # Prompt lookup and the prompt cache off: every stream decodes one token per step from its own prefill.
        # A queue as long as the clients: requests the memory plan cannot run at once wait, not 429.
        extra = ["--device", args.device, "--no-pld", "--prompt-cache-mb", "0", "--max-seqs", str(max(levels)),
                 "--max-queue", str(max(levels))]
        for knob in args.tune:
            extra += ["--tune", knob]
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
    if args.trace:
        rows[-1]["max_tokens"] = args.max_tokens
        summarize_trace(args.trace, rows[-1])
    if args.json:
        args.json.write_text(json.dumps({"shape": args.shape, "levels": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
