"""Drift against an install: clean right after install; a hand-edited unit, a changed setting, a
deleted script, a stray drop-in and a stopped expected unit are each reported, with the alert hook
fired; `sanctum-deploy verify` runs the same check interactively; re-installing repairs files."""
from __future__ import annotations

import json
import subprocess

from deploy_harness import run_script
from sanctum_env import env_of


def drift(inst, *extra):
    return run_script("sanctum-drift", *inst.drift_args(), "--alert-cmd", f"cat >> {inst.checkout / 'drift-alerts'}",
                      *extra)


def drifted(record) -> dict[str, str]:
    return {d["path"]: d["why"] for d in record["drifted"]}


def test_fresh_install_has_no_drift(installed):
    rc, out, err = drift(installed)
    assert rc == 0, (out, err)
    assert out[0]["outcome"] == "ok" and out[0]["files_checked"] > 30 and out[0]["inactive_units"] == []


def test_modified_files_are_reported_and_alerted(installed):
    unit = installed.unit_dir / "sanctum.service"
    unit.write_text(unit.read_text().replace("ProtectSystem=strict", "ProtectSystem=full"))
    env = installed.etc / "watchers/main.env"
    env.write_text(env.read_text().replace("SANCTUM_GUARDIAN_FAILS_BEFORE_RESTART=3",
                                           "SANCTUM_GUARDIAN_FAILS_BEFORE_RESTART=1"))
    (installed.prefix / "bin/sanctum-canary").unlink()
    stray = installed.unit_dir / "sanctum.service.d/override.conf"
    stray.write_text("[Service]\nExecStart=\nExecStart=/bin/true\n")
    manifest = installed.etc / "manifests/default.manifest.sha256"
    manifest.write_text(manifest.read_text().replace("a", "b", 1))

    rc, out, err = drift(installed)
    assert rc == 1 and out[0]["level"] == "error" and out[0]["outcome"] == "drift"
    assert drifted(out[0]) == {str(unit): "modified", str(env): "modified",
                               str(installed.prefix / "bin/sanctum-canary"): "missing",
                               str(stray): "not in the checkout", str(manifest): "modified"}
    alert = json.loads((installed.checkout / "drift-alerts").read_text())
    assert "5 files differ" in alert["summary"]

    # install puts the checkout's files back; the stray drop-in is the operator's to remove.
    rc, _, err = installed.deploy("install", "--no-create-user")
    assert rc == 0, err
    rc, out, _ = drift(installed)
    assert drifted(out[0]) == {str(stray): "not in the checkout"}
    stray.unlink()
    assert drift(installed)[0] == 0


def test_inactive_expected_unit_is_drift(installed):
    subprocess.run(installed.systemctl.split() + ["stop", "sanctum-canary@main.timer"], check=True)
    rc, out, _ = drift(installed)
    assert rc == 1 and out[0]["drifted"] == []
    assert out[0]["inactive_units"] == [{"unit": "sanctum-canary@main.timer", "state": "inactive"}]


def test_checkout_change_not_yet_installed_is_drift(installed):
    """The checkout is the truth: a committed change that was never installed shows up too."""
    canonical = installed.checkout / "deploy/env/sanctum.env"
    canonical.write_text(canonical.read_text().replace("SANCTUM_MEMORY_MAX=4G", "SANCTUM_MEMORY_MAX=6G"))
    rc, out, _ = drift(installed)
    assert rc == 1
    assert drifted(out[0]) == {str(installed.etc / "sanctum.env"): "modified",
                               str(installed.unit_dir / "sanctum.service.d/10-memory.conf"): "modified",
                               str(installed.unit_dir / "sanctum-fallback.service.d/10-memory.conf"): "modified"}


def test_verify_runs_drift_interactively(installed):
    rc, out, err = installed.deploy("verify")
    assert rc == 0 and "0 drifted, 0 expected units not active" in err
    (installed.etc / "drift.env").write_text("# edited in place\n")
    rc, out, err = installed.deploy("verify")
    assert rc == 1 and "DRIFT  modified" in err and str(installed.etc / "drift.env") in err


def test_drift_reads_its_roots_from_install_env(installed):
    """What the timer does: no flags, only the environment systemd builds from install.env."""
    env = env_of(installed.etc / "install.env")
    env.update(SANCTUM_SYSTEMCTL=installed.systemctl, SANCTUM_ALERT_CMD="true")
    rc, out, _ = run_script("sanctum-drift", env=env)
    assert rc == 0 and out[0]["canonical"] == str(installed.checkout / "deploy")


def test_missing_checkout_is_a_configuration_error(tmp_path):
    rc, out, _ = run_script("sanctum-drift", "--canonical", str(tmp_path / "nowhere"))
    assert rc == 2 and "not a sanctum deploy/ directory" in out[0]["error"]
