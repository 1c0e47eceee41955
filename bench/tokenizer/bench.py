"""Encode throughput on ~1 MB of mixed text: sanctum vs HF `tokenizers`, both single-threaded, same
machine, same text, same tokenizer files. Prints MB/s for each and the ratio (sanctum / HF); checks that
both produce the same ids.

    SANCTUM_BIN=build/sanctum .venv/bin/python bench/tokenizer/bench.py [--repeats 5] [--names qwen3 ...]
"""
import argparse
import gzip
import json
import os
import pathlib
import random
import subprocess
import sys
import time

os.environ["RAYON_NUM_THREADS"] = "1"  # before tokenizers is imported
os.environ["TOKENIZERS_PARALLELISM"] = "false"

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "tokenizer"))
import corpus  # noqa: E402

DATA = ROOT / "tests" / "data" / "tokenizers"


def mixed_text(size=1 << 20, seed=3):
    rng = random.Random(seed)
    pools = [corpus.PROSE * 6, corpus.CODE * 3, corpus.NUMBERS, corpus.CONTRACTIONS, corpus.CJK, corpus.EMOJI,
             corpus.COMBINING, corpus.RTL, corpus.WHITESPACE]
    parts, n = [], 0
    while n < size:
        s = rng.choice(rng.choice(pools)) + rng.choice([" ", "\n", " ", ". ", "\n\n"])
        parts.append(s)
        n += len(s.encode())
    return "".join(parts).encode()[:size].decode(errors="ignore")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--names", nargs="*", default=["qwen3", "llama3_1", "deepseek_v3", "gemma3", "tekken_nemo_converted"])
    args = ap.parse_args()
    from tokenizers import Tokenizer

    binary = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    text = mixed_text()
    nbytes = len(text.encode())
    print(f"text: {nbytes} bytes of mixed prose/code/CJK/emoji/numbers; best of {args.repeats}; single thread")
    print(f"{'tokenizer':24} {'tokens':>8} {'sanctum MB/s':>13} {'HF MB/s':>9} {'ratio':>6}  ids")
    for name in args.names:
        with gzip.open(DATA / name / "tokenizer.json.gz", "rt", encoding="utf-8") as f:
            hf = Tokenizer.from_str(f.read())
        best = 1e30
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            ids = hf.encode(text, add_special_tokens=False).ids
            best = min(best, time.perf_counter() - t0)
        p = subprocess.run([binary, "tokenize", "--tokenizer", str(DATA / name), "--no-add-special", "--bench",
                            str(args.repeats)], input=text.encode(), capture_output=True, check=True)
        ours = json.loads(p.stdout)
        q = subprocess.run([binary, "tokenize", "--tokenizer", str(DATA / name), "--no-add-special"],
                           input=text.encode(), capture_output=True, check=True)
        same = [int(x) for x in q.stdout.decode().strip().split(",") if x] == ids
        ours_mbs, hf_mbs = nbytes / ours["seconds"] / 1e6, nbytes / best / 1e6
        print(f"{name:24} {len(ids):8d} {ours_mbs:13.2f} {hf_mbs:9.2f} {ours_mbs / hf_mbs:6.2f}  {'same' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
