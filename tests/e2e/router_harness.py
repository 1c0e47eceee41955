"""Start and talk to a live `sanctum route` process for the router tests: a YAML config written to a
temporary file, in-process fault upstreams (fault_upstream.py), and a few helpers around metrics
and upstream statistics."""
from __future__ import annotations

import json
import subprocess
import threading
import time
import urllib.request
from pathlib import Path

import fault_upstream
import server_harness as sh


class Router(sh.Server):
    """`sanctum route --config` with the given config dict, ready on GET /health. The file is JSON, which
    is YAML too (no YAML writer needed on the test side)."""

    def __init__(self, binary: str, config: dict, workdir: Path, name: str = "router"):
        self.port = sh.free_port()
        config = dict(config)
        config.setdefault("listen", {})
        config["listen"] = {**config["listen"], "port": self.port}
        self.config_path = workdir / f"{name}.yaml"
        self.config = config
        self.config_path.write_text(json.dumps(config, indent=2))
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = workdir / f"{name}.log"
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([binary, "route", "--config", str(self.config_path), "--log-format", "json"],
                                     stdout=subprocess.DEVNULL, stderr=self.log)
        self._wait_ready(None, timeout=20)

    def config_dict(self) -> dict:
        return self.config

    admin_headers: dict = {}  # credentials for /metrics when the router requires tokens

    def metrics(self) -> str:
        return sh.request(self.port, "GET", "/metrics", headers=self.admin_headers)[2].decode()

    def metric(self, name: str, labels: dict | None = None) -> float:
        return sh.metric_value(self.metrics(), name, labels)

    def wait_metric(self, name: str, labels: dict, value: float, timeout: float = 10.0) -> None:
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.metric(name, labels) == value:
                return
            time.sleep(0.05)
        raise AssertionError(f"{name}{labels} never became {value} (now {self.metric(name, labels)}); logs: {self.logs()[-3000:]}")

    def records(self, msg: str | None = None) -> list[dict]:
        return [r for r in self.log_records() if msg is None or r.get("msg") == msg]

    def access(self, request_id: str, timeout: float = 5.0) -> dict:
        deadline = time.time() + timeout
        while time.time() < deadline:
            for r in self.records("access"):
                if r.get("request_id") == request_id:
                    return r
            time.sleep(0.05)
        raise AssertionError(f"no access line for {request_id}: {self.logs()[-3000:]}")


class Fault:
    """A fault upstream running in this process on a free port."""

    def __init__(self, mode: str = "ok", answer: str = "The answer is 4.", canary_answer: str = "4"):
        self.port = sh.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = fault_upstream.serve(self.port, mode, answer, canary_answer)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def set(self, **config) -> None:
        req = urllib.request.Request(self.url + "/_fault", data=json.dumps(config).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=5).read()

    def stats(self) -> dict:
        return json.loads(urllib.request.urlopen(self.url + "/_stats", timeout=5).read())

    def completions(self) -> int:
        s = self.stats()
        return s.get("POST /v1/chat/completions", 0) + s.get("POST /v1/completions", 0)

    def close(self) -> None:
        if self.server is not None:
            self.server.kill()
            self.server = None


def dead_url() -> str:
    """A loopback URL where nothing listens (connection refused)."""
    return f"http://127.0.0.1:{sh.free_port()}"


def backend(name: str, models: list[str], url: str, fallbacks: list[str] | None = None, **extra) -> dict:
    b = {"name": name, "tier": extra.pop("tier", "coder"), "models": models, "url": url}
    if fallbacks:
        b["fallback_urls"] = fallbacks
    b.update(extra)
    return b


def chat(router_port: int, model: str, content: str = "Hello there", request_id: str | None = None, headers: dict | None = None,
         timeout: float = 30.0, **kw):
    h = dict(headers or {})
    if request_id:
        h["X-Request-Id"] = request_id
    body = sh.chat_body(model, content, **kw)
    status, hdrs, payload = sh.request(router_port, "POST", "/v1/chat/completions", body, headers=h, timeout=timeout)
    try:
        parsed = json.loads(payload) if payload else None
    except ValueError:
        parsed = payload
    return status, hdrs, parsed


def stream_events(router_port: int, model: str, content: str = "Hello there", request_id: str | None = None, **kw):
    """(status, headers, list of event data strings) of a streamed chat completion."""
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", router_port, timeout=30)
    h = {"Content-Type": "application/json"}
    if request_id:
        h["X-Request-Id"] = request_id
    conn.request("POST", "/v1/chat/completions", body=json.dumps(sh.chat_body(model, content, stream=True, **kw)).encode(), headers=h)
    resp = conn.getresponse()
    headers = {k.lower(): v for k, v in resp.getheaders()}
    raw = resp.read()
    conn.close()
    events = []
    for block in raw.split(b"\n\n"):
        for line in block.split(b"\n"):
            if line.startswith(b"data: "):
                events.append(line[6:].decode(errors="replace"))
    return resp.status, headers, events
