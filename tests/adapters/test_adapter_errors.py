"""Bad adapters are refused at load with one line naming the file (and the tensor or field), a
non-zero exit and no crash: each case breaks one thing in a good mlx-lm adapter (or in a PEFT-format
copy of it) and loads it with `sanctum logits --adapter`."""
import json
import shutil
import subprocess

import mlx.core as mx
import numpy as np
import pytest

import mlx_adapters
import tiny_models


@pytest.fixture(scope="module")
def good(tmp_path_factory):
    root = tmp_path_factory.mktemp("adapter-errors")
    cfg = dict(tiny_models.BASE_CONFIGS["mistral"])
    tiny_models.save_checkpoint(tiny_models.make_model(cfg, seed=1), cfg, root / "base")
    mlx_adapters.train_adapter(root / "base", root / "adapter", steps=1, keys=["self_attn.q_proj", "mlp.down_proj"])
    return root


def load_with(sanctum_bin, good, adapter):
    return subprocess.run([sanctum_bin, "logits", "--model", str(good / "base"), "--adapter", str(adapter), "--prompt-ids", "1,2,3",
                           "--out", str(adapter / "out.npy")], capture_output=True, text=True, timeout=120)


def copy_of(good, tmp_path):
    out = tmp_path / "adapter"
    shutil.copytree(good / "adapter", out)
    return out


def edit_config(adapter, change):
    path = adapter / "adapter_config.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def edit_tensors(adapter, change, name="adapters.safetensors"):
    tensors = dict(mx.load(str(adapter / name)))
    change(tensors)
    mx.save_safetensors(str(adapter / name), tensors)


def first(tensors, suffix):
    return sorted(k for k in tensors if k.endswith(suffix))[0]


def rename_layer(tensors, old, new):
    for k in [k for k in tensors if f".layers.{old}." in k]:
        tensors[k.replace(f".layers.{old}.", f".layers.{new}.")] = tensors.pop(k)


def to_peft(adapter):
    """The same adapter in PEFT's layout: base_model.model.<module>.lora_A.weight (r, in), lora_B (out, r)."""
    tensors = dict(mx.load(str(adapter / "adapters.safetensors")))
    peft = {}
    for k, v in tensors.items():
        module, piece = k.rsplit(".", 1)
        peft[f"base_model.model.{module}.lora_{piece[-1].upper()}.weight"] = v.T
    (adapter / "adapters.safetensors").unlink()
    mx.save_safetensors(str(adapter / "adapter_model.safetensors"), peft)
    (adapter / "adapter_config.json").write_text(json.dumps({
        "peft_type": "LORA", "r": 4, "lora_alpha": 32, "target_modules": ["q_proj", "down_proj"], "bias": "none"}))


