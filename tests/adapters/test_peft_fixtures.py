"""PEFT adapters merged by sanctum at load against transformers + PEFT (the unmerged adapter).

The base checkpoints (Hugging Face format, f32), adapters and reference outputs under
tests/data/peft_adapters/ come from tools/peft_fixtures/make_peft_fixtures.py: qwen2 with rank_pattern
and alpha_pattern, mistral with use_rslora and a target_modules regex, mistral with
layers_to_transform, the qwen3_5 hybrid (GatedDeltaNet and gated-attention projections), and qwen2
with DoRA. f32 weights take the merge without rounding, so the logits must agree to 1e-3 of the
logit scale at every position and the greedy tokens exactly."""
import json
from pathlib import Path

import numpy as np
import pytest

from parity_common import DEVICE_ARGS, sanctum_logits

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "peft_adapters"
CASES = sorted(p.name for p in FIXTURES.iterdir() if (p / "expected.json").exists())


def test_fixtures_exist():
    assert CASES == ["mistral_layers_to_transform", "mistral_rslora", "qwen2_dora", "qwen2_rank_pattern", "qwen3_5_text"]


@pytest.mark.parametrize("case", CASES)
def test_logits_match_transformers_with_peft(sanctum_bin, tmp_path, case):
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    for length, prompt in expected["prompts"].items():
        ref = np.load(d / f"logits_{length}.npy")
        ours = sanctum_logits(sanctum_bin, d / "base", prompt, tmp_path / "ours.npy", extra=["--adapter", str(d / "adapter")])
        plain = sanctum_logits(sanctum_bin, d / "base", prompt, tmp_path / "plain.npy")
        scale = max(1.0, float(np.max(np.abs(ref))))
        diff = float(np.max(np.abs(ours - ref)))
        print(f"{case} len {length}: max |dlogit| {diff:.3g} (scale {scale:.3g}, adapter effect {np.max(np.abs(plain - ref)):.3g})")
        assert float(np.max(np.abs(plain - ref))) > 0.05 * scale, "the adapter is a no-op: the check would show nothing"
        assert diff <= 1e-3 * scale, f"{case} len {length}: max |dlogit| {diff:.3g}"
        assert np.array_equal(ours.argmax(-1), ref.argmax(-1))


@pytest.mark.parametrize("case", CASES)
def test_greedy_matches_transformers_with_peft(sanctum_bin, case):
    import subprocess
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    prompt, tokens = expected["prompts"]["7"], expected["greedy"]["7"]
    r = subprocess.run([sanctum_bin, "generate", "--model", str(d / "base"), "--adapter", str(d / "adapter"), "--prompt-ids",
                        ",".join(map(str, prompt)), "--max-tokens", str(len(tokens)), "--temperature", "0", "--ignore-eos", *DEVICE_ARGS],
                       check=True, capture_output=True, text=True, timeout=120)
    assert [int(t) for t in r.stdout.strip().split(",")] == tokens
