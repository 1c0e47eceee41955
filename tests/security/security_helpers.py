"""Helpers for the manifest and PKI end-to-end tests: running sanctum, and openssl-side key formats."""
import base64
import os
import subprocess
from pathlib import Path


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
