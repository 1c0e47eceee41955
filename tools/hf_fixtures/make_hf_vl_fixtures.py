#!/usr/bin/env python3
"""Tiny Hugging Face-format Qwen3.5 vision-language checkpoints with transformers reference outputs.

For each case (dense qwen3_5, MoE qwen3_5_moe): build Qwen3_5(Moe)ForConditionalGeneration with
transformers' own classes (random weights; norms, biases and position tables randomised too), save
it in bf16 with save_pretrained (model.visual.*, model.language_model.*, lm_head; the patch embedding
as torch's (out, C, T, P, P) Conv3d), reload it and evaluate in float32. Inputs: two small images
through the PIL image processor (Qwen2VLImageProcessorPil, the slow numpy/PIL path, patch 4, merge 2),
and a prompt of text, image 0, text, image 1, text. Written per case: pixel_values.npy (the
processor's output), tower.npy (the tower's merged embeddings), logits.npy (every prompt position),
expected.json (prompt, grids, 32 greedy tokens). Committed under tests/data/hf_vl_fixtures/ and
checked by tests/vision/test_hf_vl_fixtures.py.

Runs wherever torch + transformers 5 are installed:
  python tools/hf_fixtures/make_hf_vl_fixtures.py --out tests/data/hf_vl_fixtures
"""
import argparse
import json
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5Config
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5ForConditionalGeneration
from transformers.models.qwen3_5_moe.configuration_qwen3_5_moe import Qwen3_5MoeConfig
from transformers.models.qwen3_5_moe.modeling_qwen3_5_moe import Qwen3_5MoeForConditionalGeneration

IMAGE, VIDEO, VISION_START, VISION_END = 500, 501, 498, 499
TEXT = dict(
    vocab_size=512, hidden_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2, head_dim=64,
    linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=32, linear_value_head_dim=32,
    linear_conv_kernel_dim=4, rms_norm_eps=1e-6, max_position_embeddings=4096, tie_word_embeddings=False,
    layer_types=["linear_attention", "full_attention", "linear_attention", "full_attention"],
    rope_parameters={"rope_type": "default", "rope_theta": 100000.0, "partial_rotary_factor": 0.25,
                     "mrope_section": [2, 3, 3], "mrope_interleaved": True},
)
VISION = dict(depth=2, hidden_size=64, intermediate_size=128, num_heads=4, in_channels=3, patch_size=4, temporal_patch_size=2,
              spatial_merge_size=2, out_hidden_size=128, num_position_embeddings=64, hidden_act="gelu_pytorch_tanh")
TOKENS = dict(image_token_id=IMAGE, video_token_id=VIDEO, vision_start_token_id=VISION_START, vision_end_token_id=VISION_END,
              tie_word_embeddings=False)
CASES = {
    "qwen3_5_vl": (Qwen3_5Config, Qwen3_5ForConditionalGeneration, dict(intermediate_size=256)),
    "qwen3_5_moe_vl": (Qwen3_5MoeConfig, Qwen3_5MoeForConditionalGeneration,
                       dict(num_experts=4, num_experts_per_tok=2, moe_intermediate_size=64, shared_expert_intermediate_size=128)),
}
GREEDY_TOKENS = 32
IMAGE_SIZES = [(44, 28), (20, 36)]  # (width, height): a wide and a tall image


def randomise(model, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".visual." in name or name.startswith("visual."):
                if "norm" in name and name.endswith("weight"):
                    p.copy_(torch.rand(p.shape, generator=g) + 0.5)
                elif name.endswith("bias"):
                    p.copy_(torch.randn(p.shape, generator=g) * 0.5)
                elif "pos_embed" in name:
                    p.copy_(torch.randn(p.shape, generator=g))
                else:
                    p.copy_(torch.randn(p.shape, generator=g) / np.sqrt(int(np.prod(p.shape[1:]))))
            elif name.endswith("norm.weight") and "linear_attn" not in name:
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


def images(seed):
    rng = np.random.default_rng(seed)
    out = []
    for w, h in IMAGE_SIZES:
        # a smooth gradient with noise, so resampling has structure to get right
        y, x = np.mgrid[0:h, 0:w]
        base = np.stack([x * 255 / w, y * 255 / h, (x + y) * 127 / (w + h)], axis=-1)
        out.append(Image.fromarray(np.clip(base + rng.normal(0, 30, base.shape), 0, 255).astype(np.uint8)))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    torch.manual_seed(0)
    processor = Qwen2VLImageProcessorPil(patch_size=4, temporal_patch_size=2, merge_size=2,
                                         size={"shortest_edge": 8 * 8, "longest_edge": 48 * 48})
    for i, (name, (config_class, model_class, text_extra)) in enumerate(CASES.items()):
        out = Path(a.out) / name
        out.mkdir(parents=True, exist_ok=True)
        text_type = "qwen3_5_moe_text" if "moe" in name else "qwen3_5_text"
        config = config_class(text_config=dict(TEXT, model_type=text_type, **text_extra),
                              vision_config=dict(VISION), **TOKENS)
        model = model_class(config).to(torch.float32)
        randomise(model, seed=200 + i)
        model.to(torch.bfloat16).save_pretrained(out)
        processor.save_pretrained(out)
        ref = model_class.from_pretrained(out, dtype=torch.bfloat16).to(torch.float32).eval()

        inputs = processor(images=images(11 + i), return_tensors="pt")
        pixel_values, grids = inputs["pixel_values"].to(torch.float32), inputs["image_grid_thw"]
        counts = [int(t * (h // 2) * (w // 2)) for t, h, w in grids.tolist()]
        rng = np.random.default_rng(7 + i)
        text = lambda k: rng.integers(0, 490, size=k).tolist()  # noqa: E731  (ids below the vision ones)
        prompt = (text(3) + [VISION_START] + [IMAGE] * counts[0] + [VISION_END] + text(4) + [VISION_START] + [IMAGE] * counts[1] +
                  [VISION_END] + text(2))
        ids = torch.tensor([prompt])
        mm = (ids == IMAGE).to(torch.int32)
        with torch.no_grad():
            tower = torch.cat(ref.model.get_image_features(pixel_values, grids).pooler_output, dim=0)
            logits = ref(input_ids=ids, pixel_values=pixel_values, image_grid_thw=grids, mm_token_type_ids=mm).logits[0]
            gen = ref.generate(input_ids=ids, pixel_values=pixel_values, image_grid_thw=grids, mm_token_type_ids=mm,
                               max_new_tokens=GREEDY_TOKENS, min_new_tokens=GREEDY_TOKENS, do_sample=False, eos_token_id=None,
                               pad_token_id=0)
        np.save(out / "pixel_values.npy", pixel_values.numpy().astype(np.float32))
        np.save(out / "tower.npy", tower.float().numpy().astype(np.float32))
        np.save(out / "logits.npy", logits.float().numpy().astype(np.float32))
        expected = {"prompt": prompt, "grids": grids.tolist(), "greedy": gen[0, len(prompt):].tolist()}
        (out / "expected.json").write_text(json.dumps(expected, indent=1))
        print(f"{name}: wrote {out} (grids {grids.tolist()}, {len(prompt)} prompt tokens)")


if __name__ == "__main__":
    main()
