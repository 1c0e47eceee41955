"""Parity with transformers on Hugging Face-format qwen3_5 / qwen3_5_moe checkpoints.

The checkpoints and reference outputs under tests/data/hf_fixtures/ come from
tools/hf_fixtures/make_hf_fixtures.py (transformers' own classes, bf16 weights, evaluated in f32).
They exercise the Hugging Face flavour: `model.` names, conv1d as (C, 1, K), RMSNorm stored as
w - 1, per-expert MoE tensors.
"""
import json
from pathlib import Path

import numpy as np
import pytest

from parity_common import TIE_GAP, sanctum_greedy, sanctum_logits

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "hf_fixtures"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "expected.json").exists())


def test_fixtures_exist():
    assert CASES == ["qwen3_5_moe_text", "qwen3_5_text"]


@pytest.mark.parametrize("case", CASES)
def test_logits_match_transformers(sanctum_bin, tmp_path, case):
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    worst = 0.0
    for length, prompt in expected["prompts"].items():
        ref = np.load(d / f"logits_{length}.npy")
        ours = sanctum_logits(sanctum_bin, d, prompt, tmp_path / f"{length}.npy")
        diff = float(np.max(np.abs(ours - ref)))
        worst = max(worst, diff)
        assert diff <= 2e-3 * max(1.0, float(np.max(np.abs(ref)))), f"{case} len {length}: max |dlogit| {diff:.3g}"
        top2 = np.sort(ref, axis=-1)[:, -2:]
        for pos in range(len(prompt)):
            if top2[pos, 1] - top2[pos, 0] >= TIE_GAP:
                assert int(np.argmax(ours[pos])) == int(np.argmax(ref[pos])), f"{case} len {length} pos {pos}"
    print(f"{case}: max |dlogit| vs transformers = {worst:.3g}")


@pytest.mark.parametrize("case", CASES)
def test_greedy_matches_transformers(sanctum_bin, case):
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    prompt = expected["prompts"]["7"]
    want = expected["greedy"]["7"]
    assert sanctum_greedy(sanctum_bin, d, prompt, len(want)) == want
