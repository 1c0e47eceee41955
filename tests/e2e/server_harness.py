"""Start and talk to a live `sanctum serve` process: the tiny test model, free ports, raw HTTP and SSE.

Used by the e2e battery and by bench/server (which imports it from here).
"""
from __future__ import annotations

import gzip
import http.client
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOKENIZER_DIR = ROOT / "tests" / "data" / "tokenizers" / "qwen3"
VOCAB = 151936  # Qwen's padded embedding size; the tokenizer has 151669 ids
MODEL = "tiny"  # the name the e2e servers give the tiny model
DEFAULT_MODEL = ROOT / "models" / "default" / "mlx-4bit"  # the embedded default model, a trained one


def make_tiny_chat_model(out: Path, layers: int = 2, hidden: int = 64) -> Path:
    """A random 4-bit qwen2 whose vocabulary covers the real Qwen3 tokenizer copied beside it."""
    if (out / "config.json").exists() and (out / "tokenizer.json").exists():
        return out
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_tiny_model.py"), "--arch", "qwen2", "--out", str(out),
                    "--quantize", "4", "--hidden", str(hidden), "--layers", str(layers), "--heads", "2",
                    "--kv-heads", "1", "--vocab", str(VOCAB)], check=True, capture_output=True)
    with gzip.open(TOKENIZER_DIR / "tokenizer.json.gz", "rb") as src, open(out / "tokenizer.json", "wb") as dst:
        shutil.copyfileobj(src, dst)
    shutil.copy(TOKENIZER_DIR / "tokenizer_config.json", out / "tokenizer_config.json")
    return out


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """One `sanctum serve` child process; its stderr (the logs) goes to a file."""

    def __init__(self, binary: str, models: list[str], log_path: Path, extra: list[str] | None = None,
                 port: int | None = None, ready_log: str | None = None, ready_timeout: float = 60.0):
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = log_path
        args = [binary, "serve", "--port", str(self.port), "--log-format", "json"]
        for m in models:
            args += ["--model", m]
        args += extra or []
        self.log = open(log_path, "wb")
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=self.log)
        self._wait_ready(ready_log, ready_timeout)

    def _wait_ready(self, ready_log: str | None, timeout: float = 60.0) -> None:
        """Until GET /health answers on the plain port, or, with `ready_log`, until that message is
        logged (a server without a plain listener has no plain /health)."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: {self.logs()[-2000:]}")
            if ready_log is not None:
                if any(r.get("msg") == ready_log for r in self.log_records()):
                    return
                time.sleep(0.05)
                continue
            try:
                status, _, _ = request(self.port, "GET", "/health", timeout=1)
                if status == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)
        raise RuntimeError("server did not become healthy: " + self.logs()[-2000:])

    def logs(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def log_records(self) -> list[dict]:
        out = []
        for line in self.logs().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out

    def terminate(self, sig=signal.SIGTERM, timeout: float = 30.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode


def request(port: int, method: str, path: str, body=None, headers: dict | None = None, timeout: float = 60.0):
    """One plain HTTP request; returns (status, headers dict (lower-case keys), body bytes)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = body if isinstance(body, (bytes, bytearray)) or body is None else json.dumps(body).encode()
        h = {"Content-Type": "application/json"} if data is not None else {}
        h.update(headers or {})
        conn.request(method, path, body=data, headers=h)
        resp = conn.getresponse()
        payload = resp.read()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, payload
    finally:
        conn.close()


def post_json(port: int, path: str, body, timeout: float = 60.0):
    status, headers, payload = request(port, "POST", path, body, timeout=timeout)
    return status, headers, json.loads(payload) if payload else None


class SseStream:
    """A streamed completion read event by event over raw HTTP (http.client de-chunks for us)."""

    def __init__(self, port: int, path: str, body: dict, timeout: float = 60.0):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("POST", path, body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        self.resp = self.conn.getresponse()
        self.status = self.resp.status
        self.headers = {k.lower(): v for k, v in self.resp.getheaders()}

    def events(self):
        """Yields each event's data string ('[DONE]' included), in order."""
        buf = b""
        while True:
            line = self.resp.readline()
            if not line:
                return
            buf += line
            if buf.endswith(b"\n\n"):
                for part in buf.decode().split("\n"):
                    if part.startswith("data: "):
                        yield part[len("data: "):]
                buf = b""

    def close(self) -> None:
        # Shut the socket for real: the server must see the disconnect.
        try:
            self.conn.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.conn.close()


def chat_body(model: str, content: str = "Hello there", **kw) -> dict:
    body = {"model": model, "messages": [{"role": "user", "content": content}], "temperature": 0, "max_tokens": 16}
    body.update(kw)
    return body


def metric_value(text: str, name: str, labels: dict | None = None) -> float:
    """Sum of the samples of `name` whose labels include `labels` (parsed with prometheus_client)."""
    from prometheus_client.parser import text_string_to_metric_families
    total = 0.0
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name == name and all(s.labels.get(k) == v for k, v in (labels or {}).items()):
                total += s.value
    return total


def env_binary() -> str:
    return os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
