"""The manifest gate in `sanctum serve`: a signed manifest is verified before any weight is read and
before any socket is bound. Every tamper case exits non-zero with a message that names the file (or
says plainly that the signature failed), loads no model, and never opens the port: a probe connects
to it every few milliseconds for the whole life of the process."""
from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

import server_harness as sh
import tls_helpers as th
from server_harness import MODEL


@pytest.fixture(scope="module")
def signed(sanctum_bin, tiny_model, tmp_path_factory):
    """A pristine copy of the tiny model with a manifest signed by `key`, and a second, unrelated key."""
    root = tmp_path_factory.mktemp("gate")
    model = root / "model"
    shutil.copytree(tiny_model, model)
    for name, key in (("key", root / "signer.key"), ("other", root / "other.key")):
        r = th.run(sanctum_bin, "manifest", "keygen", "--out", str(key))
        assert r.returncode == 0, r.stderr
    manifest = root / "model.sha256"
    r = th.run(sanctum_bin, "manifest", "generate", str(model), "--out", str(manifest))
    assert r.returncode == 0, r.stderr
    r = th.run(sanctum_bin, "manifest", "sign", "--key", str(root / "signer.key"), str(manifest))
    assert r.returncode == 0, r.stderr
    return {"root": root, "model": model, "manifest": manifest, "pub": root / "signer.key.pub",
            "key": root / "signer.key", "other_key": root / "other.key", "other_pub": root / "other.key.pub"}


def case_copy(signed, tmp_path) -> dict:
    """A private copy of the signed model and manifest that a test may tamper with."""
    model = tmp_path / "model"
    shutil.copytree(signed["model"], model)
    manifest = tmp_path / "model.sha256"
    shutil.copy(signed["manifest"], manifest)
    shutil.copy(str(signed["manifest"]) + ".sig", str(manifest) + ".sig")
    return {**signed, "model": model, "manifest": manifest}


def serve_must_refuse(sanctum_bin, c: dict, pubkey: Path | None = None, extra: list[str] | None = None):
    """Runs serve to completion while watching its port; returns (exit code, stderr)."""
    port = sh.free_port()
    args = [sanctum_bin, "serve", "--model", f"{MODEL}={c['model']}", "--port", str(port), "--threads", "1",
            "--manifest", str(c["manifest"])]
    if pubkey is not None:
        args += ["--manifest-pubkey", str(pubkey)]
    watch = th.PortWatch(port)
    try:
        r = subprocess.run(args + (extra or []), capture_output=True, text=True, timeout=60)
    finally:
        watch.stop()
    assert watch.tries > 0
    assert not watch.opened, "the port accepted a connection while the gate was failing"
    assert th.connect_refused(port)
    assert r.returncode != 0
    assert "model loaded" not in r.stderr and "listening" not in r.stderr
    return r.returncode, r.stderr


