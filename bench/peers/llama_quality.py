#!/usr/bin/env python3
"""llama.cpp's side of bench/precision_quality.py: for each GGUF, greedy answers to the prompts and
the teacher-forced log-probabilities of the expected answers, plus KL(reference || this) per answer
position against the first GGUF (the reference, normally the F32 file of the same weights).

Input (stdin, JSON): {"ggufs": [path, ...], "threads": N, "max_new": N, "stop_ids": [...],
"cases": [{"prompt": [ids], "answer": [ids]}, ...]}. Output (stdout, JSON): one entry per GGUF with
"greedy" (ids per case, stop token excluded), "answer_log_probs" (per case) and "kl" (per case, per
answer position; zeros for the reference).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import llama_peer  # noqa: E402


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def greedy(peer, prompt: list[int], max_new: int, stop: set[int]) -> list[int]:
    peer.clear()
    peer.feed(prompt)
    out = []
    for _ in range(max_new):
        t = int(np.argmax(peer.logits_row(-1)))
        if t in stop:
            break
        out.append(t)
        peer.feed([t], start=len(prompt) + len(out) - 1)
    return out


def main() -> int:
    req = json.loads(sys.stdin.read())
    stop = set(req["stop_ids"])
    longest = max(len(c["prompt"]) + max(len(c["answer"]), req["max_new"]) for c in req["cases"]) + 8
    ref_rows = []
    results = []
    for k, path in enumerate(req["ggufs"]):
        peer = llama_peer.LlamaPeer(path, req["threads"], n_ctx=longest, n_batch=longest)
        try:
            g, lps, kls = [], [], []
            for i, c in enumerate(req["cases"]):
                g.append(greedy(peer, c["prompt"], req["max_new"], stop))
                ids = c["prompt"] + c["answer"]
                rows = log_softmax(peer.all_logits(ids)[len(c["prompt"]) - 1:len(ids) - 1])
                lps.append(rows[np.arange(len(c["answer"])), c["answer"]].tolist())
                if k == 0:
                    ref_rows.append(rows)
                kls.append((np.exp(ref_rows[i]) * (ref_rows[i] - rows)).sum(-1).tolist())
            results.append({"gguf": path, "greedy": g, "answer_log_probs": lps, "kl": kls})
        finally:
            peer.close()
    json.dump(results, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
