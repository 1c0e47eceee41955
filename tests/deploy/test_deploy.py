"""sanctum-deploy into a temporary prefix, with a fake systemctl running the installed units' real
command lines: install is idempotent; an upgrade to a broken binary never takes the seat down (the
shadow catches it) or rolls back by itself (when only the seat fails); a good binary ends up serving
after a stop+start whose downtime is measured; rollback returns to the previous release."""
from __future__ import annotations

import json
import os
import shutil
import statistics
import threading
import time
from pathlib import Path

import pytest

from deploy_harness import answers, free_port, get_json

RELEASE_ID_LEN = 16


class Prober(threading.Thread):
    """Polls the seat every 20 ms; counts answers and misses."""

    def __init__(self, port: int):
        super().__init__(daemon=True)
        self.port, self.ok, self.missed, self.stopping = port, 0, 0, threading.Event()

    def run(self):
        while not self.stopping.is_set():
            if answers(self.port):
                self.ok += 1
            else:
                self.missed += 1
            time.sleep(0.02)

    def finish(self):
        self.stopping.set()
        self.join()


def seat_exe(inst) -> str:
    pid = int((inst.fake_state / "sanctum.service.pid").read_text())
    return os.path.realpath(f"/proc/{pid}/exe")


def status(inst) -> dict:
    rc, out, err = inst.deploy("status")
    assert rc == 0, err
    return out[0]


def new_release(sanctum_bin: str, dest: Path, marker: str) -> Path:
    """A different release of the same program: trailing bytes change its SHA-256, not its code."""
    shutil.copy(sanctum_bin, dest)
    with open(dest, "ab") as f:
        f.write(marker.encode())
    return dest


def script(dest: Path, body: str) -> Path:
    dest.write_text("#!/bin/sh\n" + body + "\n")
    dest.chmod(0o755)
    return dest


def seat_calls(inst) -> list[str]:
    return [c for c in inst.calls() if c.endswith(" sanctum.service") and c.split()[0] in
            ("start", "stop", "restart", "reload")]


def test_install_is_idempotent(installed, sanctum_bin):
    first_calls = len(installed.calls())
    rc, out, err = installed.deploy("install", "--binary", sanctum_bin, "--no-create-user")
    assert rc == 0, err
    assert out[0]["files"]["created"] == 0 and out[0]["files"]["updated"] == 0 and out[0]["files"]["unchanged"] > 40
    assert out[0]["started"] == [] and out[0]["units_changed"] is False
    later = installed.calls()[first_calls:]
    assert "daemon-reload" not in later and not any(c.startswith(("start", "stop", "restart")) for c in later)


def test_install_writes_exactly_the_checkout_files(installed):
    canonical = (installed.checkout / "deploy/systemd/sanctum.service").read_text()
    deployed = (installed.unit_dir / "sanctum.service").read_text()
    assert deployed == canonical.replace("/opt/sanctum", str(installed.prefix)).replace("/etc/sanctum", str(installed.etc))
    assert (installed.prefix / "bin/sanctum-guardian").read_bytes() == \
        (installed.checkout / "deploy/bin/sanctum-guardian").read_bytes()
    assert os.stat(installed.etc / "sanctum.env").st_mode & 0o777 == 0o640
    assert os.access(installed.prefix / "bin/sanctum-guardian", os.X_OK)


def test_install_updates_only_what_changed_and_reloads_systemd(installed, sanctum_bin):
    unit = installed.checkout / "deploy/systemd/sanctum.service"
    unit.write_text(unit.read_text().replace("RestartSec=5", "RestartSec=7"))
    before = len(installed.calls())
    rc, out, err = installed.deploy("install", "--no-create-user")
    assert rc == 0, err
    assert out[0]["files"]["updated"] == 1 and out[0]["units_changed"] is True
    assert "updated " + str(installed.unit_dir / "sanctum.service") in err
    assert "sanctum-deploy restart" in err  # the running seat needs a stop+start to apply it
    assert "daemon-reload" in installed.calls()[before:]


