"""Fixtures for the manifest and PKI end-to-end tests: a small model directory and a signing key."""
import base64
import os
import subprocess
from pathlib import Path

import pytest


def run(bin_path, *args, cwd=None):
    """Runs `sanctum ARGS`, returns the CompletedProcess (text)."""
    return subprocess.run([bin_path, *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=120)


def ed25519_pem_from_raw(raw: bytes) -> str:
    """SubjectPublicKeyInfo PEM for a raw 32-byte Ed25519 public key (RFC 8410), for openssl."""
    assert len(raw) == 32
    der = bytes.fromhex("302a300506032b6570032100") + raw
    return "-----BEGIN PUBLIC KEY-----\n" + base64.b64encode(der).decode() + "\n-----END PUBLIC KEY-----\n"


def ed25519_private_pem_from_seed(seed: bytes) -> str:
    """PKCS#8 PEM for a raw 32-byte Ed25519 seed (RFC 8410), for openssl."""
    assert len(seed) == 32
    der = bytes.fromhex("302e020100300506032b657004220420") + seed
    return "-----BEGIN PRIVATE KEY-----\n" + base64.b64encode(der).decode() + "\n-----END PRIVATE KEY-----\n"


def openssl_sign(seed_path: Path, manifest: Path, workdir: Path) -> None:
    """Signs manifest -> manifest.sig with openssl (independent of sanctum, and willing to sign anything)."""
    pem = workdir / "openssl-signer.pem"
    pem.write_text(ed25519_private_pem_from_seed(seed_path.read_bytes()))
    os.chmod(pem, 0o600)
    subprocess.run(["openssl", "pkeyutl", "-sign", "-inkey", str(pem), "-rawin", "-in", str(manifest),
                    "-out", str(manifest) + ".sig"], check=True, capture_output=True)


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
