"""The trust gate as deployed: the committed manifest matches the embedded model, the installed seat
starts through it, and the runbook's signing and key-rotation steps work end to end (sign, deploy
the public key, restart; rotate: new key, re-sign, archive the old artifacts, restart)."""
from __future__ import annotations

import json
import shutil
import subprocess

from deploy_harness import DEPLOY, ROOT, answers


def test_committed_manifest_matches_the_default_model(sanctum_bin):
    r = subprocess.run([sanctum_bin, "manifest", "verify", str(DEPLOY / "manifests/default.manifest.sha256"),
                        "--model", str(ROOT / "models/default/mlx-4bit")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr + r.stdout + "\nregenerate: sanctum manifest generate models/default/mlx-4bit " \
                                                    "--out deploy/manifests/default.manifest.sha256"


def seat_log_records(inst) -> list[dict]:
    out = []
    for line in (inst.fake_state / "sanctum.service.log").read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            pass
    return out


def test_installed_seat_starts_through_the_manifest_gate(installed):
    verified = [r for r in seat_log_records(installed) if r.get("msg") == "manifest verified"]
    assert verified and verified[-1]["files"] == "7"


def sign_and_deploy(inst, sanctum_bin, key):
    """Runbook 'Sign manifests': sign in the checkout, commit signature and public key, install, restart."""
    manifests = inst.checkout / "deploy/manifests"
    subprocess.run([sanctum_bin, "manifest", "sign", "--key", str(key), str(manifests / "default.manifest.sha256")],
                   check=True, capture_output=True)
    shutil.copy(f"{key}.pub", manifests / "manifest-signing.pub")
    env = inst.checkout / "deploy/env/sanctum.env"
    text = env.read_text()
    if "SANCTUM_MANIFEST_SIG_FLAGS=\n" in text:
        env.write_text(text.replace(
            "SANCTUM_MANIFEST_SIG_FLAGS=\n",
            "SANCTUM_MANIFEST_SIG_FLAGS=--manifest-sig /etc/sanctum/manifests/default.manifest.sha256.sig "
            "--manifest-pubkey /etc/sanctum/manifests/manifest-signing.pub\n"))
    rc, _, err = inst.deploy("install", "--no-create-user")
    assert rc == 0, err
    return inst.deploy("restart")


def test_signing_and_key_rotation(installed, sanctum_bin, tmp_path):
    keys = tmp_path / "keys"
    keys.mkdir()
    subprocess.run([sanctum_bin, "manifest", "keygen", "--out", str(keys / "k1")], check=True, capture_output=True)
    rc, out, err = sign_and_deploy(installed, sanctum_bin, keys / "k1")
    assert rc == 0, err
    assert [r for r in seat_log_records(installed) if r.get("msg") == "manifest verified"][-1]["signature"].startswith("ed25519:")

    # Rotation: archive the old signature and key, sign with a new key, deploy both together.
    retired = tmp_path / "retired"
    retired.mkdir()
    manifests = installed.checkout / "deploy/manifests"
    for name in ("default.manifest.sha256.sig", "manifest-signing.pub"):
        shutil.copy(manifests / name, retired / name)
    subprocess.run([sanctum_bin, "manifest", "keygen", "--out", str(keys / "k2")], check=True, capture_output=True)
    rc, out, err = sign_and_deploy(installed, sanctum_bin, keys / "k2")
    assert rc == 0, err
    assert (manifests / "manifest-signing.pub").read_bytes() != (retired / "manifest-signing.pub").read_bytes()
    assert answers(installed.port)

    # A signature the deployed key does not accept keeps the seat from binding at all.
    shutil.copy(retired / "default.manifest.sha256.sig", installed.etc / "manifests/default.manifest.sha256.sig")
    rc, out, err = installed.deploy("restart")
    assert rc == 1 and out[0]["outcome"] == "failed"
    assert not answers(installed.port)
