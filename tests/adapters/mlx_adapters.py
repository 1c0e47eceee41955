"""Tiny adapters trained with mlx-lm's own tuner code (a few optimizer steps on random tokens, CPU),
saved as `mlx_lm.lora` saves them, and the two references sanctum's merge is held to: the base model
with the adapter loaded (`load_adapters`, unfused) and the model `mlx_lm.fuse` makes from it."""
from __future__ import annotations

import json
from pathlib import Path

import mlx.core as mx
import mlx.nn as nn
import mlx.optimizers as optim
import numpy as np
from mlx.utils import tree_flatten, tree_unflatten
from mlx_lm.tuner.utils import linear_to_lora_layers, load_adapters
from mlx_lm.utils import load_model


def train_adapter(base_dir: Path, out_dir: Path, *, dora: bool = False, rank: int = 4, scale: float = 8.0,
                  num_layers: int = -1, keys: list[str] | None = None, steps: int = 3, seed: int = 0) -> Path:
    """Trains a LoRA (or DoRA) adapter on the checkpoint in base_dir and writes adapters.safetensors
    and adapter_config.json into out_dir, as mlx_lm.lora does."""
    mx.random.seed(seed)
    model, config = load_model(Path(base_dir))
    model.set_dtype(mx.float32)  # mlx trains MoE switch layers (gather_mm) in f32 only on the CPU
    model.freeze()
    params = {"rank": rank, "scale": scale, "dropout": 0.0, "keys": keys}
    n_layers = len(model.layers)
    linear_to_lora_layers(model, num_layers if num_layers >= 0 else n_layers, params, use_dora=dora)
    vocab = config.get("vocab_size") or config["text_config"]["vocab_size"]
    tokens = mx.array(np.random.default_rng(seed).integers(0, vocab, size=(2, 17)))

    def loss_fn(m, x, y):
        return nn.losses.cross_entropy(m(x).astype(mx.float32), y).mean()

    optimizer = optim.Adam(learning_rate=1e-2)
    step = nn.value_and_grad(model, loss_fn)
    for _ in range(steps):
        _, grads = step(model, tokens[:, :-1], tokens[:, 1:])
        optimizer.update(model, grads)
        mx.eval(model.trainable_parameters(), optimizer.state)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    mx.save_safetensors(str(out / "adapters.safetensors"), dict(tree_flatten(model.trainable_parameters())))
    (out / "adapter_config.json").write_text(json.dumps({
        "fine_tune_type": "dora" if dora else "lora", "num_layers": num_layers if num_layers >= 0 else n_layers,
        "lora_parameters": params, "model": str(base_dir)}, indent=2))
    return out


def with_adapter(base_dir: Path, adapter_dir: Path):
    """The base model with the adapter loaded unfused, in float32: mlx-lm's own forward of the adapter."""
    model, _ = load_model(Path(base_dir))
    load_adapters(model, str(adapter_dir))
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model


def fused(base_dir: Path, adapter_dir: Path):
    """What mlx_lm.fuse makes of the adapter (requantized when the base is quantized), evaluated in float32."""
    model, _ = load_model(Path(base_dir))
    load_adapters(model, str(adapter_dir))
    fused_linears = [(n, m.fuse(dequantize=False)) for n, m in model.named_modules() if hasattr(m, "fuse")]
    model.update_modules(tree_unflatten(fused_linears))
    model.set_dtype(mx.float32)
    mx.eval(model.parameters())
    return model