def test_a_signed_untouched_model_serves_and_reports_both_startup_phases(sanctum_bin, signed, tmp_path):
    s = th.Serve(sanctum_bin, signed["model"], tmp_path / "ok.log",
                 ["--manifest", str(signed["manifest"]), "--manifest-pubkey", str(signed["pub"])])
    try:
        status, _, body = sh.request(s.port, "GET", "/metrics")
        assert status == 200
        text = body.decode()
        assert sh.metric_value(text, "sanctum_mlx_startup_seconds_count", {"phase": "manifest_verify"}) == 1
        assert sh.metric_value(text, "sanctum_mlx_startup_seconds_count", {"phase": "model_load"}) == 1
        order = [r["msg"] for r in s.records() if r.get("msg") in ("manifest verified", "model loaded", "listening")]
        assert order == ["manifest verified", "model loaded", "listening"]
        verified = next(r for r in s.records() if r.get("msg") == "manifest verified")
        assert verified["signature"].startswith("ed25519:") and int(verified["files"]) >= 4
        status, _, _ = sh.request(s.port, "POST", "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=2))
        assert status == 200
    finally:
        assert s.terminate() == 0


def flip_byte(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def test_one_flipped_byte_in_a_shard_is_refused(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    shard = c["model"] / "model.safetensors"
    flip_byte(shard, shard.stat().st_size // 2)
    _, err = serve_must_refuse(sanctum_bin, c, c["pub"])
    assert "model verification FAILED" in err and "model.safetensors" in err


def test_a_truncated_shard_is_refused(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    shard = c["model"] / "model.safetensors"
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size - 4096)
    _, err = serve_must_refuse(sanctum_bin, c, c["pub"])
    assert "model verification FAILED" in err and "model.safetensors" in err


def test_an_added_unlisted_shard_is_refused(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    shutil.copy(c["model"] / "model.safetensors", c["model"] / "model-00002-of-00002.safetensors")
    _, err = serve_must_refuse(sanctum_bin, c, c["pub"])
    assert "model verification FAILED" in err and "model-00002-of-00002.safetensors" in err


def test_an_edited_manifest_line_fails_the_signature(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    lines = c["manifest"].read_text().splitlines(keepends=True)
    i = next(i for i, line in enumerate(lines) if line.rstrip().endswith("model.safetensors"))
    digest = lines[i][:64]
    lines[i] = ("0" if digest[0] != "0" else "1") + lines[i][1:]
    c["manifest"].write_text("".join(lines))
    _, err = serve_must_refuse(sanctum_bin, c, c["pub"])
    assert "signature verification FAILED" in err and str(c["manifest"]) in err


def test_an_edited_manifest_line_fails_the_hashes_when_unsigned(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    text = c["manifest"].read_text()
    digest = next(line for line in text.splitlines() if line.endswith("config.json"))[:64]
    c["manifest"].write_text(text.replace(digest, "f" * 64 if digest != "f" * 64 else "e" * 64))
    _, err = serve_must_refuse(sanctum_bin, c, None)
    assert "model verification FAILED" in err and "config.json" in err


def test_a_manifest_signed_by_another_key_is_refused(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    r = th.run(sanctum_bin, "manifest", "sign", "--key", str(c["other_key"]), str(c["manifest"]), "--out",
               str(c["manifest"]) + ".sig")
    if r.returncode != 0:  # sign refuses to overwrite: write the other key's signature beside it instead
        other_sig = tmp_path / "other.sig"
        r = th.run(sanctum_bin, "manifest", "sign", "--key", str(c["other_key"]), str(c["manifest"]), "--out", str(other_sig))
        assert r.returncode == 0, r.stderr
        shutil.copy(other_sig, str(c["manifest"]) + ".sig")
    _, err = serve_must_refuse(sanctum_bin, c, c["pub"])
    assert "signature verification FAILED" in err and str(c["manifest"]) in err


def test_the_wrong_public_key_is_refused(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    _, err = serve_must_refuse(sanctum_bin, c, c["other_pub"])
    assert "signature verification FAILED" in err and str(c["other_pub"]) in err


def sign_with_openssl(seed_path: Path, message: Path, sig_path: Path, tmp_path: Path) -> None:
    """Signs whatever bytes `message` holds (`sanctum manifest sign` refuses a manifest with a '..'
    entry, so an attacker's own tooling is simulated): the raw seed wrapped as PKCS#8 for openssl."""
    der = tmp_path / "seed.der"
    der.write_bytes(bytes.fromhex("302e020100300506032b657004220420") + seed_path.read_bytes())
    r = subprocess.run(["openssl", "pkeyutl", "-sign", "-rawin", "-keyform", "DER", "-inkey", str(der), "-in", str(message),
                        "-out", str(sig_path)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and sig_path.stat().st_size == 64, r.stderr


def add_dotdot_entry(c: dict, tmp_path: Path) -> None:
    outside = tmp_path / "outside.bin"
    outside.write_bytes(b"not part of the model\n")
    line = f"{hashlib.sha256(outside.read_bytes()).hexdigest()}  ../outside.bin\n"
    c["manifest"].write_text(c["manifest"].read_text() + line)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")
def test_a_dotdot_entry_is_refused_even_when_properly_signed(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    add_dotdot_entry(c, tmp_path)
    sign_with_openssl(c["key"], c["manifest"], Path(str(c["manifest"]) + ".sig"), tmp_path)
    _, err = serve_must_refuse(sanctum_bin, c, c["pub"])
    assert "signature verification FAILED" not in err  # the signature is good: the path check refuses it
    assert "../outside.bin" in err


def test_a_dotdot_entry_is_refused_in_an_unsigned_manifest(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    add_dotdot_entry(c, tmp_path)
    _, err = serve_must_refuse(sanctum_bin, c, None)
    assert "../outside.bin" in err


def test_a_signature_without_a_public_key_is_a_usage_error(sanctum_bin, signed, tmp_path):
    c = case_copy(signed, tmp_path)
    code, err = serve_must_refuse(sanctum_bin, c, None, ["--manifest-sig", str(c["manifest"]) + ".sig"])
    assert code == 2 and "public key" in err


def test_one_manifest_per_model_is_required(sanctum_bin, signed, tmp_path):
    port = sh.free_port()
    r = subprocess.run([sanctum_bin, "serve", "--model", f"a={signed['model']}", "--model", f"b={signed['model']}",
                        "--port", str(port), "--manifest", str(signed["manifest"])], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "one --manifest per --model" in r.stderr
    assert th.connect_refused(port)
