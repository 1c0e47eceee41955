"""Fixtures for the operations suite (helpers in deploy_harness)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_harness import Install, Seat, free_port, make_checkout, wait_answering  # noqa: E402


@pytest.fixture
def seat(sanctum_bin, tmp_path):
    s = Seat(sanctum_bin, tmp_path / "seat.log", extra=["--max-queue", "16"])
    yield s
    s.stop()


@pytest.fixture
def install_roots(tmp_path):
    port = free_port()
    inst = Install(make_checkout(tmp_path / "checkout", port), tmp_path / "root/opt/sanctum",
                   tmp_path / "root/etc/sanctum", tmp_path / "root/etc/systemd/system", tmp_path / "fake-systemd",
                   port, free_port())
    yield inst
    inst.stop_everything()


@pytest.fixture
def installed(install_roots, sanctum_bin):
    """install done and the seat answering (started through the fake systemctl)."""
    rc, out, err = install_roots.deploy("install", "--binary", sanctum_bin, "--no-create-user")
    assert rc == 0, err
    wait_answering(install_roots.port)
    return install_roots
