"""Fixtures for the manifest and PKI end-to-end tests: a small model directory and a signing key."""
import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from security_helpers import run  # noqa: E402


@pytest.fixture
def model_dir(tmp_path) -> Path:
    """A model directory shaped like a sharded checkpoint (random bytes stand in for weights)."""
    d = tmp_path / "model"
    d.mkdir()
    (d / "config.json").write_text('{"model_type": "qwen2"}\n')
    (d / "tokenizer.json").write_text("{}\n")
    (d / "tokenizer_config.json").write_text("{}\n")
    (d / "model-00001-of-00002.safetensors").write_bytes(os.urandom(1 << 20))
    (d / "model-00002-of-00002.safetensors").write_bytes(os.urandom(700_001))
    (d / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "model-00001-of-00002.safetensors", "b": "model-00002-of-00002.safetensors"}}\n')
    (d / "README.md").write_text("not read by a load\n")
    return d


@pytest.fixture
def signed(sanctum_bin, model_dir, tmp_path):
    """(manifest path, private key path, public key path) for model_dir, generated and signed."""
    key = tmp_path / "signing.key"
    manifest = tmp_path / "model.sha256"
    for args in (("keygen", "--out", key), ("generate", model_dir, "--out", manifest), ("sign", "--key", key, manifest)):
        r = run(sanctum_bin, "manifest", *args)
        assert r.returncode == 0, r.stderr
    return manifest, key, Path(str(key) + ".pub")
