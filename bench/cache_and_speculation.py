#!/usr/bin/env python3
"""Prompt-cache and prompt-lookup speculation speed, side by side in one run with the same binary:

1. Multi-turn chat on the embedded default model (qwen3_5 hybrid): 8 turns over a ~2,000-token
   context (each turn = previous prompt + the model's reply + a new message); time to first token
   of turns 2-8 with --prompt-cache-mb vs without.
2. Decode speed with and without speculation on the embedded model: copy-heavy prompts (the
   evaluation battery's repeat and copy/extract tasks) and ordinary prompts (arithmetic, capitals,
   counting). This 5 M-parameter model is compute-bound: verifying k drafts costs nearly k steps.
3. The same on the memory-bound shapes that bench/cpu_vs_mlx.py builds under bench/out/ (random
   4-bit Qwen2.5-0.5B-shaped qwen2 and Qwen3.5-0.8B-shaped qwen3_5 hybrid), where a verifying
   forward reads the weights once. Random weights cannot copy a prompt; greedy decoding falls into a
   loop within a few tokens instead, and the loop is what prompt lookup drafts from (copy-heavy).
   Sampling uniformly among the top 4 tokens (temperature 1000, top-k 4) gives text whose recent
   n-grams often occur earlier, so drafts are proposed, but whose continuation never follows them:
   nearly every draft is rejected, the case where speculation must back off (ordinary).

Usage: .venv/bin/python bench/cache_and_speculation.py [--threads 1] [--sanctum build/sanctum] [--skip-embedded]
       [--multi-turn-only] [--answer-tokens 16] [--ignore-eos]

--answer-tokens sets the length of each turn's answer (at most; exactly with --ignore-eos). On a hybrid
model the next turn continues from the end-of-generation snapshot, which `sanctum generate` builds
after each output, between turns, as a server does while idle: it is not part of any turn's TTFT and
is reported on its own.
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
MEMORY_BOUND = [ROOT / "bench" / "out" / name for name in ("qwen2-0.5b-q4g64", "qwen3_5-0.8b-q4g64")]
LINE = re.compile(r"prompt (\d+) tokens \((\d+) from cache\) in ([\d.]+) s .*?; (\d+) generated, decode ([\d.]+) tok/s; "
                  r"drafted (\d+), accepted (\d+)")


def run(binary, prompts, flags, threads, max_tokens, model=MODEL):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
    r = subprocess.run([binary, "generate", "--model", str(model), "--prompts-file", f.name, "--max-tokens", str(max_tokens),
                        "--threads", str(threads), "--timing", *flags], capture_output=True, text=True, check=True)
    stats = [tuple(float(x) for x in m.groups()) for m in LINE.finditer(r.stderr)]
    run.last_tails = [(int(m.group(1)), int(m.group(2)), float(m.group(3))) for m in TAIL.finditer(r.stderr)]
    outs = [[int(t) for t in line.split(",")] for line in r.stdout.strip().split("\n")]
    return outs, stats


def tokenize(binary, texts):
    r = subprocess.run([binary, "tokenize", "--tokenizer", str(MODEL), "--jsonl", "--no-add-special"],
                       input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines()]


TAIL = re.compile(r"end-of-generation snapshot at (\d+) tokens \(prefill from (\d+)\) in ([\d.]+) s")


def conversation(binary, threads, answer_tokens, flags):
    rng = np.random.default_rng(0)
    turns = [rng.integers(5, 4096, size=2000).tolist()]
    for _ in range(7):
        (reply,), _ = run(binary, [turns[-1]], ["--no-pld", *flags], threads, answer_tokens)
        turns.append(turns[-1] + reply + rng.integers(5, 4096, size=40).tolist())
    return turns


def decode_rate(stats):
    tokens = sum(s[3] - 1 for s in stats)
    seconds = sum((s[3] - 1) / s[4] for s in stats if s[4] > 0)
    return tokens / seconds if seconds else 0.0


def speculation_speed(binary, model, prompts, flags, threads, max_tokens, reps, same_output):
    """Best-of-reps decode tok/s without and with speculation, and the draft acceptance rate."""
    best = {}
    for name, extra in (("off", ["--no-pld"]), ("on", [])):
        rates = []
        for _ in range(reps):
            outs, stats = run(binary, prompts, [*flags, *extra], threads, max_tokens, model)
            rates.append(decode_rate(stats))
            best[name + "_outs"] = outs
            best[name + "_drafted"] = sum(int(s[5]) for s in stats)
            best[name + "_accepted"] = sum(int(s[6]) for s in stats)
        best[name] = max(rates)
    if same_output:
        assert best["on_outs"] == best["off_outs"], "speculation changed the output"
    return best


def memory_bound(binary, threads, reps):
    rng = np.random.default_rng(3)
    for model in MEMORY_BOUND:
        if not (model / "config.json").exists():
            print(f"{model.name}: not built (run bench/cpu_vs_mlx.py --shape {model.name.rsplit('-', 1)[0]} once)")
            continue
        vocab = json.loads((model / "config.json").read_text())["vocab_size"]
        prompts = [rng.integers(100, vocab, size=40).tolist() for _ in range(4)]
        print(f"{model.name}, 4 prompts of 40 random tokens, 128 new tokens ({threads} thread(s)):")
        for label, flags, same in (("copy-heavy (greedy: the output loops)", [], True),
                                   ("ordinary (uniform over the top 4 tokens: lookups match, drafts are rejected)",
                                    ["--temperature", "1000", "--top-k", "4", "--seed", "5"], False)):
            b = speculation_speed(binary, model, prompts, flags, threads, 128, reps, same)
            rate = b["on_accepted"] / b["on_drafted"] if b["on_drafted"] else 0.0
            print(f"  {label}: decode {b['off']:.1f} tok/s without speculation, {b['on']:.1f} with -> {b['on'] / b['off']:.2f}x "
                  f"({b['on_accepted']} of {b['on_drafted']} drafts accepted, {rate:.0%})")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3, help="runs per configuration; the best one counts")
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--skip-embedded", action="store_true", help="only the memory-bound shapes")
    ap.add_argument("--multi-turn-only", action="store_true", help="only the multi-turn chat on the embedded model")
    ap.add_argument("--answer-tokens", type=int, default=16, help="max tokens of each multi-turn answer")
    ap.add_argument("--ignore-eos", action="store_true", help="multi-turn answers are exactly --answer-tokens long")
    a = ap.parse_args()

    if a.multi_turn_only:
        multi_turn(a)
        return 0
    if not a.skip_embedded:
        embedded(a)
    memory_bound(a.sanctum, a.threads, a.reps)
    return 0


def multi_turn(a):
    flags = ["--ignore-eos"] if a.ignore_eos else []
    turns = conversation(a.sanctum, a.threads, a.answer_tokens, flags)
    out_off, off = run(a.sanctum, turns, ["--no-pld", *flags], a.threads, a.answer_tokens)
    out_on, on = run(a.sanctum, turns, ["--no-pld", "--prompt-cache-mb", "256", *flags], a.threads, a.answer_tokens)
    assert out_on == out_off, "cache changed the output"
    ttft_off = [s[2] for s in off[1:]]
    ttft_on = [s[2] for s in on[1:]]
    answers = [len(o) for o in out_off]
    print(f"multi-turn, 8 turns from {len(turns[0])} to {len(turns[-1])} prompt tokens, answers of {min(answers)}-{max(answers)} "
          f"tokens ({a.threads} threads):")
    print(f"  TTFT turns 2-8: no cache {np.mean(ttft_off) * 1e3:.1f} ms, cache {np.mean(ttft_on) * 1e3:.1f} ms -> "
          f"{np.mean(ttft_off) / np.mean(ttft_on):.1f}x lower; {sum(int(s[1]) for s in on)} prompt tokens served from the cache")
    print("  per turn (prompt tokens, from cache, TTFT ms off, TTFT ms on): " +
          ", ".join(f"({int(b[0])}, {int(b[1])}, {x * 1e3:.1f}, {y * 1e3:.1f})" for b, x, y in zip(on[1:], ttft_off, ttft_on)))
    if on_tails := getattr(run, "last_tails", None):
        print(f"  end-of-generation snapshots between turns: {len(on_tails)}, {sum(t[0] - t[1] for t in on_tails)} tokens "
              f"prefilled in {sum(t[2] for t in on_tails) * 1e3:.1f} ms in all (not part of any TTFT)")


def embedded(a):
    multi_turn(a)

    groups = {"copy-heavy (repeat, copy/extract)": ("repeat", "copy"),
              "ordinary (arithmetic, capitals, counting)": ("add", "sub", "mul", "capital", "count")}
    for label, prefixes in groups.items():
        cases = [c for c in EVAL["cases"] if c["task"].startswith(prefixes)]
        prompts = tokenize(a.sanctum, [c["prompt"] for c in cases])
        best = speculation_speed(a.sanctum, MODEL, prompts, [], a.threads, EVAL["max_new_tokens"], a.reps, True)
        print(f"  {label}, {len(cases)} prompts: decode {best['off']:.0f} tok/s without speculation, {best['on']:.0f} with "
              f"-> {best['on'] / best['off']:.2f}x ({best['on_accepted']} of {best['on_drafted']} drafts accepted)")


if __name__ == "__main__":
    sys.exit(main())
