"""qwen2 and mistral parity with mlx-lm (the independent reference), bf16 and 4/8-bit.

Each case builds a tiny random model with mlx-lm in the test run, saves it as an mlx-community
checkpoint, and compares sanctum with mlx-lm evaluated in float32 (parity_common.py):
- logits at every position of prompts of 1, 7 and 64 tokens: same argmax, max |Δlogit| reported and
  bounded (2e-3 of the logit scale);
- a 32-token greedy generation: identical tokens.
"""
import numpy as np
import pytest

import tiny_models
from parity_common import CheckpointCache, check_greedy, check_logits, prompt_of, sanctum_logits

CASES = {
    "qwen2-tied-gqa1-hd64": ("qwen2", {"hidden_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2}),
    "qwen2-untied-gqa4-hd128-yarn": ("qwen2", {
        "hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 1, "intermediate_size": 384,
        "tie_word_embeddings": False,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024},
    }),
    "mistral-untied-gqa4-hd64": ("mistral", {"num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 64}),
    "mistral-tied-gqa1-hd128": ("mistral", {
        "hidden_size": 256, "num_attention_heads": 2, "num_key_value_heads": 2, "head_dim": 128,
        "tie_word_embeddings": True,
    }),
}
# Every config in bf16 / 4-bit g64 / 8-bit g64; the other group sizes on two configs.
EXTRA_FORMATS = {"q4g32": "qwen2-tied-gqa1-hd64", "q8g128": "mistral-untied-gqa4-hd64"}


def case_params():
    for name in CASES:
        for fmt in ("bf16", "q4g64", "q8g64"):
            yield pytest.param(name, fmt, id=f"{name}-{fmt}")
    for fmt, name in EXTRA_FORMATS.items():
        yield pytest.param(name, fmt, id=f"{name}-{fmt}")


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return CheckpointCache(CASES, tiny_models.BASE_CONFIGS, tmp_path_factory)


@pytest.mark.parametrize("name,fmt", list(case_params()))
def test_logits_match_mlx_lm(sanctum_bin, checkpoints, tmp_path, name, fmt):
    model_dir, ref_model, cfg = checkpoints.get(name, fmt)
    check_logits(sanctum_bin, model_dir, ref_model, cfg, tmp_path, f"{name}/{fmt}")


@pytest.mark.parametrize("name,fmt", list(case_params()))
def test_greedy_generation_matches_mlx_lm(sanctum_bin, checkpoints, name, fmt):
    model_dir, ref_model, cfg = checkpoints.get(name, fmt)
    check_greedy(sanctum_bin, model_dir, ref_model, cfg)


@pytest.mark.parametrize("split", [1, 5, 63])
def test_prefill_then_decode_equals_full_prefill(sanctum_bin, checkpoints, tmp_path, split):
    model_dir, _, cfg = checkpoints.get("mistral-untied-gqa4-hd64", "q4g64")
    prompt = prompt_of(64, cfg["vocab_size"], seed=5)
    full = sanctum_logits(sanctum_bin, model_dir, prompt, tmp_path / "full.npy")
    stepped = sanctum_logits(sanctum_bin, model_dir, prompt, tmp_path / "split.npy", split=split)
    # Bitwise: per-row reductions do not depend on how many rows a forward carries.
    assert np.array_equal(full, stepped)