CASES = {
    "missing config": (lambda a: (a / "adapter_config.json").unlink(), "adapter_config.json: not found"),
    "missing weights": (lambda a: (a / "adapters.safetensors").unlink(), "no adapter weights"),
    "unknown fine_tune_type": (lambda a: edit_config(a, lambda c: c.update(fine_tune_type="qlora")), "'fine_tune_type' is 'qlora'"),
    "full fine-tune": (lambda a: edit_config(a, lambda c: c.update(fine_tune_type="full")), "'fine_tune_type' is 'full'"),
    "config rank differs from the tensors": (lambda a: edit_config(a, lambda c: c["lora_parameters"].update(rank=8)),
                                             "has rank 4 but adapter_config.json says 8"),
    "NaN scale": (lambda a: (a / "adapter_config.json").write_text(
        (a / "adapter_config.json").read_text().replace('"scale": 8.0', '"scale": NaN')), "adapter_config.json: not valid JSON"),
    "overflowing scale": (lambda a: (a / "adapter_config.json").write_text(
        (a / "adapter_config.json").read_text().replace('"scale": 8.0', '"scale": 1e999')), "adapter_config.json: not valid JSON"),
    "huge scale": (lambda a: edit_config(a, lambda c: c["lora_parameters"].update(scale=1e35)), "'lora_parameters.scale' must be finite"),
    "string scale": (lambda a: edit_config(a, lambda c: c["lora_parameters"].update(scale="8")), "'lora_parameters.scale' must be a number"),
    "module not in the model": (lambda a: (edit_config(a, lambda c: c["lora_parameters"].update(keys=None)),
                                           edit_tensors(a, lambda t: [t.update({k.replace("q_proj", "qq_proj"): t.pop(k)})
                                                                      for k in [k for k in t if "q_proj" in k]])),
                                "does not have (no linear '...layers.0.self_attn.qq_proj.weight')"),
    "LoRA on the embedding": (lambda a: (edit_config(a, lambda c: c["lora_parameters"].update(keys=None)),
                                         edit_tensors(a, lambda t: t.update({"model.embed_tokens.lora_a": mx.zeros((512, 4)),
                                                                             "model.embed_tokens.lora_b": mx.zeros((4, 128))}))),
                              "LoRA on embeddings is not supported"),
    "layer beyond the model": (lambda a: edit_tensors(a, lambda t: rename_layer(t, 1, 9)), "is for layer 9, beyond the model's 2 layers"),
    "shape mismatch": (lambda a: edit_tensors(a, lambda t: t.update({first(t, "q_proj.lora_a"): mx.zeros((64, 4))})),
                       "the adapter was trained on a different model"),
    "A without B": (lambda a: edit_tensors(a, lambda t: t.pop(first(t, "q_proj.lora_b"))), "has no B (lora_b) tensor"),
    "NaN in a tensor": (lambda a: edit_tensors(a, lambda t: t.update({first(t, "lora_b"): mx.full((4, 128), np.nan)})),
                        "is not finite"),
    "a stray tensor": (lambda a: edit_tensors(a, lambda t: t.update({"model.norm.weight": mx.ones((128,))})),
                       "'model.norm.weight' is not a LoRA tensor"),
    "keys exclude a tensor": (lambda a: edit_config(a, lambda c: c["lora_parameters"].update(keys=["self_attn.q_proj"])),
                              "lora_parameters.keys does not list 'mlp.down_proj'"),
    "num_layers excludes a tensor": (lambda a: edit_config(a, lambda c: c.update(num_layers=1)), "num_layers is 1"),
    "truncated safetensors": (lambda a: (a / "adapters.safetensors").write_bytes((a / "adapters.safetensors").read_bytes()[:-100]),
                              "adapters.safetensors"),
    "PEFT modules_to_save": (lambda a: (to_peft(a), edit_config(a, lambda c: c.update(modules_to_save=["lm_head"]))),
                             "'modules_to_save' is not empty"),
    "PEFT bias": (lambda a: (to_peft(a), edit_config(a, lambda c: c.update(bias="all"))), "'bias' is 'all'"),
    "PEFT fan_in_fan_out": (lambda a: (to_peft(a), edit_config(a, lambda c: c.update(fan_in_fan_out=True))), "'fan_in_fan_out' is true"),
    "PEFT target_modules exclude a tensor": (lambda a: (to_peft(a), edit_config(a, lambda c: c.update(target_modules=["q_proj"]))),
                                             "target_modules does not match 'model.layers.0.mlp.down_proj'"),
    "PEFT rank_pattern contradicts the tensors": (lambda a: (to_peft(a), edit_config(a, lambda c: c.update(rank_pattern={"q_proj": 2}))),
                                                  "has rank 4 but adapter_config.json says 2"),
    "PEFT bad regex": (lambda a: (to_peft(a), edit_config(a, lambda c: c.update(target_modules="(q_proj"))),
                       "is not a regular expression"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_bad_adapter_is_refused_naming_what_is_wrong(sanctum_bin, good, tmp_path, case):
    adapter = copy_of(good, tmp_path)
    breaks, message = CASES[case]
    breaks(adapter)
    r = load_with(sanctum_bin, good, adapter)
    assert r.returncode != 0 and r.returncode < 128, f"{case}: exit {r.returncode}: {r.stderr}"
    assert message in r.stderr, f"{case}: {r.stderr}"
    assert str(adapter) in r.stderr or "adapter_config.json" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_the_good_adapter_and_its_peft_copy_load_and_agree(sanctum_bin, good, tmp_path):
    r = load_with(sanctum_bin, good, good / "adapter")
    assert r.returncode == 0, r.stderr
    mlx = np.load(good / "adapter" / "out.npy")
    peft = copy_of(good, tmp_path)
    to_peft(peft)  # alpha 32 / r 4 = mlx-lm's scale 8
    r = load_with(sanctum_bin, good, peft)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(peft / "out.npy"), mlx)


def test_peft_all_linear_targets_every_linear(sanctum_bin, good, tmp_path):
    r = load_with(sanctum_bin, good, good / "adapter")
    assert r.returncode == 0, r.stderr
    peft = copy_of(good, tmp_path)
    to_peft(peft)
    edit_config(peft, lambda c: c.update(target_modules="all-linear"))
    r = load_with(sanctum_bin, good, peft)
    assert r.returncode == 0, r.stderr
    assert np.array_equal(np.load(peft / "out.npy"), np.load(good / "adapter" / "out.npy"))
