#!/usr/bin/env python3
"""Tiny Hugging Face-format qwen3_5 / qwen3_5_moe checkpoints with transformers reference outputs.

For each case: build the model with transformers' own classes (random weights, norms and gates
randomised too), save it in bf16 with save_pretrained (Hugging Face names, conv1d (C, 1, K),
RMSNorm stored as w - 1, fused 3-D expert grids), reload it, evaluate in float32, and write
reference logits for fixed prompts and a 32-token greedy generation. The output is committed under
tests/data/hf_fixtures/ and checked by tests/parity/test_hf_fixtures.py.

Runs wherever torch + transformers are installed (the lent GPU machine has both):
  python tools/hf_fixtures/make_hf_fixtures.py --out tests/data/hf_fixtures
"""
import argparse
import json
from pathlib import Path

import numpy as np
import torch
from transformers import AutoModelForCausalLM
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeTextConfig

COMMON = dict(
    vocab_size=512, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
    linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=4096, tie_word_embeddings=False,
    layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
    rope_parameters={"rope_type": "default", "rope_theta": 100000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [2, 3, 3], "mrope_interleaved": True},
)
CASES = {
    "qwen3_5_text": lambda: Qwen3_5TextConfig(intermediate_size=256, **COMMON),
    "qwen3_5_moe_text": lambda: Qwen3_5MoeTextConfig(
        num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=128, **COMMON),
}
PROMPT_LENGTHS = [1, 7, 64]
GREEDY_TOKENS = 32


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight") and "linear_attn" not in name:
                p.copy_(torch.rand(p.shape, generator=g) - 0.5)  # stored as w - 1
            elif name.endswith("linear_attn.norm.weight"):
                p.copy_(torch.rand(p.shape, generator=g) + 0.5)
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 15 + 1))
            elif name.endswith("dt_bias"):
                p.copy_(torch.randn(p.shape, generator=g) * 0.5)
            elif "embed" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                fan_in = p.shape[-1] if p.ndim > 1 else p.shape[0]
                p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(fan_in))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.manual_seed(0)
    for i, (name, make_config) in enumerate(CASES.items()):
        out = Path(a.out) / name
        out.mkdir(parents=True, exist_ok=True)
        model = AutoModelForCausalLM.from_config(make_config(), dtype=torch.float32)
        randomise(model, seed=100 + i)
        model.to(torch.bfloat16).save_pretrained(out)
        ref = AutoModelForCausalLM.from_pretrained(out, dtype=torch.bfloat16).to(torch.float32).eval()
        rng = np.random.default_rng(7 + i)
        expected = {"prompts": {}, "greedy": {}}
        with torch.no_grad():
            for length in PROMPT_LENGTHS:
                prompt = rng.integers(0, ref.config.vocab_size, size=length).tolist()
                logits = ref(torch.tensor([prompt])).logits[0].float().numpy()
                np.save(out / f"logits_{length}.npy", logits.astype(np.float32))
                expected["prompts"][str(length)] = prompt
            prompt = expected["prompts"]["7"]
            ids = torch.tensor([prompt])
            gen = ref.generate(ids, max_new_tokens=GREEDY_TOKENS, min_new_tokens=GREEDY_TOKENS, do_sample=False,
                               eos_token_id=None, pad_token_id=0)
            expected["greedy"]["7"] = gen[0, len(prompt):].tolist()
        (out / "expected.json").write_text(json.dumps(expected, indent=1))
        print(f"{name}: wrote {out}")


if __name__ == "__main__":
    main()
