#!/usr/bin/env python3
"""Prompt-cache and prompt-lookup speculation speed on the embedded default model (qwen3_5 hybrid),
side by side in one run with the same binary:

1. Multi-turn chat: 8 turns over a ~2,000-token context (each turn = previous prompt + the model's
   reply + a new message); time to first token of turns 2-8 with --prompt-cache-mb vs without.
2. Decode speed with and without speculation on copy-heavy prompts (the evaluation battery's
   repeat and copy/extract tasks) and on ordinary prompts (arithmetic, capitals, counting).

Usage: .venv/bin/python bench/cache_and_speculation.py [--threads 2] [--sanctum build/sanctum]
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
MODEL = ROOT / "models" / "default" / "mlx-4bit"
EVAL = json.loads((ROOT / "tests" / "data" / "default_model_eval.json").read_text())
LINE = re.compile(r"prompt (\d+) tokens \((\d+) from cache\) in ([\d.]+) s .*?; (\d+) generated, decode ([\d.]+) tok/s")


def run(binary, prompts, flags, threads, max_tokens):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
    r = subprocess.run([binary, "generate", "--model", str(MODEL), "--prompts-file", f.name, "--max-tokens", str(max_tokens),
                        "--threads", str(threads), "--timing", *flags], capture_output=True, text=True, check=True)
    stats = [tuple(float(x) for x in m.groups()) for m in LINE.finditer(r.stderr)]
    outs = [[int(t) for t in line.split(",")] for line in r.stdout.strip().split("\n")]
    return outs, stats


def tokenize(binary, texts):
    r = subprocess.run([binary, "tokenize", "--tokenizer", str(MODEL), "--jsonl", "--no-add-special"],
                       input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines()]


def conversation(binary, threads):
    rng = np.random.default_rng(0)
    turns = [rng.integers(5, 4096, size=2000).tolist()]
    for _ in range(7):
        (reply,), _ = run(binary, [turns[-1]], ["--no-pld"], threads, 16)
        turns.append(turns[-1] + reply + rng.integers(5, 4096, size=40).tolist())
    return turns


def decode_rate(stats):
    tokens = sum(s[3] - 1 for s in stats)
    seconds = sum((s[3] - 1) / s[4] for s in stats if s[4] > 0)
    return tokens / seconds if seconds else 0.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    a = ap.parse_args()

    turns = conversation(a.sanctum, a.threads)
    out_off, off = run(a.sanctum, turns, ["--no-pld"], a.threads, 16)
    out_on, on = run(a.sanctum, turns, ["--no-pld", "--prompt-cache-mb", "256"], a.threads, 16)
    assert out_on == out_off, "cache changed the output"
    ttft_off = float(np.mean([s[2] for s in off[1:]]))
    ttft_on = float(np.mean([s[2] for s in on[1:]]))
    print(f"multi-turn, 8 turns from {len(turns[0])} to {len(turns[-1])} prompt tokens ({a.threads} threads):")
    print(f"  TTFT turns 2-8: no cache {ttft_off * 1e3:.1f} ms, cache {ttft_on * 1e3:.1f} ms -> {ttft_off / ttft_on:.1f}x lower; "
          f"{sum(int(s[1]) for s in on)} prompt tokens served from the cache")

    groups = {"copy-heavy (repeat, copy/extract)": ("repeat", "copy"),
              "ordinary (arithmetic, capitals, counting)": ("add", "sub", "mul", "capital", "count")}
    for label, prefixes in groups.items():
        cases = [c for c in EVAL["cases"] if c["task"].startswith(prefixes)]
        prompts = tokenize(a.sanctum, [c["prompt"] for c in cases])
        best = {}
        for name, flags in (("off", ["--no-pld"]), ("on", [])):
            rates = []
            for _ in range(3):
                outs, stats = run(a.sanctum, prompts, flags, a.threads, EVAL["max_new_tokens"])
                rates.append(decode_rate(stats))
                best[name + "_outs"] = outs
            best[name] = max(rates)
        assert best["on_outs"] == best["off_outs"], "speculation changed the output"
        print(f"  {label}, {len(cases)} prompts: decode {best['off']:.0f} tok/s without speculation, {best['on']:.0f} with "
              f"-> {best['on'] / best['off']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
