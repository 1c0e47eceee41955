"""Tiny random models built and evaluated with mlx-lm: the independent reference for parity tests.

Models are created with mlx-lm's own classes, saved exactly as mlx-community checkpoints
(`mlx_lm.utils.save_model` / `save_config`, optionally quantized with `quantize_model`), and
evaluated with mlx-lm in float32 so the reference carries no bf16 rounding of activations.
"""
from __future__ import annotations

import copy
import json
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.models.cache import make_prompt_cache
from mlx_lm.utils import _get_classes, load_model, quantize_model, save_config, save_model

BASE_CONFIGS = {
    "qwen2": {
        "model_type": "qwen2",
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "intermediate_size": 256,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
        "rms_norm_eps": 1e-6,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": True,
    },
    "mistral": {
        "model_type": "mistral",
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "intermediate_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 64,
        "rms_norm_eps": 1e-5,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
    },
    "qwen3_5": {
        "model_type": "qwen3_5",
        "hidden_size": 128,
        "num_hidden_layers": 4,
        "full_attention_interval": 2,
        "intermediate_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "linear_conv_kernel_dim": 4,
        "rms_norm_eps": 1e-6,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "rope_parameters": {"type": "default", "rope_theta": 100000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [2, 3, 3], "mrope_interleaved": True},
    },
    "qwen3_5_moe": {
        "model_type": "qwen3_5_moe",
        "hidden_size": 128,
        "num_hidden_layers": 4,
        "full_attention_interval": 2,
        "intermediate_size": 256,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 64,
        "linear_num_key_heads": 2,
        "linear_num_value_heads": 4,
        "linear_key_head_dim": 32,
        "linear_value_head_dim": 32,
        "linear_conv_kernel_dim": 4,
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 128,
        "decoder_sparse_step": 1,
        "norm_topk_prob": True,
        "rms_norm_eps": 1e-6,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "tie_word_embeddings": False,
        "rope_parameters": {"type": "default", "rope_theta": 100000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [2, 3, 3]},
    },
    "mixtral": {
        "model_type": "mixtral",
        "hidden_size": 128,
        "num_hidden_layers": 2,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "num_local_experts": 4,
        "num_experts_per_tok": 2,
        "rms_norm_eps": 1e-5,
        "vocab_size": 512,
        "max_position_embeddings": 4096,
        "rope_theta": 1000000.0,
        "tie_word_embeddings": False,
    },
}


def nest_as_vl(config: dict) -> dict:
    """The same text model declared the way VL checkpoints do: text fields under text_config."""
    return {"model_type": config["model_type"], "text_config": dict(config),
            "vision_config": {"depth": 2, "hidden_size": 64}, "tie_word_embeddings": config["tie_word_embeddings"]}


def make_model(config: dict, seed: int = 0):
    """Instantiates the mlx-lm model for `config` with random weights (bf16, like real checkpoints).

    Norm weights and biases are randomised too, so a wrong convention cannot hide behind ones/zeros.
    """
    mx.random.seed(seed)
    model_class, args_class = _get_classes(config)
    model = model_class(args_class.from_dict(config))
    params = tree_flatten(model.parameters())
    rng = np.random.default_rng(seed)
    new = []
    for name, p in params:
        if name.endswith("norm.weight") or ("layernorm" in name and name.endswith("weight")):
            v = rng.uniform(0.5, 1.5, size=p.shape)
        elif name.endswith("bias"):
            v = rng.normal(0.0, 0.5, size=p.shape)
        elif "embed" in name:
            v = rng.normal(0.0, 1.0, size=p.shape)
        else:
            fan_in = p.shape[-1]
            v = rng.normal(0.0, 1.0 / np.sqrt(fan_in), size=p.shape)
        new.append((name, mx.array(v.astype(np.float32))))
    model.update(tree_unflatten(new))
    model.set_dtype(mx.bfloat16)
    mx.eval(model.parameters())
    return model


def save_checkpoint(model, config: dict, out_dir: str | Path, bits: int = 0, group_size: int = 64) -> Path:
    """Saves as an mlx-community checkpoint (bf16, or MLX affine quantized when bits is 4 or 8)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    config = copy.deepcopy(config)
    if bits:
        model, config = quantize_model(model, config, group_size=group_size, bits=bits)
    save_model(out, model)
    save_config(config, config_path=out / "config.json")
    return out


def load(model_dir: str | Path):
    """Loads a checkpoint with mlx-lm and casts it to float32 for a precise reference."""
    model, _ = load_model(Path(model_dir))
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model


def reference_logits(model, prompt: list[int]) -> np.ndarray:
    """Logits (n, vocab) for every prompt position in one forward pass."""
    logits = model(mx.array([prompt]))
    return np.array(logits[0].astype(mx.float32))


def reference_greedy(model, prompt: list[int], max_tokens: int) -> list[int]:
    """Greedy tokens with mlx-lm's own KV cache: prefill, then one token at a time."""
    cache = make_prompt_cache(model)
    logits = model(mx.array([prompt]), cache=cache)
    out = []
    for _ in range(max_tokens):
        token = int(mx.argmax(logits[0, -1]).item())
        out.append(token)
        logits = model(mx.array([[token]]), cache=cache)
    return out


def write_config(path: Path, updates: dict) -> None:
    cfg = json.loads(path.read_text())
    cfg.update(updates)
    path.write_text(json.dumps(cfg, indent=4))
