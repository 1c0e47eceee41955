"""Bad checkpoints give one clear error line and a non-zero exit, never a crash or a hang."""
import json
import shutil
import struct
import subprocess

import pytest

import tiny_models


@pytest.fixture(scope="module")
def good_checkpoint(tmp_path_factory):
    cfg = dict(tiny_models.BASE_CONFIGS["qwen2"])
    out = tmp_path_factory.mktemp("good")
    tiny_models.save_checkpoint(tiny_models.make_model(cfg, seed=1), cfg, out, bits=4, group_size=64)
    return out


def run_generate(sanctum_bin, model_dir):
    return subprocess.run([sanctum_bin, "generate", "--model", str(model_dir), "--prompt-ids", "1,2,3", "--max-tokens", "2"],
                          capture_output=True, text=True, timeout=120)


def copy_of(good, tmp_path):
    dst = tmp_path / "m"
    shutil.copytree(good, dst)
    return dst


def expect_error(result, *needles):
    assert result.returncode not in (0,) and result.returncode > 0, f"exit {result.returncode}: {result.stderr}"
    err = result.stderr.strip()
    assert "error" in err
    for n in needles:
        assert n in err, f"expected {n!r} in: {err}"


def rewrite_config(d, fn):
    cfg = json.loads((d / "config.json").read_text())
    fn(cfg)
    (d / "config.json").write_text(json.dumps(cfg))


def safetensors_parts(path):
    raw = path.read_bytes()
    n = struct.unpack("<Q", raw[:8])[0]
    return json.loads(raw[8:8 + n]), raw[8 + n:]


def write_safetensors(path, header, data):
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    path.write_bytes(struct.pack("<Q", len(h)) + h + data)


def test_good_checkpoint_loads(sanctum_bin, good_checkpoint):
    r = run_generate(sanctum_bin, good_checkpoint)
    assert r.returncode == 0, r.stderr
    assert len(r.stdout.strip().split(",")) == 2


@pytest.mark.parametrize("key", ["hidden_size", "num_hidden_layers", "vocab_size", "model_type", "num_attention_heads"])
def test_missing_config_key(sanctum_bin, good_checkpoint, tmp_path, key):
    d = copy_of(good_checkpoint, tmp_path)
    rewrite_config(d, lambda c: c.pop(key))
    expect_error(run_generate(sanctum_bin, d), key)


def test_unknown_model_type_names_supported_ones(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    rewrite_config(d, lambda c: c.update(model_type="gpt_neox"))
    expect_error(run_generate(sanctum_bin, d), "gpt_neox", "qwen2", "mistral")


def test_missing_config_file(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    (d / "config.json").unlink()
    expect_error(run_generate(sanctum_bin, d), "config.json")


def test_truncated_weights(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    f = d / "model.safetensors"
    raw = f.read_bytes()
    f.write_bytes(raw[: len(raw) - 1000])
    expect_error(run_generate(sanctum_bin, d), "model.safetensors")


def test_header_larger_than_file(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    f = d / "model.safetensors"
    raw = bytearray(f.read_bytes())
    raw[:8] = struct.pack("<Q", len(raw) * 4)
    f.write_bytes(bytes(raw))
    expect_error(run_generate(sanctum_bin, d), "model.safetensors")


def test_header_lies_about_offsets(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    f = d / "model.safetensors"
    header, data = safetensors_parts(f)
    name = "model.norm.weight"
    b, e = header[name]["data_offsets"]
    header[name]["data_offsets"] = [b + 10 ** 9, e + 10 ** 9]
    write_safetensors(f, header, data)
    expect_error(run_generate(sanctum_bin, d), name)


def test_unsupported_dtype(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    f = d / "model.safetensors"
    header, data = safetensors_parts(f)
    header["model.norm.weight"]["dtype"] = "F64"
    b, _ = header["model.norm.weight"]["data_offsets"]
    header["model.norm.weight"]["data_offsets"] = [b, b + 8 * header["model.norm.weight"]["shape"][0]]
    write_safetensors(f, header, data)
    expect_error(run_generate(sanctum_bin, d), "model.norm.weight")


def test_missing_tensor(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    f = d / "model.safetensors"
    header, data = safetensors_parts(f)
    del header["model.layers.1.mlp.down_proj.scales"]
    write_safetensors(f, header, data)
    (d / "model.safetensors.index.json").unlink()
    expect_error(run_generate(sanctum_bin, d), "model.layers.1.mlp.down_proj")


def test_extra_tensor(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    f = d / "model.safetensors"
    header, data = safetensors_parts(f)
    header["model.layers.9.surprise.weight"] = dict(header["model.norm.weight"])
    write_safetensors(f, header, data)
    (d / "model.safetensors.index.json").unlink()
    expect_error(run_generate(sanctum_bin, d), "model.layers.9.surprise.weight")


def test_shape_mismatch(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    rewrite_config(d, lambda c: c.update(intermediate_size=c["intermediate_size"] * 2))
    expect_error(run_generate(sanctum_bin, d), "mlp")


def test_index_names_missing_shard(sanctum_bin, good_checkpoint, tmp_path):
    d = copy_of(good_checkpoint, tmp_path)
    idx = json.loads((d / "model.safetensors.index.json").read_text())
    first = sorted(idx["weight_map"])[0]
    idx["weight_map"][first] = "model-00002-of-00002.safetensors"
    (d / "model.safetensors.index.json").write_text(json.dumps(idx))
    expect_error(run_generate(sanctum_bin, d), "model-00002-of-00002.safetensors")


def test_prompt_id_outside_vocab(sanctum_bin, good_checkpoint):
    r = subprocess.run([sanctum_bin, "generate", "--model", str(good_checkpoint), "--prompt-ids", "1,99999999"],
                       capture_output=True, text=True, timeout=60)
    expect_error(r, "99999999")
