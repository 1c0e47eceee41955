"""systemctl behind a configurable command (SANCTUM_SYSTEMCTL), so tests and staging trees drive a
fake that manages real processes without a running systemd."""
from __future__ import annotations

import os
import shlex
import subprocess


class Systemctl:
    def __init__(self, command: str | None = None):
        self.argv = shlex.split(command or os.environ.get("SANCTUM_SYSTEMCTL") or "systemctl")

    def run(self, *args: str, timeout: float = 180.0) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(self.argv + list(args), capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return subprocess.CompletedProcess(self.argv + list(args), 124, "", f"timed out after {timeout:g} s")
        except OSError as e:
            return subprocess.CompletedProcess(self.argv + list(args), 127, "", str(e))

    def ok(self, *args: str) -> bool:
        return self.run(*args).returncode == 0

    def is_active(self, unit: str) -> str:
        """'active', 'inactive', 'failed', ... as systemctl prints it ('unknown' if it printed nothing)."""
        r = self.run("is-active", unit)
        return (r.stdout.strip().splitlines() or ["unknown"])[0]

    def main_pid(self, unit: str) -> int:
        r = self.run("show", "--property=MainPID", "--value", unit)
        try:
            return int(r.stdout.strip() or 0)
        except ValueError:
            return 0

    def command_line(self) -> str:
        return " ".join(shlex.quote(a) for a in self.argv)
