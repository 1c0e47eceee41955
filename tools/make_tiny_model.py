#!/usr/bin/env python3
"""Creates a small random model with mlx-lm and saves it as an mlx-community checkpoint.

Example: make_tiny_model.py --arch qwen2 --out models/demo-qwen2 --quantize 4 --hidden 256 --layers 4
Shapes default to the tiny parity configs in tiny_models.py; flags override them.
"""
import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tiny_models  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--arch", required=True, choices=sorted(tiny_models.BASE_CONFIGS))
    ap.add_argument("--out", required=True)
    ap.add_argument("--quantize", type=int, default=0, choices=[0, 4, 8], help="bits (0 = bf16)")
    ap.add_argument("--group-size", type=int, default=64)
    ap.add_argument("--hidden", type=int)
    ap.add_argument("--intermediate", type=int)
    ap.add_argument("--layers", type=int)
    ap.add_argument("--heads", type=int)
    ap.add_argument("--kv-heads", type=int)
    ap.add_argument("--head-dim", type=int)
    ap.add_argument("--vocab", type=int)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    cfg = dict(tiny_models.BASE_CONFIGS[a.arch])
    for key, value in [("hidden_size", a.hidden), ("intermediate_size", a.intermediate), ("num_hidden_layers", a.layers),
                       ("num_attention_heads", a.heads), ("num_key_value_heads", a.kv_heads), ("head_dim", a.head_dim),
                       ("vocab_size", a.vocab)]:
        if value is not None:
            cfg[key] = value
    if a.hidden and not a.intermediate:
        cfg["intermediate_size"] = 2 * a.hidden
    if a.untied:
        cfg["tie_word_embeddings"] = False
    model = tiny_models.make_model(cfg, seed=a.seed)
    out = tiny_models.save_checkpoint(model, cfg, a.out, bits=a.quantize, group_size=a.group_size)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
