"""The systemd units as `sanctum-deploy install` writes them pass `systemd-analyze verify` (no
errors and no warnings: unknown keys only warn), also as an unprivileged user without systemd as
PID 1; the seat units keep their hardening; the memory cap comes from the seat's setting."""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from deploy_harness import DEPLOY, Install, make_checkout, free_port

ANALYZE = shutil.which("systemd-analyze") or "systemd-analyze"


@pytest.fixture(scope="module", autouse=True)
def analyzer_present():
    if shutil.which("systemd-analyze") is None:
        pytest.fail("systemd-analyze is missing: scripts/setup.sh installs Debian's systemd package")


@pytest.fixture(scope="module")
def unit_tree(sanctum_bin):
    """An install (no start) into a world-readable temporary tree, so an unprivileged user can
    read it too; its units point at binaries and scripts that exist there."""
    top = Path(tempfile.mkdtemp(prefix="sanctum-units-"))
    os.chmod(top, 0o755)
    inst = Install(make_checkout(top / "checkout", free_port()), top / "opt/sanctum", top / "etc/sanctum",
                   top / "etc/systemd/system", top / "fake-systemd", free_port(), free_port())
    rc, _, err = inst.deploy("install", "--binary", sanctum_bin, "--no-create-user", "--no-start")
    assert rc == 0, err
    for dirpath, dirnames, filenames in os.walk(top):
        os.chmod(dirpath, 0o755)
        for f in filenames:
            p = Path(dirpath) / f
            if not p.is_symlink():
                os.chmod(p, os.stat(p).st_mode | 0o444)
    yield inst
    shutil.rmtree(top, ignore_errors=True)


def unit_names() -> list[str]:
    """Every canonical unit; a template is verified through an instance of it."""
    names = []
    for f in sorted((DEPLOY / "systemd").iterdir()):
        if f.is_file():
            names.append(f.name.replace("@.", "@main.") if "@." in f.name else f.name)
    return names


def verify(unit_dir: Path, unit: str, as_nobody: bool = False) -> subprocess.CompletedProcess:
    cmd = [ANALYZE, "verify", "--man=no", str(unit_dir / unit)]
    if as_nobody:
        cmd = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"] + cmd
    env = {k: v for k, v in os.environ.items() if k != "SYSTEMD_LOG_LEVEL"}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)


def test_every_canonical_unit_is_installed(unit_tree):
    for f in (DEPLOY / "systemd").iterdir():
        if f.is_file():
            assert (unit_tree.unit_dir / f.name).is_file(), f.name


@pytest.mark.parametrize("unit", unit_names())
def test_unit_passes_systemd_analyze_verify(unit_tree, unit):
    r = verify(unit_tree.unit_dir, unit)
    assert r.returncode == 0 and not r.stderr.strip(), f"{unit}:\n{r.stdout}{r.stderr}"


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("setpriv") is None,
                    reason="already unprivileged (the test above is the unprivileged run)")
def test_units_verify_as_an_unprivileged_user(unit_tree):
    for unit in unit_names():
        r = verify(unit_tree.unit_dir, unit, as_nobody=True)
        assert r.returncode == 0 and not r.stderr.strip(), f"{unit} as nobody:\n{r.stdout}{r.stderr}"


@pytest.mark.parametrize("template,unit", [("sanctum.service", "sanctum.service"),
                                           ("sanctum@.service", "sanctum@main.service")])
def test_verify_catches_a_broken_unit(unit_tree, tmp_path, template, unit):
    """The check above can fail: a misspelt key is reported, through a template's instance too."""
    broken = tmp_path / template
    broken.write_text((unit_tree.unit_dir / template).read_text().replace("NoNewPrivileges=", "NoNewPrivilege="))
    r = verify(tmp_path, unit)
    assert "NoNewPrivilege" in r.stderr


@pytest.mark.parametrize("unit", ["sanctum.service", "sanctum@main.service", "sanctum-fallback.service",
                                  "sanctum-router.service"])
