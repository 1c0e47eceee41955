"""The promote-only fallback: sanctum-integrity leaves an intact seat alone; when the seat's binary
is corrupt or missing it stops the seat (freeing its memory) and starts the fallback seat, which
then answers on the same port with the previous release's separate binary; it alerts once per
incident; an upgrade that repairs the binary brings the primary back and the fallback stops."""
from __future__ import annotations

import json
import os
from pathlib import Path

from deploy_harness import answers, run_script, wait_answering


def integrity(inst, state):
    return run_script("sanctum-integrity", "--prefix", str(inst.prefix), "--systemctl", inst.systemctl,
                      "--state-dir", str(state), "--alert-cmd", f"cat >> {inst.checkout / 'integrity-alerts'}")


def alerts(inst) -> list[dict]:
    path = inst.checkout / "integrity-alerts"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def corrupt_current(inst, how: str) -> None:
    binary = inst.prefix / "current" / "sanctum"
    target = binary.resolve()
    if how == "missing":
        target.unlink()
    else:  # replaced by other bytes (a running executable cannot be written in place)
        tmp = target.with_name("garbage")
        tmp.write_bytes(os.urandom(4096))
        tmp.chmod(0o755)
        tmp.replace(target)


def pid_exe(inst, unit: str) -> str:
    pid = int((inst.fake_state / f"{unit}.pid").read_text())
    return os.path.realpath(f"/proc/{pid}/exe")


def test_intact_binary_changes_nothing(installed, tmp_path):
    before = len(installed.calls())
    rc, out, _ = integrity(installed, tmp_path / "i")
    assert rc == 0 and out[0]["outcome"] == "ok" and out[0]["check"] == "ok"
    assert not any(c.startswith(("stop", "start")) for c in installed.calls()[before:])


def test_corrupt_binary_promotes_the_fallback(installed, sanctum_bin, tmp_path):
    corrupt_current(installed, "corrupt")
    rc, out, _ = integrity(installed, tmp_path / "i")
    assert rc == 1 and out[0]["outcome"] == "fallback_promoted" and out[0]["check"] == "corrupt"
    calls = installed.calls()
    assert calls.index("stop sanctum.service") < calls.index("start sanctum-fallback.service")
    wait_answering(installed.port)  # the fallback loads its model first; a loaded machine is slower
    assert pid_exe(installed, "sanctum-fallback.service") == os.path.realpath(installed.prefix / "fallback/sanctum")
    assert len(alerts(installed)) == 1 and "promoted" in alerts(installed)[0]["summary"]

    rc, out, _ = integrity(installed, tmp_path / "i")  # two minutes later: same incident, no new alert
    assert out[0]["outcome"] == "fallback_serving" and len(alerts(installed)) == 1

    # Re-installing the same release through upgrade repairs the file and moves the seat back;
    # starting sanctum.service stops the fallback (Conflicts=).
    rc, out, err = installed.deploy("upgrade", "--binary", sanctum_bin, "--shadow-port", str(installed.shadow_port))
    assert rc == 0, err
    assert (installed.fake_state / "sanctum-fallback.service.pid").exists() is False
    assert pid_exe(installed, "sanctum.service") == os.path.realpath(installed.prefix / "current/sanctum")
    rc, out, _ = integrity(installed, tmp_path / "i")
    assert rc == 0 and out[0]["outcome"] == "ok"


def test_missing_binary_promotes_the_fallback(installed, tmp_path):
    corrupt_current(installed, "missing")
    rc, out, _ = integrity(installed, tmp_path / "i")
    assert out[0]["outcome"] == "fallback_promoted" and out[0]["check"] == "missing"
    wait_answering(installed.port)


def test_no_usable_binary_stops_nothing(installed, tmp_path):
    corrupt_current(installed, "corrupt")
    (installed.prefix / "fallback/sanctum").write_bytes(b"\x7fELF truncated")
    before = len(installed.calls())
    rc, out, _ = integrity(installed, tmp_path / "i")
    assert rc == 1 and out[0]["outcome"] == "no_usable_binary" and out[0]["fallback_check"] == "corrupt"
    assert not any(c.startswith(("stop", "start")) for c in installed.calls()[before:])
    assert answers(installed.port)  # the running process keeps serving from memory meanwhile
    assert "no usable binary" in alerts(installed)[0]["summary"]


def test_fallback_unit_is_promote_only(installed):
    text = (installed.unit_dir / "sanctum-fallback.service").read_text()
    assert "[Install]" not in text and "Conflicts=sanctum.service" in text
    assert "sanctum-fallback.service" not in Path(installed.etc / "drift.env").read_text()
