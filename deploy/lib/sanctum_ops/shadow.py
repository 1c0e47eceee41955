"""A throwaway instance of a candidate binary on a spare loopback port, with the seat's model,
manifest gate and tunables: if the new binary cannot pass the manifest gate, load the model and
answer here, it never gets near the seat."""
from __future__ import annotations

import signal
import subprocess
import tempfile
import time
from pathlib import Path

from .config import split_flags
from .seat_client import ProbeError, SeatClient


def serve_argv(binary: Path, seat_env: dict[str, str], port: int) -> list[str]:
    """The seat's ExecStart minus its listeners, auth and TLS: plain HTTP on 127.0.0.1:port."""
    missing = [k for k in ("SANCTUM_MODEL", "SANCTUM_MANIFEST") if not seat_env.get(k)]
    if missing:
        raise ValueError(f"seat settings lack {', '.join(missing)}")
    return ([str(binary), "serve", "--model", seat_env["SANCTUM_MODEL"], "--manifest", seat_env["SANCTUM_MANIFEST"]]
            + split_flags(seat_env.get("SANCTUM_MANIFEST_SIG_FLAGS"))
            + ["--host", "127.0.0.1", "--port", str(port)]
            + split_flags(seat_env.get("SANCTUM_EXTRA_FLAGS")) + ["--log-format", "json"])


def wait_until_listed(client: SeatClient, timeout: float, proc: subprocess.Popen | None = None,
                      interval: float = 0.02) -> float:
    """Poll GET /v1/models until it answers; returns seconds waited. Raises ProbeError on timeout
    (or as soon as `proc`, if given, exits)."""
    t0 = time.monotonic()
    last = "no answer yet"
    while time.monotonic() - t0 < timeout:
        if proc is not None and proc.poll() is not None:
            rc = proc.returncode
            raise ProbeError(f"killed by signal {-rc} before answering" if rc < 0 else
                             f"exited with status {rc} before answering")
        try:
            client.models(timeout=2)
            return time.monotonic() - t0
        except ProbeError as e:
            last = str(e)
        time.sleep(interval)
    raise ProbeError(f"no answer within {timeout:g} s ({last})")


class Shadow:
    def __init__(self, binary: Path, seat_env: dict[str, str], port: int):
        self.argv = serve_argv(binary, seat_env, port)
        self.client = SeatClient(f"http://127.0.0.1:{port}")
        self.log = tempfile.TemporaryFile()
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> "Shadow":
        try:
            self.proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=self.log,
                                         stdin=subprocess.DEVNULL)
        except OSError as e:  # not executable, wrong format, truncated ELF header...
            raise ProbeError(f"cannot execute {self.argv[0]}: {e.strerror or e}")
        return self

    def __exit__(self, *exc) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()

    def log_tail(self, n: int = 1500) -> str:
        self.log.flush()
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-n:]
