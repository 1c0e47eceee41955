#!/usr/bin/env python3
"""Tiny Hugging Face checkpoints with PEFT LoRA / DoRA adapters and transformers + PEFT reference
outputs, for tests/adapters/test_peft_fixtures.py.

For each case: build the base model with transformers' own classes (random f32 weights, saved with
save_pretrained), wrap it with peft.get_peft_model (the case's LoraConfig: rank_pattern /
alpha_pattern, use_rslora, a target_modules regex, layers_to_transform, use_dora), give the adapter
random A and B (a fresh LoRA's B is zero, which would show nothing), save it with save_pretrained,
reload base + adapter with PeftModel.from_pretrained, and write the unmerged adapter's logits for
fixed prompts and a greedy generation. The output is committed under tests/data/peft_adapters/.

Needs torch, transformers and peft (CI has no torch); rerun with
  python tools/peft_fixtures/make_peft_fixtures.py --out tests/data/peft_adapters
(or any Python with torch, transformers 5 and peft 0.18).
"""
import argparse
import json
from pathlib import Path

import numpy as np
import torch
from peft import LoraConfig, PeftModel, get_peft_model
from transformers import AutoModelForCausalLM, MistralConfig, Qwen2Config
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5TextConfig

SMALL = dict(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=1,
             max_position_embeddings=1024, rms_norm_eps=1e-6)
CASES = {
    # rank_pattern / alpha_pattern override r and lora_alpha per module.
    "qwen2_rank_pattern": (
        lambda: Qwen2Config(intermediate_size=128, tie_word_embeddings=True, **SMALL),
        dict(r=4, lora_alpha=8, target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"],
             rank_pattern={"down_proj": 2}, alpha_pattern={"o_proj": 16})),
    # rslora: scale alpha / sqrt(r); a regex target; only layer 1.
    "mistral_rslora": (
        lambda: MistralConfig(intermediate_size=128, head_dim=32, tie_word_embeddings=False, **SMALL),
        dict(r=8, lora_alpha=4, use_rslora=True, target_modules=r".*\.(q_proj|v_proj|up_proj)", layers_to_transform=None)),
    "mistral_layers_to_transform": (
        lambda: MistralConfig(intermediate_size=128, head_dim=32, tie_word_embeddings=False, **SMALL),
        dict(r=2, lora_alpha=6, target_modules=["o_proj", "down_proj"], layers_to_transform=[1])),
    # The hybrid: GatedDeltaNet projections and the gated attention's.
    "qwen3_5_text": (
        lambda: Qwen3_5TextConfig(
            vocab_size=256, hidden_size=64, num_hidden_layers=4, num_attention_heads=2, num_key_value_heads=1, head_dim=32,
            linear_num_key_heads=1, linear_num_value_heads=2, linear_key_head_dim=16, linear_value_head_dim=16,
            linear_conv_kernel_dim=4, intermediate_size=128, rms_norm_eps=1e-6, max_position_embeddings=1024,
            tie_word_embeddings=False,
            layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
            rope_parameters={"rope_type": "default", "rope_theta": 100000.0, "partial_rotary_factor": 0.25,
                             "mrope_section": [2, 1, 1], "mrope_interleaved": True}),
        dict(r=4, lora_alpha=8, target_modules=["in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj", "q_proj", "o_proj",
                                                "gate_proj"])),
    "qwen2_dora": (
        lambda: Qwen2Config(intermediate_size=128, tie_word_embeddings=False, **SMALL),
        dict(r=4, lora_alpha=8, use_dora=True, target_modules=["q_proj", "v_proj", "down_proj"])),
}
PROMPT_LENGTHS = [1, 7, 33]
GREEDY_TOKENS = 16


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(torch.rand(p.shape, generator=g) * 0.5 + (0.75 if "linear_attn.norm" in name or "qwen3_5" not in
                                                                  type(model).__module__ else -0.25))
            elif name.endswith("A_log"):
                p.copy_(torch.log(torch.rand(p.shape, generator=g) * 15 + 1))
            elif name.endswith("dt_bias") or name.endswith("bias"):
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
    for i, (name, (make_config, lora)) in enumerate(CASES.items()):
        out = Path(a.out) / name
        (out / "adapter").mkdir(parents=True, exist_ok=True)
        torch.manual_seed(i)
        base = AutoModelForCausalLM.from_config(make_config(), dtype=torch.float32)
        randomise(base, seed=200 + i)
        base.save_pretrained(out / "base")
        peft_model = get_peft_model(base, LoraConfig(init_lora_weights=False, lora_dropout=0.0, bias="none", **lora))
        g = torch.Generator().manual_seed(300 + i)
        with torch.no_grad():
            for pname, p in peft_model.named_parameters():
                if "lora_A" in pname or "lora_B" in pname:
                    p.copy_(torch.randn(p.shape, generator=g) * (0.2 if "lora_B" in pname else 1.0) / np.sqrt(p.shape[-1]))
                elif "lora_magnitude_vector" in pname:
                    p.mul_(1 + 0.2 * torch.rand(p.shape, generator=g))
        peft_model.save_pretrained(out / "adapter")
        reloaded = AutoModelForCausalLM.from_pretrained(out / "base", dtype=torch.float32)
        ref = PeftModel.from_pretrained(reloaded, out / "adapter").eval()
        plain = AutoModelForCausalLM.from_pretrained(out / "base", dtype=torch.float32).eval()
        rng = np.random.default_rng(11 + i)
        expected = {"prompts": {}, "greedy": {}, "adapter_effect": 0.0}
        with torch.no_grad():
            for length in PROMPT_LENGTHS:
                prompt = rng.integers(0, 256, size=length).tolist()
                logits = ref(torch.tensor([prompt])).logits[0].float().numpy()
                base_logits = plain(torch.tensor([prompt])).logits[0].float().numpy()
                expected["adapter_effect"] = max(expected["adapter_effect"], float(np.abs(logits - base_logits).max()))
                np.save(out / f"logits_{length}.npy", logits.astype(np.float32))
                expected["prompts"][str(length)] = prompt
            prompt = expected["prompts"]["7"]
            gen = ref.generate(input_ids=torch.tensor([prompt]), max_new_tokens=GREEDY_TOKENS, min_new_tokens=GREEDY_TOKENS,
                               do_sample=False, eos_token_id=None, pad_token_id=0)
            expected["greedy"]["7"] = gen[0, len(prompt):].tolist()
        (out / "expected.json").write_text(json.dumps(expected, indent=1))
        print(f"{name}: wrote {out} (max adapter effect on logits {expected['adapter_effect']:.3g})")


if __name__ == "__main__":
    main()
