"""Helpers of the operations suite: a real `sanctum serve` seat on loopback, a copy of the checkout
with this run's ports, an install into a temporary prefix driven by a fake systemctl that runs
the installed units' real command lines, and running the deploy scripts as production does."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
BIN = DEPLOY / "bin"
FAKE_SYSTEMCTL = Path(__file__).resolve().parent / "fake_systemctl.py"
PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable  # what production runs


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get_json(url: str, timeout: float = 5.0):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return json.loads(r.read())


def answers(port: int) -> bool:
    try:
        return bool(get_json(f"http://127.0.0.1:{port}/v1/models", timeout=2)["data"])
    except (OSError, ValueError, KeyError):
        return False


def wait_answering(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if answers(port):
            return
        time.sleep(0.02)
    raise AssertionError(f"nothing answers on 127.0.0.1:{port}")


def run_script(name: str, *args: str, env: dict | None = None, timeout: float = 120) -> tuple[int, list[dict], str]:
    """Run deploy/bin/NAME (or deploy/sanctum-deploy); returns (exit code, JSON lines of stdout, stderr)."""
    path = DEPLOY / name if name == "sanctum-deploy" else BIN / name
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("SANCTUM_")}
    full_env.update(env or {})
    r = subprocess.run([PYTHON, str(path), *args], capture_output=True, text=True, timeout=timeout, env=full_env)
    records = []
    for line in r.stdout.splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            pass
    return r.returncode, records, r.stderr


class Seat:
    """A `sanctum serve` of the embedded default model on a free loopback port."""

    def __init__(self, binary: str, log: Path, extra: list[str] | None = None):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = open(log, "wb")
        self.proc = subprocess.Popen([binary, "serve", "--port", str(self.port), "--threads", "1",
                                      "--log-format", "json", *(extra or [])],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        wait_answering(self.port)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


@dataclass
class Install:
    """A checkout copy plus an install of it into temporary roots, with its fake systemctl."""
    checkout: Path
    prefix: Path
    etc: Path
    unit_dir: Path
    fake_state: Path
    port: int
    shadow_port: int

    @property
    def systemctl(self) -> str:
        return f"{PYTHON} {FAKE_SYSTEMCTL} --unit-dir {self.unit_dir} --state {self.fake_state}"

    def deploy(self, *args: str, timeout: float = 180) -> tuple[int, list[dict], str]:
        return run_script("sanctum-deploy", "--canonical", str(self.checkout / "deploy"), "--prefix", str(self.prefix),
                          "--etc", str(self.etc), "--unit-dir", str(self.unit_dir), "--systemctl", self.systemctl,
                          "--start-timeout", "30", *args, timeout=timeout)

    def drift_args(self) -> list[str]:
        return ["--canonical", str(self.checkout / "deploy"), "--prefix", str(self.prefix), "--etc", str(self.etc),
                "--unit-dir", str(self.unit_dir), "--systemctl", self.systemctl]

    def calls(self) -> list[str]:
        path = self.fake_state / "calls.log"
        return path.read_text().splitlines() if path.exists() else []

    def stop_everything(self) -> None:
        """Kill what the fake systemctl started (only those pids, by their process groups)."""
        for pidfile in self.fake_state.glob("*.pid"):
            try:
                pid = int(pidfile.read_text())
                if pid > 0:
                    os.killpg(pid, signal.SIGKILL)
            except (ValueError, ProcessLookupError, PermissionError):
                pass


def make_checkout(dest: Path, port: int) -> Path:
    """The operator's checkout: deploy/ and docs/ copied, models/ linked, this run's port set
    (what a site does by committing its own settings)."""
    shutil.copytree(DEPLOY, dest / "deploy", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "docs").mkdir()
    if (ROOT / "docs" / "operations.md").exists():
        shutil.copy(ROOT / "docs" / "operations.md", dest / "docs" / "operations.md")
    (dest / "models").symlink_to(ROOT / "models")
    env = dest / "deploy/env/sanctum.env"
    env.write_text(env.read_text().replace("SANCTUM_PORT=8080", f"SANCTUM_PORT={port}")
                   .replace("SANCTUM_EXTRA_FLAGS=--prompt-cache-mb 1024 --max-queue 64",
                            "SANCTUM_EXTRA_FLAGS=--prompt-cache-mb 64 --max-queue 8 --threads 1"))
    watchers = dest / "deploy/env/watchers/main.env"
    watchers.write_text(watchers.read_text().replace("http://127.0.0.1:8080", f"http://127.0.0.1:{port}"))
    alert = dest / "deploy/env/alert.env"
    alert.write_text(alert.read_text().replace("SANCTUM_ALERT_CMD=logger --tag sanctum-alert --priority daemon.err",
                                               f"SANCTUM_ALERT_CMD=cat >> {dest / 'alerts.jsonl'}"))
    return dest
