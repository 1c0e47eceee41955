"""LoRA and DoRA adapters trained with mlx-lm in the test run, merged by sanctum at load (--adapter),
against mlx-lm on dense (mistral, qwen2), hybrid (qwen3_5) and MoE (mixtral, qwen3_5_moe) tiny models,
bf16, 4-bit g64 (and one 8-bit).

The references (mlx_adapters.py): mlx-lm with the adapter loaded unfused (`load_adapters`) and the
model `mlx_lm.fuse` makes of it, both evaluated in float32.
- LoRA: sanctum's merged weights are mlx-lm's fused ones (the same roundings), so its logits equal the
  fused model's within the base suites' 2e-3 of the logit scale and the greedy tokens are identical.
  Against the unfused adapter, a merged bf16 weight carries one rounding the unfused forward does
  not, and a 4-bit one is requantized: sanctum may be no farther from it than mlx-lm's fused model
  (plus 2e-3 of the scale).
- DoRA: mlx-lm's fuse leaves f32 weights where sanctum keeps the checkpoint's dtype, so neither side's
  logits are the other's; sanctum may be no farther from the unfused adapter than the fused model (plus
  2e-3 of the scale) in bf16; in 4-bit, where requantization moves both far from the unfused adapter,
  its logits stay within 1% of the scale of the fused model's. Greedy tokens are the unfused adapter's
  (bf16) or the fused model's (4-bit).
"""
import subprocess

import numpy as np
import pytest

import mlx_adapters
import tiny_models
from parity_common import DEVICE_ARGS, prompt_of, sanctum_greedy, sanctum_logits

PROMPT = prompt_of(7, 512, seed=123)
GREEDY = 24

CASES = {
    # name: (base config, bits, adapter options)
    "mistral-bf16-lora": ("mistral", 0, {}),
    "qwen2-q4-lora": ("qwen2", 4, {"num_layers": 1}),
    "mistral-bf16-dora": ("mistral", 0, {"dora": True}),
    "qwen2-q4-dora": ("qwen2", 4, {"dora": True}),
    "qwen3_5-bf16-lora": ("qwen3_5", 0, {"keys": ["linear_attn.in_proj_qkv", "linear_attn.in_proj_z", "linear_attn.in_proj_b",
                                                  "linear_attn.in_proj_a", "linear_attn.out_proj", "self_attn.q_proj",
                                                  "self_attn.o_proj", "mlp.down_proj"]}),
    "qwen3_5-q4-lora": ("qwen3_5", 4, {"num_layers": 3}),
    "mixtral-bf16-lora": ("mixtral", 0, {}),
    "mixtral-q8-lora": ("mixtral", 8, {}),
    "qwen3_5_moe-q4-lora": ("qwen3_5_moe", 4, {}),
}


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    cache = {}

    def get(name):
        if name not in cache:
            base, bits, options = CASES[name]
            root = tmp_path_factory.mktemp(name)
            cfg = dict(tiny_models.BASE_CONFIGS[base])
            model = tiny_models.make_model(cfg, seed=7)
            tiny_models.save_checkpoint(model, cfg, root / "base", bits=bits, group_size=64)
            mlx_adapters.train_adapter(root / "base", root / "adapter", seed=3, **options)
            cache[name] = (root, cfg)
        return cache[name]

    return get


def logits_of(model, prompt):
    return tiny_models.reference_logits(model, prompt)


@pytest.mark.parametrize("name", list(CASES))
def test_merged_adapter_matches_mlx_lm(sanctum_bin, built, tmp_path, name):
    root, cfg = built(name)
    base, adapter = root / "base", root / "adapter"
    dora = CASES[name][2].get("dora", False)
    quantized = CASES[name][1] != 0
    unfused = mlx_adapters.with_adapter(base, adapter)
    fused = mlx_adapters.fused(base, adapter)
    plain = tiny_models.load(base)
    for length in (1, 7, 40):
        prompt = prompt_of(length, cfg["vocab_size"], seed=length)
        ours = sanctum_logits(sanctum_bin, base, prompt, tmp_path / "ours.npy", extra=["--adapter", str(adapter)])
        ref, ref_fused = logits_of(unfused, prompt), logits_of(fused, prompt)
        scale = max(1.0, float(np.max(np.abs(ref))))
        # The adapter must matter, or none of this would show anything.
        assert float(np.max(np.abs(logits_of(plain, prompt) - ref))) > 0.05 * scale, f"{name}: the trained adapter is a no-op"
        d_ref, d_fused = float(np.max(np.abs(ours - ref))), float(np.max(np.abs(ours - ref_fused)))
        mlx_gap = float(np.max(np.abs(ref_fused - ref)))
        print(f"{name} len {length}: max |dlogit| vs unfused {d_ref:.3g}, vs fused {d_fused:.3g} (fused vs unfused {mlx_gap:.3g})")
        if not dora:
            assert d_fused <= 2e-3 * scale, f"{name} len {length}: max |dlogit| vs mlx_lm.fuse {d_fused:.3g}"
            assert np.array_equal(ours.argmax(-1), ref_fused.argmax(-1))
            assert d_ref <= mlx_gap + 2e-3 * scale, f"{name} len {length}: farther from the unfused adapter than mlx_lm.fuse"
        elif not quantized:
            assert d_ref <= mlx_gap + 2e-3 * scale, f"{name} len {length}: farther from the unfused adapter than mlx_lm.fuse"
        else:  # requantization moves both far from the unfused adapter: hold to the fused model
            assert d_fused <= 1e-2 * scale, f"{name} len {length}: max |dlogit| vs mlx_lm.fuse {d_fused:.3g}"
    tokens = sanctum_greedy_with(sanctum_bin, base, adapter)
    expected = tiny_models.reference_greedy(unfused if dora and not quantized else fused, PROMPT, GREEDY)
    assert tokens == expected


def sanctum_greedy_with(sanctum_bin, base, adapter):
    r = subprocess.run([sanctum_bin, "generate", "--model", str(base), "--adapter", str(adapter), "--prompt-ids",
                        ",".join(map(str, PROMPT)), "--max-tokens", str(GREEDY), "--temperature", "0", "--ignore-eos", *DEVICE_ARGS],
                       check=True, capture_output=True, text=True, timeout=120)
    return [int(t) for t in r.stdout.strip().split(",")]


def test_without_adapter_the_base_is_unchanged(sanctum_bin, built):
    root, _ = built("mistral-bf16-lora")
    expected = tiny_models.reference_greedy(tiny_models.load(root / "base"), PROMPT, GREEDY)
    assert sanctum_greedy(sanctum_bin, root / "base", PROMPT, GREEDY) == expected