def test_serving_units_are_hardened(unit_tree, unit):
    r = subprocess.run([ANALYZE, "security", "--offline=yes", "--threshold=25", str(unit_tree.unit_dir / unit)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, f"{unit}: exposure above 2.5\n{r.stdout[-3000:]}"
    text = (unit_tree.unit_dir / unit.replace("@main.", "@.")).read_text()
    for line in ("NoNewPrivileges=yes", "ProtectSystem=strict", "ProtectHome=yes", "PrivateTmp=yes",
                 "User=sanctum", "Restart=always", "StartLimitBurst="):
        assert line in text, f"{unit} lacks {line}"


@pytest.mark.parametrize("unit", ["sanctum.service", "sanctum@.service", "sanctum-fallback.service"])
def test_seat_units_carry_manifest_and_tls_flags_and_read_only_model(unit_tree, unit):
    text = (unit_tree.unit_dir / unit).read_text()
    assert "--manifest ${SANCTUM_MANIFEST} $SANCTUM_MANIFEST_SIG_FLAGS" in text
    assert "$SANCTUM_TLS_FLAGS" in text
    assert f"ReadOnlyPaths={unit_tree.prefix}/models {unit_tree.etc}/manifests" in text


def test_memory_cap_comes_from_the_seat_setting(unit_tree):
    dropin = (unit_tree.unit_dir / "sanctum.service.d" / "10-memory.conf").read_text()
    assert "MemoryMax=4G" in dropin
    assert f"MemoryHigh={4 * (1 << 30) * 9 // 10}" in dropin
    assert (unit_tree.unit_dir / "sanctum-fallback.service.d" / "10-memory.conf").read_text() == dropin


def test_bad_memory_setting_is_a_clear_error(tmp_path, sanctum_bin):
    inst = Install(make_checkout(tmp_path / "checkout", free_port()), tmp_path / "opt", tmp_path / "etc",
                   tmp_path / "units", tmp_path / "fake", 0, 0)
    env = inst.checkout / "deploy/env/sanctum.env"
    env.write_text(env.read_text().replace("SANCTUM_MEMORY_MAX=4G", "SANCTUM_MEMORY_MAX=4 gigs"))
    rc, out, err = inst.deploy("install", "--binary", sanctum_bin, "--no-create-user", "--no-start")
    assert rc == 2
    assert "SANCTUM_MEMORY_MAX='4 gigs' is not a systemd size" in err
    assert not (tmp_path / "units").exists()  # nothing half-installed


@pytest.mark.parametrize("edit,message", [
    (("SANCTUM_PORT=", "SANCTUM_PORT=80800#"), "is not a TCP port"),
    (("SANCTUM_MANIFEST=/etc", "#SANCTUM_MANIFEST=/etc"), "SANCTUM_MANIFEST must be set"),
    (("SANCTUM_HOST=127.0.0.1", "SANCTUM_HOST 127.0.0.1"), "expected KEY=VALUE"),
])
def test_bad_seat_settings_are_clear_errors(tmp_path, sanctum_bin, edit, message):
    inst = Install(make_checkout(tmp_path / "checkout", free_port()), tmp_path / "opt", tmp_path / "etc",
                   tmp_path / "units", tmp_path / "fake", 0, 0)
    env = inst.checkout / "deploy/env/sanctum.env"
    env.write_text(env.read_text().replace(*edit))
    rc, _, err = inst.deploy("install", "--binary", sanctum_bin, "--no-create-user", "--no-start")
    assert rc == 2 and message in err and "sanctum.env" in err


def test_template_seat_gets_its_own_memory_dropin(tmp_path, sanctum_bin):
    inst = Install(make_checkout(tmp_path / "checkout", free_port()), tmp_path / "opt", tmp_path / "etc",
                   tmp_path / "units", tmp_path / "fake", 0, 0)
    seats = inst.checkout / "deploy/env/seats"
    seats.mkdir()
    (seats / "coder.env").write_text((inst.checkout / "deploy/env/sanctum.env").read_text()
                                     .replace("SANCTUM_MEMORY_MAX=4G", "SANCTUM_MEMORY_MAX=12G"))
    rc, _, err = inst.deploy("install", "--binary", sanctum_bin, "--no-create-user", "--no-start")
    assert rc == 0, err
    assert "MemoryMax=12G" in (tmp_path / "units/sanctum@coder.service.d/10-memory.conf").read_text()
    assert (tmp_path / "etc/seats/coder.env").is_file()


def test_router_config_is_installed_and_checked_before_start(tmp_path, sanctum_bin):
    inst = Install(make_checkout(tmp_path / "checkout", free_port()), tmp_path / "opt", tmp_path / "etc",
                   tmp_path / "units", tmp_path / "fake", 0, 0)
    (inst.checkout / "deploy/router.yaml").write_text("# site router config\n")
    rc, _, err = inst.deploy("install", "--binary", sanctum_bin, "--no-create-user", "--no-start")
    assert rc == 0, err
    assert (tmp_path / "etc/router.yaml").read_text() == "# site router config\n"
    unit = (tmp_path / "units/sanctum-router.service").read_text()
    assert f"ExecStartPre={tmp_path}/opt/current/sanctum route --check {tmp_path}/etc/router.yaml" in unit
    assert f"ConditionPathExists={tmp_path}/etc/router.yaml" in unit
