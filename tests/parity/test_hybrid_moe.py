"""qwen3_5 (dense hybrid, text and VL-nested configs), qwen3_5_moe and mixtral parity with mlx-lm,
bf16 and 4-bit g64: same argmax at every position, identical 32-token greedy generations, max
|Δlogit| reported (parity_common.py). Plus the hybrid-state invariants: prefill of k tokens
followed by decode steps equals a full prefill."""
import numpy as np
import pytest

import tiny_models
from parity_common import CheckpointCache, check_greedy, check_logits, prompt_of, sanctum_logits, vocab_of

CASES = {
    "qwen3_5-text": ("qwen3_5", {}),
    "qwen3_5-vl-nested-tied": ("qwen3_5", {"nest_as_vl": True, "tie_word_embeddings": True}),
    "qwen3_5-gqa3": ("qwen3_5", {"linear_num_key_heads": 1, "linear_num_value_heads": 3, "linear_key_head_dim": 48,
                                 "full_attention_interval": 4, "num_hidden_layers": 4}),
    "qwen3_5_moe": ("qwen3_5_moe", {}),
    "mixtral": ("mixtral", {}),
}


def case_params():
    for name in CASES:
        for fmt in ("bf16", "q4g64"):
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


@pytest.mark.parametrize("length,split", [(6, 5), (40, 1), (70, 17), (130, 64)])
def test_hybrid_prefill_then_decode_equals_full_prefill(sanctum_bin, checkpoints, tmp_path, length, split):
    model_dir, _, cfg = checkpoints.get("qwen3_5-text", "bf16")
    prompt = prompt_of(length, vocab_of(cfg), seed=length)
    full = sanctum_logits(sanctum_bin, model_dir, prompt, tmp_path / "full.npy")
    stepped = sanctum_logits(sanctum_bin, model_dir, prompt, tmp_path / "split.npy", split=split)
    # Chunked and sequential GatedDeltaNet forms round differently: equal within 1e-3.
    assert float(np.max(np.abs(full - stepped))) < 1e-3


@pytest.mark.parametrize("length,split,step", [(130, 10, 64), (200, 65, 70)])
def test_hybrid_prefill_then_chunked_prefill_equals_full_prefill(sanctum_bin, checkpoints, tmp_path, length, split, step):
    model_dir, _, cfg = checkpoints.get("qwen3_5_moe", "q4g64")
    prompt = prompt_of(length, vocab_of(cfg), seed=length + 1)
    full = sanctum_logits(sanctum_bin, model_dir, prompt, tmp_path / "full.npy")
    chunked = sanctum_logits(sanctum_bin, model_dir, prompt, tmp_path / "chunked.npy", split=split, extra=["--step", str(step)])
    assert float(np.max(np.abs(full - chunked))) < 1e-3
