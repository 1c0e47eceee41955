"""The embedded default model (models/default): sanctum's greedy answers against the reference
outputs recorded with transformers (hf-bf16, computed in f32) and mlx-lm (mlx-4bit) on every case of
the evaluation battery (tests/data/default_model_eval.json), plus the canary."""
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
MODELS = ROOT / "models" / "default"
EVAL = json.loads((ROOT / "tests" / "data" / "default_model_eval.json").read_text())
REFERENCE = [json.loads(line) for line in (MODELS / "reference_outputs.jsonl").read_text().splitlines()[1:]]
STOP_IDS = {0, 2}  # <|endoftext|>, <|im_end|>


def tokenize(sanctum_bin, texts):
    r = subprocess.run([sanctum_bin, "tokenize", "--tokenizer", str(MODELS / "hf-bf16"), "--jsonl", "--no-add-special"],
                       input="".join(json.dumps(t) + "\n" for t in texts), capture_output=True, text=True, check=True, timeout=120)
    return [json.loads(line) for line in r.stdout.splitlines()]


def greedy(sanctum_bin, model_dir, prompts, tmp_path):
    f = tmp_path / "prompts.txt"
    f.write_text("\n".join(",".join(map(str, p)) for p in prompts) + "\n")
    r = subprocess.run([sanctum_bin, "generate", "--model", str(model_dir), "--prompts-file", str(f), "--max-tokens",
                        str(EVAL["max_new_tokens"]), "--temperature", "0"], capture_output=True, text=True, check=True,
                       timeout=900)
    outs = []
    for line in r.stdout.strip().split("\n"):
        ids = [int(t) for t in line.split(",")]
        outs.append(ids[:-1] if ids and ids[-1] in STOP_IDS else ids)
    return outs


@pytest.fixture(scope="module")
def cases(sanctum_bin):
    by_id = {r["id"]: r for r in REFERENCE}
    selected = [c for c in EVAL["cases"] if c["id"] in by_id]
    prompts = tokenize(sanctum_bin, [c["prompt"] for c in selected])
    return selected, prompts, by_id


NEAR_TIE = 0.02  # logit gap below which two f32 implementations may legitimately pick differently


def divergence_gap(sanctum_bin, model_dir, prompt, ours, ref, tmp_path):
    """|logit(our token) - logit(reference token)| at the first position where the answers differ."""
    k = next(i for i in range(min(len(ours), len(ref)) + 1) if i == len(ours) or i == len(ref) or ours[i] != ref[i])
    if k >= len(ours) or k >= len(ref):
        return float("inf")  # one answer stopped where the other went on
    ids = prompt + ours[:k]
    out = tmp_path / "gap.npy"
    subprocess.run([sanctum_bin, "logits", "--model", str(model_dir), "--prompt-ids", ",".join(map(str, ids)), "--out", str(out)],
                   check=True, capture_output=True, timeout=60)
    row = np.load(out)[-1]
    return abs(float(row[ours[k]] - row[ref[k]]))


def test_greedy_answers_match_transformers(sanctum_bin, cases, tmp_path):
    # transformers computed in f32 like sanctum: every answer is identical, except where the two
    # candidates at the first difference are a near-tie (reduction order decides), and those are rare.
    selected, prompts, by_id = cases
    model_dir = MODELS / "hf-bf16"
    outs = greedy(sanctum_bin, model_dir, prompts, tmp_path)
    differing = [(p, o, by_id[c["id"]]["transformers_ids"]) for c, p, o in zip(selected, prompts, outs)
                 if o != by_id[c["id"]]["transformers_ids"]]
    gaps = [divergence_gap(sanctum_bin, model_dir, p, o, r, tmp_path) for p, o, r in differing]
    print(f"hf-bf16: {len(selected) - len(differing)}/{len(selected)} identical to transformers; "
          f"divergence gaps {[round(g, 4) for g in gaps]}")
    assert all(g < NEAR_TIE for g in gaps)
    assert len(differing) <= len(selected) // 100


def test_greedy_answers_match_mlx_lm(sanctum_bin, cases, tmp_path):
    # mlx-lm computes in bf16, so long answers drift after rounding differences (its references
    # differ from transformers' on 57 of 832 prompts): require the same answer on 90%.
    selected, prompts, by_id = cases
    outs = greedy(sanctum_bin, MODELS / "mlx-4bit", prompts, tmp_path)
    same = sum(out == by_id[c["id"]]["mlx_ids"] for c, out in zip(selected, outs))
    print(f"mlx-4bit: {same}/{len(selected)} identical to mlx-lm")
    assert same >= 0.9 * len(selected)


def test_canary_answers_4(sanctum_bin):
    r = subprocess.run([sanctum_bin, "generate", "--chat", "What is 2+2? Respond with only the number.", "--max-tokens", "8"],
                       capture_output=True, text=True, check=True, timeout=60)
    assert "4" in r.stdout
