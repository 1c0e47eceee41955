"""Helpers for the trust tests (manifest gate, mTLS, bearer tokens): a PKI made with `sanctum certs`,
a server started with arbitrary listener flags (ready when it logs "listening", so an mTLS-only
server works too), real TLS handshakes with Python's ssl module, and a probe that watches a port for
the whole life of a process that must never open it."""
from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import server_harness as sh


def run(binary: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=60)


@dataclass
class Pki:
    dir: Path

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def crl(self) -> Path:
        return self.dir / "crl.pem"

    @property
    def server_cert(self) -> Path:
        return self.dir / "server.crt"

    @property
    def server_key(self) -> Path:
        return self.dir / "server.key"

    def client(self, name: str) -> tuple[Path, Path]:
        return self.dir / "clients" / f"{name}.crt", self.dir / "clients" / f"{name}.key"


def make_pki(binary: str, where: Path, clients: list[str]) -> Pki:
    pki = Pki(where)
    for args in (["certs", "init", "--dir", str(where), "--cn", f"test CA {where.name}"],
                 ["certs", "server", "--dir", str(where), "--san", "127.0.0.1", "--san", "localhost"]):
        r = run(binary, *args)
        assert r.returncode == 0, r.stderr
    for name in clients:
        r = run(binary, "certs", "client", name, "--dir", str(where))
        assert r.returncode == 0, r.stderr
    return pki


def revoke(binary: str, pki: Pki, name: str) -> None:
    r = run(binary, "certs", "revoke", name, "--dir", str(pki.dir))
    assert r.returncode == 0, r.stderr


def tls_flags(pki: Pki, port: int, crl: bool = True) -> list[str]:
    flags = ["--tls-cert", str(pki.server_cert), "--tls-key", str(pki.server_key), "--tls-client-ca", str(pki.ca),
             "--tls-port", str(port)]
    return flags + (["--tls-crl", str(pki.crl)] if crl else [])


class Serve(sh.Server):
    """`sanctum serve` with the tiny model and the given flags, ready once it logs "listening" (it may
    have no plain listener); logs (JSON lines) go to a file."""

    def __init__(self, binary: str, model_dir: Path, log_path: Path, extra: list[str], port: int | None = None):
        super().__init__(binary, [f"{sh.MODEL}={model_dir}"], log_path, ["--threads", "1", *extra], port=port,
                         ready_log="listening")

    def records(self) -> list[dict]:
        return self.log_records()

    def access(self, request_id: str) -> list[dict]:
        return [r for r in self.records() if r.get("msg") == "access" and r.get("request_id") == request_id]

    def wait_for_log(self, msg: str, count: int = 1, timeout: float = 10.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if sum(1 for r in self.records() if r.get("msg") == msg) >= count:
                return
            time.sleep(0.05)
        raise AssertionError(f"no {count}x '{msg}' in the log: {self.logs()[-2000:]}")


def client_context(ca: Path, cert: Path | None = None, key: Path | None = None) -> ssl.SSLContext:
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(ca))
    if cert is not None:
        ctx.load_cert_chain(str(cert), str(key))
    return ctx


def tls_request(port: int, ctx: ssl.SSLContext, method: str = "GET", path: str = "/health", body=None,
                headers: dict | None = None, timeout: float = 30.0):
    """One HTTPS request; returns (status, headers (lower-case keys), body bytes, TLS version).
    Handshake rejections surface as ssl.SSLError or ConnectionError."""
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=ctx, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload, conn.sock.version()
    finally:
        conn.close()


def handshake_and_get(port: int, ctx: ssl.SSLContext) -> int:
    """Handshake, then GET /health; raises on rejection. With TLS 1.3 a rejected client certificate is
    reported by the server's alert after the client's side of the handshake finished, so the request
    is what surfaces it."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
    if not data:
        raise ConnectionError("connection closed without a response")
    return int(data.split(b" ", 2)[1])


def connect_refused(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return False
    except ConnectionRefusedError:
        return True


class PortWatch:
    """Tries to connect to a port every few milliseconds until stopped; `opened` says whether any try
    succeeded. Used around a process that must fail before it binds."""

    def __init__(self, port: int):
        self.port = port
        self.opened = False
        self.tries = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tries += 1
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                    self.opened = True
            except OSError:
                pass
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def write_private(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text)
    os.chmod(path, mode)
    return path
