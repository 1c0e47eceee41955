#!/usr/bin/env python3
"""What the int8 activation path costs in quality, against the exact f32 path, on a trained model.

On every held-out case of the default model's evaluation battery (tests/data/default_model_eval.json),
for each --precisions value (first is the reference):
  - greedy decoding (`sanctum generate`, 96 tokens): answers right (exact match, as evaluate.py scores
    them) and outputs token-identical to the reference's;
  - teacher-forced on the expected answers (`sanctum logits`): mean cross-entropy per answer token
    (prompt tokens carry no training signal for this model), the mean and largest per-token
    difference from the reference, and the mean KL(reference || this) over answer positions.

With --llama PYTHON (the bench venv's python, bench/peers/setup_venv.sh), llama.cpp on the same
weights too: an F32 GGUF of the dequantized weights (its exact path, the reference of its rows; it
matches sanctum's f32 logits to rounding) against Q8_0 and Q4_0 GGUFs of them, which llama.cpp runs
with 8-bit activation blocks (Q8_0 requantizes the weights finely; Q4_0 as users run such models).

Usage: .venv/bin/python bench/precision_quality.py [--model models/default/mlx-4bit] [--limit N]
           [--llama .venv-bench/bin/python] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
STOP_IDS = {0, 2}  # <|endoftext|>, <|im_end|>


def tokenize(binary: str, model: Path, texts: list[str]) -> list[list[int]]:
    r = subprocess.run([binary, "tokenize", "--tokenizer", str(model), "--jsonl", "--no-add-special"],
                       input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True, check=True)
    return [json.loads(line) for line in r.stdout.splitlines()]


def greedy(binary: str, model: Path, prompts: list[list[int]], precision: str, threads: int, max_new: int) -> list[list[int]]:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "prompts.txt"
        f.write_text("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
        r = subprocess.run([binary, "generate", "--model", str(model), "--prompts-file", str(f), "--max-tokens", str(max_new),
                            "--temperature", "0", "--matmul-precision", precision, "--threads", str(threads)],
                           capture_output=True, text=True, check=True)
    outs = []
    for line in r.stdout.strip().split("\n"):
        ids = [int(t) for t in line.split(",")] if line else []
        cut = next((k for k, t in enumerate(ids) if t in STOP_IDS), len(ids))
        outs.append(ids[:cut])
    return outs


def log_probs(binary: str, model: Path, ids: list[int], precision: str, threads: int) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "logits.npy"
        subprocess.run([binary, "logits", "--model", str(model), "--prompt-ids", ",".join(map(str, ids)), "--out", str(out),
                        "--matmul-precision", precision, "--threads", str(threads)], check=True, capture_output=True)
        x = np.load(out).astype(np.float64)
    x -= x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def llama_runs(python: str, model: Path, prompts, answers, threads: int, max_new: int) -> OrderedDict:
    """llama.cpp's greedy outputs and answer log-probs per GGUF (F32 first: the reference)."""
    peers = Path(__file__).resolve().parent / "peers"
    runs = OrderedDict()
    with tempfile.TemporaryDirectory() as tmp:
        files = OrderedDict()
        for label, flag in (("llama.cpp F32", ["--float", "f32"]), ("llama.cpp Q8_0", ["--block", "q8_0"]),
                            ("llama.cpp Q4_0", ["--block", "q4_0"])):
            files[label] = str(Path(tmp) / (label.split()[-1] + ".gguf"))
            subprocess.run([python, str(peers / "mlx_to_gguf.py"), str(model), files[label], *flag], check=True, capture_output=True)
        req = {"ggufs": list(files.values()), "threads": threads, "max_new": max_new, "stop_ids": sorted(STOP_IDS),
               "cases": [{"prompt": p, "answer": a} for p, a in zip(prompts, answers)]}
        r = subprocess.run([python, str(peers / "llama_quality.py")], input=json.dumps(req), capture_output=True, text=True,
                           check=True)
    for label, res in zip(files, json.loads(r.stdout)):
        runs[label] = res
    return runs


