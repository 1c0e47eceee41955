#!/usr/bin/env python3
"""Time to encode one 1024x1024 image with a Qwen3.5-shaped vision tower, sanctum beside transformers
in the same run: on the CPU with the same thread count, or (--device cuda) on the GPU, transformers on
torch CUDA, each side's fastest of --runs encodes after its first (which loads cuBLAS and kernels).

The tower has Qwen3.5's vision shape (transformers' Qwen3_5VisionConfig defaults: 27 blocks, hidden
1152, MLP 4304, 16 heads, patch 16, merge 2) with random weights, saved in bf16 as a Hugging Face
Qwen3_5ForConditionalGeneration checkpoint around a one-layer text model; the merger's output is
sized to that text model (1024) rather than 27B's 5120 (under 1% of the tower's work). A 1024x1024
image is a 64 x 64 patch grid: 4,096 patches, 1,024 language-model tokens. Pixel values are random
(the work does not depend on them); both sides read the same ones, and their embeddings are compared.

Needs torch and transformers 5 (not in the test venv):
  /path/to/torch-venv/bin/python bench/vision_encode.py --sanctum build/sanctum --threads 2
  python3 bench/vision_encode.py --sanctum build-cuda/sanctum --device cuda [--precision bf16]
--precision f32 (the default) runs both sides' products in f32 (no TF32 on either: torch's cuDNN
convolution included); bf16 runs sanctum's bf16 mode beside torch with bf16 weights and activations.
"""
import argparse
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from transformers.models.qwen3_5.configuration_qwen3_5 import Qwen3_5Config
from transformers.models.qwen3_5.modeling_qwen3_5 import Qwen3_5ForConditionalGeneration

TEXT = dict(vocab_size=512, hidden_size=1024, num_hidden_layers=1, num_attention_heads=8, num_key_value_heads=2, head_dim=128,
            intermediate_size=1024, layer_types=["full_attention"], max_position_embeddings=4096, tie_word_embeddings=False,
            rope_parameters={"rope_type": "default", "rope_theta": 100000.0, "partial_rotary_factor": 0.25,
                             "mrope_section": [11, 11, 10], "mrope_interleaved": True})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sanctum", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--side", type=int, default=1024, help="image side in pixels")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32")
    ap.add_argument("--runs", type=int, default=3, help="encodes per side; the fastest after the first counts (cuda)")
    a = ap.parse_args()
    gpu = a.device == "cuda"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    config = Qwen3_5Config(text_config=dict(TEXT, model_type="qwen3_5_text"), vision_config=dict(out_hidden_size=1024))
    vc = config.vision_config
    model = Qwen3_5ForConditionalGeneration(config).to(torch.float32)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name and name.endswith("weight"):
                p.copy_(torch.rand(p.shape) + 0.5)
            elif name.endswith("bias"):
                p.copy_(torch.randn(p.shape) * 0.1)
            else:
                p.copy_(torch.randn(p.shape) / np.sqrt(int(np.prod(p.shape[1:])) if p.ndim > 1 else 1))
    grid = a.side // vc.patch_size
    patches = grid * grid
    pixels = np.random.default_rng(0).normal(size=(patches, 3 * vc.temporal_patch_size * vc.patch_size ** 2)).astype(np.float32)
    with tempfile.TemporaryDirectory() as tmp:
        ckpt = Path(tmp) / "ckpt"
        model.to(torch.bfloat16).save_pretrained(ckpt)
        dtype = torch.bfloat16 if a.precision == "bf16" else torch.float32
        ref = Qwen3_5ForConditionalGeneration.from_pretrained(ckpt, dtype=torch.bfloat16).to(dtype).eval()
        if gpu:
            ref = ref.to("cuda")
        pixels.astype("<f4").tofile(Path(tmp) / "pixels.f32")
        device_args = ["--device", "cuda", "--encode-runs", str(a.runs)] if gpu else []
        r = subprocess.run([a.sanctum, "vision", "--model", str(ckpt), "--pixels", str(Path(tmp) / "pixels.f32"),
                            "--grids", f"1x{grid}x{grid}", "--threads", str(a.threads), "--matmul-precision", a.precision,
                            "--embeddings-out", str(Path(tmp) / "ours.npy"), *device_args], check=True, capture_output=True, text=True)
        ours_s = float(re.search(r"patches, ([0-9.]+) s", r.stderr).group(1))
        ours = np.load(Path(tmp) / "ours.npy")
        x = torch.from_numpy(pixels).to(dtype)
        thw = torch.tensor([[1, grid, grid]])
        if gpu:
            x, thw = x.to("cuda"), thw.to("cuda")
        times = []
        with torch.no_grad():
            for _ in range(a.runs if gpu else 1):
                if gpu:
                    torch.cuda.synchronize()
                t0 = time.perf_counter()
                theirs = torch.cat(ref.model.get_image_features(x, thw).pooler_output)
                if gpu:
                    torch.cuda.synchronize()
                times.append(time.perf_counter() - t0)
        theirs_s = min(times[1:]) if len(times) > 1 else times[0]
        theirs = theirs.float().cpu().numpy()
    rel = float(np.max(np.abs(ours - theirs)) / np.max(np.abs(theirs)))
    where = (f"{torch.cuda.get_device_name()}, fastest of {a.runs} after the first" if gpu
             else f"{a.threads} threads, cpu {os.cpu_count()} cores")
    print(f"{a.side}x{a.side} image ({patches} patches, {patches // 4} tokens), {vc.depth} blocks, {where}:")
    print(f"  sanctum       {ours_s:8.3f} s  ({a.precision} compute, bf16 weights)")
    print(f"  transformers  {theirs_s:8.3f} s  (torch {torch.__version__}, {a.precision}, sdpa)")
    print(f"  embeddings max |diff| / max |ref| = {rel:.2g}")


if __name__ == "__main__":
    main()