def test_install_refuses_to_switch_binaries(installed, sanctum_bin, tmp_path):
    other = new_release(sanctum_bin, tmp_path / "sanctum-next", "next")
    rc, out, err = installed.deploy("install", "--binary", str(other), "--no-create-user")
    assert rc == 1 and "use `sanctum-deploy upgrade" in err


@pytest.mark.parametrize("kind", ["exits-1", "truncated", "not-executable"])
def test_broken_binary_never_reaches_the_seat(installed, sanctum_bin, tmp_path, kind):
    before = status(installed)["current"]
    exe_before = seat_exe(installed)
    if kind == "exits-1":
        bad = script(tmp_path / "sanctum-bad", "echo 'broken build' >&2; exit 1")
    elif kind == "truncated":
        bad = tmp_path / "sanctum-bad"
        bad.write_bytes(Path(sanctum_bin).read_bytes()[:200_000])
        bad.chmod(0o755)
    else:
        bad = new_release(sanctum_bin, tmp_path / "sanctum-bad", "x")
        bad.chmod(0o644)
    calls_before = len(installed.calls())
    prober = Prober(installed.port)
    prober.start()
    rc, out, err = installed.deploy("upgrade", "--binary", str(bad), "--shadow-port", str(installed.shadow_port))
    time.sleep(0.1)
    prober.finish()
    assert rc == 1 and out[0]["outcome"] == "error", err
    assert "nothing changed" in err or "the seat was not touched" in err
    assert prober.missed == 0 and prober.ok > 0  # the seat kept answering throughout
    assert status(installed)["current"] == before and seat_exe(installed) == exe_before
    assert not any(c.startswith(("stop", "start", "restart")) for c in installed.calls()[calls_before:])


def test_binary_that_fails_only_in_the_seat_is_rolled_back(installed, sanctum_bin, tmp_path):
    """Passes the shadow (it execs a good binary there) but exits on the seat's port: the
    post-flight catches it and the previous release is restored automatically."""
    good = new_release(sanctum_bin, tmp_path / "sanctum-real", "real")
    bad = script(tmp_path / "sanctum-seat-fails",
                 f'case " $* " in *" --port {installed.port} "*) echo "cannot bind" >&2; exit 1;; esac\n'
                 f'exec {good} "$@"')
    before = status(installed)
    rc, out, err = installed.deploy("upgrade", "--binary", str(bad), "--shadow-port", str(installed.shadow_port))
    assert rc == 1 and out[0]["outcome"] == "rolled_back", err
    assert "exited during start-up" in out[0]["error"]
    after = status(installed)
    assert after["current"] == before["current"] and after["previous"] == before["previous"]
    assert answers(installed.port)
    assert seat_exe(installed) == os.path.realpath(installed.prefix / "releases" / before["current"] / "sanctum")
    assert seat_calls(installed)[-4:] == ["stop sanctum.service", "start sanctum.service"] * 2
    history = [json.loads(line) for line in (installed.prefix / "history.jsonl").read_text().splitlines()]
    assert history[-1]["outcome"] == "rolled_back"


def test_good_binary_is_served_after_stop_start(installed, sanctum_bin, tmp_path):
    old = status(installed)["current"]
    new_bin = new_release(sanctum_bin, tmp_path / "sanctum-next", "release-2")
    rc, out, err = installed.deploy("upgrade", "--binary", str(new_bin), "--shadow-port", str(installed.shadow_port))
    assert rc == 0 and out[0]["outcome"] == "ok", err
    new = out[0]["release"]
    assert len(new) == RELEASE_ID_LEN and new != old
    print(f"\nupgrade stop+start downtime: {out[0]['downtime_s']:.3f} s")
    st = status(installed)
    assert (st["current"], st["previous"], st["fallback"]) == (new, old, old)
    # The process answering on the seat's port executes the new release's file.
    assert seat_exe(installed) == os.path.realpath(installed.prefix / "releases" / new / "sanctum")
    assert get_json(f"http://127.0.0.1:{installed.port}/v1/models")["data"][0]["id"] == "default"
    # Stop then start: never a reload, never a restart in place.
    assert seat_calls(installed)[-2:] == ["stop sanctum.service", "start sanctum.service"]
    assert not any(c.split()[0] in ("reload", "restart") for c in seat_calls(installed))
    # The shadow is gone once the upgrade is done.
    assert not answers(installed.shadow_port)

    rc, out, err = installed.deploy("rollback")
    assert rc == 0 and out[0]["release"] == old, err
    assert seat_exe(installed) == os.path.realpath(installed.prefix / "releases" / old / "sanctum")
    assert (status(installed)["current"], status(installed)["previous"]) == (old, new)


