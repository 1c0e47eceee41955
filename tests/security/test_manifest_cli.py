"""sanctum manifest end to end: cross-checked with sha256sum and openssl, and every tamper case refused
with a non-zero exit and a message that names the file."""
import hashlib
import os
import stat
import subprocess
from pathlib import Path

import pytest

from security_helpers import ed25519_pem_from_raw, openssl_sign, run


def verify(sanctum_bin, manifest, pub, model_dir, *extra):
    return run(sanctum_bin, "manifest", "verify", "--pubkey", pub, manifest, "--model", model_dir, *extra)


def resign(sanctum_bin, manifest, key):
    r = run(sanctum_bin, "manifest", "sign", "--key", key, manifest)
    assert r.returncode == 0, r.stderr


def test_generated_manifest_is_accepted_by_sha256sum(sanctum_bin, model_dir, signed):
    manifest, _, _ = signed
    r = subprocess.run(["sha256sum", "--strict", "-c", str(manifest)], cwd=model_dir, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    listed = [line.split("  ", 1)[1] for line in manifest.read_text().splitlines()]
    assert listed == sorted(listed)
    assert "README.md" not in listed and "model.safetensors.index.json" in listed and len(listed) == 6


def test_sha256sum_output_is_accepted_by_the_gate(sanctum_bin, model_dir, tmp_path):
    files = sorted(p.name for p in model_dir.iterdir() if p.name != "README.md")
    out = subprocess.run(["sha256sum", "--binary", *files], cwd=model_dir, capture_output=True, text=True, check=True).stdout
    manifest = tmp_path / "coreutils.sha256"
    manifest.write_text(out)  # '*' binary markers, as `sha256sum -b` writes them
    r = run(sanctum_bin, "manifest", "verify", manifest, "--model", model_dir)
    assert r.returncode == 0, r.stderr
    assert "NOT checked" in r.stdout


def test_signature_is_accepted_by_openssl(signed, tmp_path):
    manifest, _, pub = signed
    sig = Path(str(manifest) + ".sig")
    assert len(sig.read_bytes()) == 64 and len(pub.read_bytes()) == 32
    pem = tmp_path / "pub.pem"
    pem.write_text(ed25519_pem_from_raw(pub.read_bytes()))
    r = subprocess.run(["openssl", "pkeyutl", "-verify", "-pubin", "-inkey", str(pem), "-rawin", "-in", str(manifest), "-sigfile", str(sig)],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "Signature Verified Successfully" in r.stdout, r.stdout + r.stderr


def test_openssl_made_keys_work_with_sanctum(sanctum_bin, model_dir, signed, tmp_path):
    manifest, _, _ = signed
    key, pub = tmp_path / "ossl.pem", tmp_path / "ossl.pub.pem"
    subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", str(key)], check=True)
    os.chmod(key, 0o600)
    subprocess.run(["openssl", "pkey", "-in", str(key), "-pubout", "-out", str(pub)], check=True)
    resign(sanctum_bin, manifest, key)
    r = verify(sanctum_bin, manifest, pub, model_dir)
    assert r.returncode == 0, r.stderr


def test_intact_model_verifies_and_reports_throughput(sanctum_bin, model_dir, signed):
    manifest, _, pub = signed
    r = verify(sanctum_bin, manifest, pub, model_dir)
    assert r.returncode == 0, r.stderr
    assert "signature OK" in r.stdout and "hashes OK: 6 files" in r.stdout and "GB/s" in r.stdout


def test_keygen_writes_a_private_seed_and_refuses_to_overwrite(sanctum_bin, signed):
    _, key, pub = signed
    assert stat.S_IMODE(key.stat().st_mode) == 0o600 and key.stat().st_size == 32
    r = run(sanctum_bin, "manifest", "keygen", "--out", key)
    assert r.returncode != 0 and "already exists" in r.stderr and "--force" in r.stderr


def test_group_readable_private_key_is_refused(sanctum_bin, signed):
    manifest, key, _ = signed
    os.chmod(key, 0o644)
    r = run(sanctum_bin, "manifest", "sign", "--key", key, manifest)
    assert r.returncode == 1 and "chmod 600" in r.stderr and str(key) in r.stderr


def test_seed_that_does_not_match_its_public_key_is_refused(sanctum_bin, signed, tmp_path):
    """The key that wasn't anywhere: a seed that derives a different public key is a different signer."""
    manifest, key, pub = signed
    other = tmp_path / "other.key"
    assert run(sanctum_bin, "manifest", "keygen", "--out", other).returncode == 0
    Path(str(other) + ".pub").write_bytes(pub.read_bytes())  # pair the wrong seed with our public key
    r = run(sanctum_bin, "manifest", "sign", "--key", other, manifest)
    assert r.returncode == 1 and "derives public key" in r.stderr
    r = run(sanctum_bin, "manifest", "pubkey", "--key", key)
    assert r.returncode == 0 and pub.read_bytes().hex() in r.stdout


# --- tamper cases: each one must exit non-zero and name the file ----------------------------------

def flip_byte(model_dir, manifest, key, tmp_path):
    p = model_dir / "model-00002-of-00002.safetensors"
    data = bytearray(p.read_bytes())
    data[len(data) // 2] ^= 0x01
    p.write_bytes(bytes(data))
    return "model-00002-of-00002.safetensors"


def truncate_shard(model_dir, manifest, key, tmp_path):
    p = model_dir / "model-00001-of-00002.safetensors"
    os.truncate(p, p.stat().st_size - 1)
    return "model-00001-of-00002.safetensors"


def add_unlisted_shard(model_dir, manifest, key, tmp_path):
    (model_dir / "model-00003-of-00003.safetensors").write_bytes(b"\0" * 64)
    return "model-00003-of-00003.safetensors"


def delete_shard(model_dir, manifest, key, tmp_path):
    (model_dir / "model-00001-of-00002.safetensors").unlink()
    return "model-00001-of-00002.safetensors"


def edit_manifest_line(model_dir, manifest, key, tmp_path):
    lines = manifest.read_text().splitlines(keepends=True)
    lines[1] = ("0" if lines[1][0] != "0" else "1") + lines[1][1:]
    manifest.write_text("".join(lines))
    return str(manifest)


def append_entry_and_resign(entry):
    def tamper(model_dir, manifest, key, tmp_path):
        with open(manifest, "a") as f:
            f.write(hashlib.sha256(b"x").hexdigest() + "  " + entry + "\n")
        return ("resign", entry)
    return tamper


def symlink_out_of_dir(model_dir, manifest, key, tmp_path):
    outside = tmp_path / "outside.safetensors"
    outside.write_bytes(b"weights from elsewhere")
    (model_dir / "model-00003-of-00003.safetensors").symlink_to(outside)
    with open(manifest, "a") as f:
        f.write(hashlib.sha256(outside.read_bytes()).hexdigest() + "  model-00003-of-00003.safetensors\n")
    return ("resign", "model-00003-of-00003.safetensors")


TAMPERS = {
    "flipped_byte": (flip_byte, "hash mismatch"),
    "truncated_shard": (truncate_shard, "hash mismatch"),
    "added_unlisted_shard": (add_unlisted_shard, "unlisted file"),
    "deleted_shard": (delete_shard, "missing file"),
    "edited_manifest_line": (edit_manifest_line, "signature verification FAILED"),
    "dotdot_entry": (append_entry_and_resign("../signing.key"), "leaves the model directory"),
    "absolute_path": (append_entry_and_resign("/etc/hostname"), "absolute path"),
    "symlink_out_of_dir": (symlink_out_of_dir, "escapes the model directory"),
}


@pytest.mark.parametrize("case", sorted(TAMPERS))
def test_tampering_is_refused_naming_the_file(sanctum_bin, model_dir, signed, tmp_path, case):
    manifest, key, pub = signed
    tamper, expected = TAMPERS[case]
    named = tamper(model_dir, manifest, key, tmp_path)
    if isinstance(named, tuple):
        # The tamper edits the manifest and re-signs it with the real key (an insider, or a stolen key):
        # openssl signs what `sanctum manifest sign` would refuse, and the gate must still refuse it.
        openssl_sign(key, manifest, tmp_path)
        named = named[1]
    r = verify(sanctum_bin, manifest, pub, model_dir)
    assert r.returncode == 1, r.stdout + r.stderr
    assert expected in r.stderr, r.stderr
    assert named in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_manifest_signed_by_another_key_is_refused(sanctum_bin, model_dir, signed, tmp_path):
    manifest, _, pub = signed
    other = tmp_path / "intruder.key"
    assert run(sanctum_bin, "manifest", "keygen", "--out", other).returncode == 0
    resign(sanctum_bin, manifest, other)
    r = verify(sanctum_bin, manifest, pub, model_dir)
    assert r.returncode == 1 and r.stderr.count("signature verification FAILED") == 1
    assert str(manifest) in r.stderr and "not signed by this key" in r.stderr


def test_wrong_public_key_is_refused(sanctum_bin, model_dir, signed, tmp_path):
    manifest, _, _ = signed
    other = tmp_path / "unrelated.key"
    assert run(sanctum_bin, "manifest", "keygen", "--out", other).returncode == 0
    r = verify(sanctum_bin, manifest, Path(str(other) + ".pub"), model_dir)
    assert r.returncode == 1 and "signature verification FAILED" in r.stderr and "unrelated.key.pub" in r.stderr


def test_sign_refuses_a_manifest_the_gate_would_reject(sanctum_bin, signed):
    manifest, key, _ = signed
    with open(manifest, "a") as f:
        f.write(hashlib.sha256(b"x").hexdigest() + "  ../escape\n")
    r = run(sanctum_bin, "manifest", "sign", "--key", key, manifest)
    assert r.returncode == 1 and "line 7" in r.stderr and "../escape" in r.stderr


def test_signature_only_verify_without_model(sanctum_bin, signed):
    manifest, _, pub = signed
    r = run(sanctum_bin, "manifest", "verify", "--pubkey", pub, manifest)
    assert r.returncode == 0 and "signature OK" in r.stdout


def test_missing_signature_file_is_named(sanctum_bin, model_dir, signed):
    manifest, _, pub = signed
    Path(str(manifest) + ".sig").unlink()
    r = verify(sanctum_bin, manifest, pub, model_dir)
    assert r.returncode == 1 and str(manifest) + ".sig" in r.stderr


def test_bad_usage_exits_2(sanctum_bin):
    assert run(sanctum_bin, "manifest", "frobnicate").returncode == 2
    assert run(sanctum_bin, "manifest", "sign", "x").returncode == 2
    assert run(sanctum_bin, "manifest", "verify", "m").returncode == 2
