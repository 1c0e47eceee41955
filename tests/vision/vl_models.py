"""Tiny random-weight Qwen3.5 vision-language checkpoints made with mlx-vlm (0.7.10), the independent
reference for the vision parity tests: built with mlx-vlm's own classes, saved as mlx-community
checkpoints (vision_tower.*, language_model.*; bf16 or MLX affine-quantized), and evaluated with
mlx-vlm in float32."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_vlm.models import qwen3_5, qwen3_5_moe
from mlx_vlm.utils import load_model, save_config, save_weights

import tiny_models

IMAGE_TOKEN, VIDEO_TOKEN, VISION_START, VISION_END = 500, 501, 498, 499

VISION_CONFIG = {
    "depth": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_heads": 4,
    "in_channels": 3,
    "patch_size": 4,
    "temporal_patch_size": 2,
    "spatial_merge_size": 2,
    "num_position_embeddings": 64,  # an 8 x 8 learned grid, resampled to every image's grid
    "hidden_act": "gelu_pytorch_tanh",
}


def vl_config(text_type: str) -> dict:
    text = copy.deepcopy(tiny_models.BASE_CONFIGS[text_type])
    text["rope_parameters"] = {"type": "default", "rope_theta": 100000.0, "partial_rotary_factor": 0.25,
                               "mrope_section": [2, 3, 3], "mrope_interleaved": True}
    vision = dict(VISION_CONFIG, model_type=text_type, out_hidden_size=text["hidden_size"])
    return {"model_type": text_type, "text_config": text, "vision_config": vision,
            "image_token_id": IMAGE_TOKEN, "video_token_id": VIDEO_TOKEN,
            "vision_start_token_id": VISION_START, "vision_end_token_id": VISION_END,
            "vocab_size": text["vocab_size"], "tie_word_embeddings": False}


def make_model(config: dict, seed: int):
    """mlx-vlm's model for `config` with random bf16 weights; norms and biases random too."""
    module = qwen3_5_moe if config["model_type"] == "qwen3_5_moe" else qwen3_5
    model = module.Model(module.ModelConfig.from_dict(copy.deepcopy(config)))
    rng = np.random.default_rng(seed)
    new = []
    for name, p in tree_flatten(model.parameters()):
        if name.endswith("norm.weight") or name.endswith("norm1.weight") or name.endswith("norm2.weight") or "layernorm" in name:
            v = rng.uniform(0.5, 1.5, size=p.shape)
        elif name.endswith("bias"):
            v = rng.normal(0.0, 0.5, size=p.shape)
        elif "embed_tokens" in name or "pos_embed" in name:
            v = rng.normal(0.0, 1.0, size=p.shape)
        else:
            fan_in = int(np.prod(p.shape[1:])) if p.ndim > 1 else p.shape[-1]
            v = rng.normal(0.0, 1.0 / np.sqrt(fan_in), size=p.shape)
        new.append((name, mx.array(v.astype(np.float32))))
    model.update(tree_unflatten(new))
    model.set_dtype(mx.bfloat16)
    mx.eval(model.parameters())
    return model


def save_checkpoint(model, config: dict, out: Path, bits: int = 0, group_size: int = 64, quantize_tower: bool = False) -> Path:
    """An mlx-community checkpoint: bf16, or the language model (and with quantize_tower the tower's
    linears) MLX-quantized, as mlx-vlm's converter writes them."""
    out.mkdir(parents=True, exist_ok=True)
    config = copy.deepcopy(config)
    if bits:
        def predicate(path, module):
            if not hasattr(module, "to_quantized") or module.weight.shape[-1] % group_size != 0:
                return False
            return quantize_tower or not path.startswith("vision_tower")
        nn.quantize(model, group_size=group_size, bits=bits, class_predicate=predicate)
        config["quantization"] = {"group_size": group_size, "bits": bits}
    save_weights(out, model)
    save_config(config, out / "config.json")
    return out


def load(model_dir: Path):
    """The checkpoint as mlx-vlm loads it, cast to float32 for a precise reference."""
    model = load_model(Path(model_dir))
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model


def random_pixels(grids, seed: int, patch_values: int) -> np.ndarray:
    patches = sum(t * h * w for t, h, w in grids)
    return np.random.default_rng(seed).normal(0.0, 1.0, size=(patches, patch_values)).astype(np.float32)


def tower_embeddings(model, pixels: np.ndarray, grids) -> np.ndarray:
    out, _ = model.vision_tower(mx.array(pixels), mx.array(grids))
    return np.array(out.astype(mx.float32))


def image_prompt(pieces, grids, merge: int = 2) -> list[int]:
    """Token ids from `pieces`: lists of text ids, or an int k for image k wrapped in vision start/end
    with its placeholder tokens."""
    ids = []
    for p in pieces:
        if isinstance(p, int):
            t, h, w = grids[p]
            ids += [VISION_START] + [IMAGE_TOKEN] * (t * (h // merge) * (w // merge)) + [VISION_END]
        else:
            ids += list(p)
    return ids


def _embeddings_and_positions(model, prompt, pixels, grids):
    feats = model.get_input_embeddings(mx.array([prompt]), mx.array(pixels), image_grid_thw=mx.array(grids))
    return feats.inputs_embeds, feats.position_ids


def reference_logits(model, prompt, pixels, grids) -> np.ndarray:
    embeds, positions = _embeddings_and_positions(model, prompt, pixels, grids)
    out = model.language_model(mx.array([prompt]), inputs_embeds=embeds, position_ids=positions)
    return np.array(out.logits[0].astype(mx.float32))


def reference_greedy(model, prompt, pixels, grids, steps: int) -> list[int]:
    """Greedy tokens, each step a full forward over the prompt's embeddings and the tokens so far,
    the new tokens at the positions after the prompt's largest (no cache state to trust)."""
    embeds, positions = _embeddings_and_positions(model, prompt, pixels, grids)
    next_pos = int(positions.max().item()) + 1
    out = []
    for _ in range(steps):
        logits = model.language_model(mx.array([prompt + out]), inputs_embeds=embeds, position_ids=positions).logits
        token = int(mx.argmax(logits[0, -1]).item())
        out.append(token)
        new = model.language_model.model.embed_tokens(mx.array([[token]])).astype(embeds.dtype)
        embeds = mx.concatenate([embeds, new], axis=1)
        positions = mx.concatenate([positions, mx.full((3, 1, 1), next_pos, dtype=positions.dtype)], axis=2)
        next_pos += 1
    return out


def write_pixels(path: Path, pixels: np.ndarray) -> Path:
    pixels.astype("<f4").tofile(path)
    return path


def grids_flag(grids) -> str:
    return ",".join(f"{t}x{h}x{w}" for t, h, w in grids)


def read_config(model_dir: Path) -> dict:
    return json.loads((Path(model_dir) / "config.json").read_text())