def test_upgrading_to_the_current_release_changes_nothing(installed, sanctum_bin):
    before = len(installed.calls())
    rc, out, err = installed.deploy("upgrade", "--binary", sanctum_bin, "--shadow-port", str(installed.shadow_port))
    assert rc == 0 and out[0]["outcome"] == "unchanged", err
    assert not any(c.startswith(("stop", "start")) for c in installed.calls()[before:])


def test_rollback_without_previous_release_is_refused(installed):
    rc, out, err = installed.deploy("rollback")
    assert rc == 1 and "no previous release" in err


def test_stop_start_downtime(installed):
    """The figure docs/operations.md and bench/RESULTS.md quote: five stop+start cycles of the seat
    (SIGTERM drain, exit, exec, manifest check, model load, bind) until GET /v1/models answers."""
    downtimes = []
    for _ in range(5):
        rc, out, err = installed.deploy("restart")
        assert rc == 0, err
        downtimes.append(out[0]["downtime_s"])
    print(f"\nstop+start downtime over 5 cycles: median {statistics.median(downtimes):.3f} s, "
          f"max {max(downtimes):.3f} s, all {downtimes}")
    assert max(downtimes) < 10


def test_history_records_every_move(installed, sanctum_bin, tmp_path):
    new_bin = new_release(sanctum_bin, tmp_path / "sanctum-next", "history")
    installed.deploy("upgrade", "--binary", str(new_bin), "--shadow-port", str(installed.shadow_port))
    records = [json.loads(line) for line in (installed.prefix / "history.jsonl").read_text().splitlines()]
    assert [r["command"] for r in records] == ["install", "upgrade"]
    assert records[1]["outcome"] == "ok" and "downtime_s" in records[1]


def test_template_seat_runs_and_restarts_with_its_own_settings(install_roots, sanctum_bin):
    """sanctum@coder.service: its own env file (port), its own watcher settings for the post-flight."""
    inst = install_roots
    coder_port = free_port()
    env = inst.checkout / "deploy/env"
    (env / "seats").mkdir()
    (env / "seats/coder.env").write_text((env / "sanctum.env").read_text()
                                         .replace(f"SANCTUM_PORT={inst.port}", f"SANCTUM_PORT={coder_port}"))
    (env / "watchers/coder.env").write_text(
        (env / "watchers/main.env").read_text().replace(f"127.0.0.1:{inst.port}", f"127.0.0.1:{coder_port}")
        .replace("SANCTUM_SEAT_UNIT=sanctum.service", "SANCTUM_SEAT_UNIT=sanctum@coder.service"))
    drift_env = env / "drift.env"
    drift_env.write_text(drift_env.read_text().replace("sanctum.service ", "sanctum.service sanctum@coder.service "))
    rc, out, err = inst.deploy("install", "--binary", sanctum_bin, "--no-create-user")
    assert rc == 0, err
    assert "sanctum@coder.service" in out[0]["started"]
    assert answers(coder_port) and answers(inst.port)
    rc, out, err = inst.deploy("--seat-unit", "sanctum@coder.service", "restart")
    assert rc == 0, err
    assert seat_calls(inst) == ["start sanctum.service"]  # the main seat was not touched
    assert "stop sanctum@coder.service" in inst.calls() and answers(coder_port)


def test_failed_build_changes_nothing(installed, tmp_path):
    (tmp_path / "src").mkdir()  # no CMakeLists.txt: cmake fails at configure
    before = status(installed)["current"]
    rc, out, err = installed.deploy("upgrade", "--build", "--source", str(tmp_path / "src"))
    assert rc == 1 and "build failed" in err and "nothing changed" in err
    assert status(installed)["current"] == before and answers(installed.port)