def answer_of(text: str, thinking) -> str:
    if thinking is True or "</think>" in text:
        text = text.split("</think>")[-1]
    return text.strip()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", type=Path, default=ROOT / "models" / "default" / "mlx-4bit")
    ap.add_argument("--battery", type=Path, default=ROOT / "tests" / "data" / "default_model_eval.json")
    ap.add_argument("--precisions", nargs="+", default=["f32", "int8"])
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--limit", type=int, default=0, help="only the first N cases (0: all)")
    ap.add_argument("--llama", help="python of the bench venv: measure llama.cpp on the same weights too")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    from tokenizers import Tokenizer

    battery = json.loads(a.battery.read_text())
    cases = battery["cases"][:a.limit or None]
    tok = Tokenizer.from_file(str(a.model / "tokenizer.json"))
    prompts = tokenize(a.sanctum, a.model, [c["prompt"] for c in cases])
    answers = tokenize(a.sanctum, a.model, [c["expected"] + "<|im_end|>" for c in cases])
    t0 = time.time()

    runs = OrderedDict()
    for p in a.precisions:
        outs = greedy(a.sanctum, a.model, prompts, p, a.threads, battery["max_new_tokens"])
        lps = [log_probs(a.sanctum, a.model, pr + an, p, a.threads) for pr, an in zip(prompts, answers)]
        runs[p] = {"outputs": outs, "log_probs": lps}
        print(f"{p}: done at {time.time() - t0:.0f}s", file=sys.stderr, flush=True)

    # Each run as (greedy outputs, answer log-probs per case, KL to its reference per case).
    ref_name = a.precisions[0]
    ref = runs[ref_name]
    table = OrderedDict()
    for name, run in runs.items():
        ce, kl = [], []
        for pr, an, lp, rlp in zip(prompts, answers, run["log_probs"], ref["log_probs"]):
            pos = np.arange(len(pr) - 1, len(pr) + len(an) - 1)  # rows that predict the answer tokens
            ce.append(lp[pos, np.asarray(an)].tolist())
            kl.append((np.exp(rlp[pos]) * (rlp[pos] - lp[pos])).sum(-1).tolist())
        table[name] = (run["outputs"], ce, kl, ref_name)
    if a.llama:
        for name, res in llama_runs(a.llama, a.model, prompts, answers, a.threads, battery["max_new_tokens"]).items():
            table[name] = (res["greedy"], res["answer_log_probs"], res["kl"], "llama.cpp F32")

    rows = []
    for name, (outs, lps, kls, against) in table.items():
        right = [answer_of(tok.decode(o, skip_special_tokens=False), c["enable_thinking"]) == c["expected"]
                 for o, c in zip(outs, cases)]
        ref_outs, ref_lps = table[against][0], table[against][1]
        ce = -np.concatenate([np.asarray(x) for x in lps])
        dce = ce + np.concatenate([np.asarray(x) for x in ref_lps])
        rows.append({
            "run": name, "reference": against, "cases": len(cases), "answers_right": int(sum(right)),
            "identical_to_reference": int(sum(o == r for o, r in zip(outs, ref_outs))),
            "answer_tokens": int(ce.size), "mean_ce": float(ce.mean()), "mean_abs_ce_delta": float(np.abs(dce).mean()),
            "max_abs_ce_delta": float(np.abs(dce).max()), "mean_kl": float(np.mean(np.concatenate([np.asarray(x) for x in kls]))),
        })
    print(f"model {a.model}, {len(cases)} held-out cases, {a.threads} threads; each row against its reference")
    print(f"{'run':16}{'reference':>16}{'answers right':>15}{'greedy = ref':>14}{'CE/token':>10}{'mean |dCE|':>12}"
          f"{'max |dCE|':>11}{'mean KL':>11}")
    for r in rows:
        print(f"{r['run']:16}{r['reference']:>16}{r['answers_right']:>9}/{r['cases']:<5}{r['identical_to_reference']:>8}/"
              f"{r['cases']:<5}{r['mean_ce']:10.4f}{r['mean_abs_ce_delta']:12.5f}{r['max_abs_ce_delta']:11.4f}{r['mean_kl']:11.2e}")
    if a.json:
        a.json.write_text(json.dumps({"model": str(a.model), "rows": rows}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
