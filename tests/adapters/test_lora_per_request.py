"""Adapters served unmerged (`--lora`: the base weights untouched, scale·(x·A)·B added per row) against
the references that compute the same thing: mlx-lm with the adapter loaded unfused (for 4-bit, x·Wq plus
the LoRA term, exactly the unmerged path), and transformers + PEFT for the committed PEFT fixtures, on
dense, hybrid and MoE tiny models, bf16 and 4-bit. Logits within 2e-3 of the logit scale at every
position (prefill and token-by-token decode), the same argmax; DoRA and routed-expert targets are
refused with the way to serve them (--adapter)."""
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import mlx_adapters
import tiny_models
from parity_common import DEVICE_ARGS, prompt_of, sanctum_logits

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "peft_adapters"

CASES = {
    # name: (base config, bits, adapter options)
    "mistral-bf16": ("mistral", 0, {}),
    "qwen2-q4": ("qwen2", 4, {}),
    "qwen3_5-bf16": ("qwen3_5", 0, {}),
    "qwen3_5-q4": ("qwen3_5", 4, {"num_layers": 3}),
    # MoE: attention, GatedDeltaNet and the shared expert unmerged (routed experts are served merged only).
    "qwen3_5_moe-q4": ("qwen3_5_moe", 4, {"keys": ["self_attn.q_proj", "self_attn.v_proj", "self_attn.o_proj", "linear_attn.in_proj_qkv",
                                                   "linear_attn.out_proj", "mlp.shared_expert.gate_proj", "mlp.shared_expert.up_proj",
                                                   "mlp.shared_expert.down_proj"]}),
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


def check_close(ours, ref, plain, label, rel=2e-3):
    scale = max(1.0, float(np.max(np.abs(ref))))
    diff = float(np.max(np.abs(ours - ref)))
    print(f"{label}: max |dlogit| {diff:.3g} (scale {scale:.3g}, adapter effect {np.max(np.abs(plain - ref)):.3g})")
    assert float(np.max(np.abs(plain - ref))) > 0.05 * scale, f"{label}: the adapter is a no-op: the check would show nothing"
    assert diff <= rel * scale, f"{label}: max |dlogit| {diff:.3g}"
    assert np.array_equal(ours.argmax(-1), ref.argmax(-1)), f"{label}: argmax differs"


@pytest.mark.parametrize("name", list(CASES))
def test_unmerged_adapter_matches_mlx_lm_unfused(sanctum_bin, built, tmp_path, name):
    root, cfg = built(name)
    base, adapter = root / "base", root / "adapter"
    unfused = mlx_adapters.with_adapter(base, adapter)
    for length in (1, 9, 40):
        prompt = prompt_of(length, cfg["vocab_size"], seed=length)
        ref = tiny_models.reference_logits(unfused, prompt)
        plain = sanctum_logits(sanctum_bin, base, prompt, tmp_path / "plain.npy")
        # The whole prompt in one forward, then a prefill of half and one token per forward after it.
        for split in (None, max(1, length // 2)):
            ours = sanctum_logits(sanctum_bin, base, prompt, tmp_path / "ours.npy", split=split, extra=["--lora", str(adapter)])
            check_close(ours, ref, plain, f"{name} len {length} split {split}")


@pytest.mark.parametrize("case", ["mistral_layers_to_transform", "mistral_rslora", "qwen2_rank_pattern", "qwen3_5_text"])
def test_unmerged_peft_adapter_matches_transformers(sanctum_bin, tmp_path, case):
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    for length, prompt in expected["prompts"].items():
        ref = np.load(d / f"logits_{length}.npy")
        ours = sanctum_logits(sanctum_bin, d / "base", prompt, tmp_path / "ours.npy", extra=["--lora", str(d / "adapter")])
        plain = sanctum_logits(sanctum_bin, d / "base", prompt, tmp_path / "plain.npy")
        check_close(ours, ref, plain, f"{case} len {length}", rel=1e-3)


def lora_error(sanctum_bin, base, adapter, tmp_path):
    r = subprocess.run([sanctum_bin, "logits", "--model", str(base), "--prompt-ids", "1,2,3", "--out", str(tmp_path / "x.npy"), "--lora",
                        str(adapter), *DEVICE_ARGS], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    return r.stderr


def test_dora_is_refused_unmerged_with_the_merge_flag_named(sanctum_bin, tmp_path):
    err = lora_error(sanctum_bin, FIXTURES / "qwen2_dora" / "base", FIXTURES / "qwen2_dora" / "adapter", tmp_path)
    assert "DoRA" in err and "--adapter" in err, err


def test_routed_expert_targets_are_refused_unmerged(sanctum_bin, tmp_path):
    cfg = dict(tiny_models.BASE_CONFIGS["qwen3_5_moe"])
    tiny_models.save_checkpoint(tiny_models.make_model(cfg, seed=7), cfg, tmp_path / "base", bits=0, group_size=64)
    mlx_adapters.train_adapter(tmp_path / "base", tmp_path / "adapter", seed=3, num_layers=1, steps=1, keys=["mlp.switch_mlp.gate_proj"])
    err = lora_error(sanctum_bin, tmp_path / "base", tmp_path / "adapter", tmp_path)
    assert "switch_mlp.gate_proj" in err and "--adapter" in err, err
