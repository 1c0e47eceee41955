"""Where one decode step's GPU time goes, kernel by kernel, at a benchmark shape with few layers.

Writes a random MLX 4-bit checkpoint of SHAPE cut to --layers layers, times `sanctum bench` decode on it
(CUDA graphs, as served), then runs `sanctum generate` eagerly under Nsight Compute, reading only each
kernel's duration. The last decode step is found as the repeating tail of the kernel sequence; its
kernels are printed in order with their times, then summed by kernel name. The gap between the sum
and the graph's step time is what launches and dependencies cost.

With --prefill N it profiles one prefill of N tokens instead: every kernel after loading (the load's
weight reordering excluded), summed by name.

  python3 bench/gpu/profile_decode.py --shape qwen3_5_moe-35b-a3b --layers 4 [--prefill 4096] --out DIR
Needs SANCTUM_BIN and ncu on the PATH (or NCU).
"""
import argparse
import csv
import io
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import random_checkpoint  # noqa: E402


def graph_step_ms(model: Path) -> float:
    cmd = [os.environ["SANCTUM_BIN"], "bench", "--model", str(model), "--device", "cuda", "--tg", "64", "--decode-context", "64",
           "--repetitions", "3", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True)
    tg = [x for x in json.loads(r.stdout)["results"] if x["test"].startswith("tg")][0]
    return 1000.0 / tg["tokens_per_second"]


def kernel_times(model: Path, prompt: int, tokens: int, log: Path) -> list[tuple[str, float]]:
    ncu = os.environ.get("NCU", "ncu")
    ids = ",".join(str(5 + i % 1000) for i in range(prompt))
    cmd = [ncu, "--clock-control", "none", "--cache-control", "none", "--metrics", "gpu__time_duration.sum", "--csv", "--log-file", str(log),
           os.environ["SANCTUM_BIN"], "generate", "--model", str(model), "--device", "cuda", "--prompt-ids", ids, "--max-tokens",
           str(tokens), "--ignore-eos", "--no-pld"]
    subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=True, env={**os.environ, "SANCTUM_TUNE": "cuda_graphs=0"})
    text = log.read_text()
    start = text.index('"ID"')
    rows = []
    for row in csv.DictReader(io.StringIO(text[start:])):
        if row.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = row["Metric Unit"]
        value = float(row["Metric Value"].replace(",", ""))
        scale = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}[unit]
        rows.append((row["Kernel Name"].split("(")[0].split("<")[0], value * scale))
    return rows


def last_step(rows: list[tuple[str, float]]) -> list[tuple[str, float]]:
    """The shortest tail that repeats right before itself: one decode step's kernels."""
    names = [n for n, _ in rows]
    for p in range(8, len(names) // 2 + 1):
        if names[-p:] == names[-2 * p:-p]:
            return rows[-p:]
    raise SystemExit("no repeating decode step found in the kernel sequence")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, choices=list(random_checkpoint.SHAPES))
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=4)
    ap.add_argument("--prefill", type=int, default=0, help="profile a prefill of this many tokens instead of a decode step")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = Path(os.environ.get("SANCTUM_BENCH_DIR", "/tmp/sanctum-bench")) / f"{args.shape}-{args.layers}l"
    if not (model / "config.json").exists():
        random_checkpoint.write_mlx_4bit(model, random_checkpoint.hf_config(args.shape, args.layers))
    if args.prefill:
        rows = kernel_times(model, args.prefill, 1, out / f"{args.shape}-prefill{args.prefill}-ncu.csv")
        step = [(n, t) for n, t in rows if not n.split("::")[-1].startswith("tile_")]
        total = sum(t for _, t in step)
        print(f"{args.shape}, {args.layers} layers: prefill of {args.prefill} tokens, {len(step)} kernels, their sum {total / 1000:.2f} ms")
    else:
        step_ms = graph_step_ms(model)
        step = last_step(kernel_times(model, 3, args.tokens, out / f"{args.shape}-ncu.csv"))
        total = sum(t for _, t in step)
        print(f"{args.shape}, {args.layers} layers: graph step {step_ms * 1000:.1f} us; {len(step)} kernels, their sum {total:.1f} us")
        for name, t in step:
            print(f"  {t:8.2f}  {name}")
    by_name = defaultdict(lambda: [0, 0.0])
    for name, t in step:
        by_name[name][0] += 1
        by_name[name][1] += t
    print("by kernel:")
    for name, (count, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1]):
        print(f"  {t:8.1f} us  {count:3d}x  {name}")


if __name__ == "__main__":
    main()
