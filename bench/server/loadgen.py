#!/usr/bin/env python3
"""Streaming load generator for `sanctum serve`: throughput and latency at several concurrencies.

For each concurrency level, that many clients send streaming requests with a fixed prompt length
(token ids on /v1/completions, or a chat message of about that many tokens) and a fixed max_tokens
(ignore_eos, so every full request yields exactly that many tokens). Reported per level: aggregate
output tok/s (streamed tokens over the level's wall time), TTFT and inter-token latency p50/p99,
requests, cancellations, non-200 answers and 5xx, and with --health-interval the /health latency
p99 under that load. --duration runs each level for that many seconds instead of a fixed number of
requests and samples the server's RSS (start / peak / end), for soak tests. --cancel-prob closes a
stream after a random number of tokens, as a client that goes away.

Only standard-library asyncio: one HTTP/1.1 connection per request, SSE parsed as it arrives.

  loadgen.py --model DIR [--threads 2] [--levels 1,2,4,8,16] [--prompt-tokens 128] [--max-tokens 64]
             [--requests-per-client 2 | --duration 60] [--cancel-prob 0.2] [--json OUT] [-- serve args...]
  loadgen.py --url http://127.0.0.1:8080 [--pid PID] ...          (a server already running)

From Python: `run(url, LoadConfig(...), pid=...)` returns one dict per level; `ServeProcess` starts
and stops a server.
"""
from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]


def percentile(values: list[float], p: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100.0 * (len(s) - 1))))]


def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


@dataclass
class LoadConfig:
    levels: list[int] = field(default_factory=lambda: [1, 2, 4, 8, 16])
    prompt_tokens: int = 128
    max_tokens: int = 64
    requests_per_client: int = 2
    duration: float | None = None       # seconds per level; overrides requests_per_client
    endpoint: str = "completions"       # or "chat"
    cancel_prob: float = 0.0
    health_interval: float | None = None  # seconds between /health probes; None: no probing
    rss_interval: float = 0.5
    request_timeout: float = 600.0
    seed: int = 0
    model: str | None = None            # model id; None: the server's first


class Level:
    def __init__(self, concurrency: int):
        self.concurrency = concurrency
        self.tokens = 0
        self.requests = 0
        self.completed = 0
        self.cancelled = 0
        self.non_200 = 0
        self.status_5xx = 0
        self.transport_errors = 0
        self.short = 0  # full requests that streamed fewer tokens than max_tokens
        self.ttft: list[float] = []
        self.itl: list[float] = []
        self.health_ms: list[float] = []
        self.health_failed = 0
        self.rss: list[int] = []


async def _read_headers(reader: asyncio.StreamReader) -> tuple[int, dict]:
    status_line = await reader.readline()
    if not status_line:
        raise ConnectionError("connection closed before a status line")
    status = int(status_line.split()[1])
    headers = {}
    while True:
        line = await reader.readline()
        if line in (b"\r\n", b"\n", b""):
            break
        k, _, v = line.decode("latin-1").partition(":")
        headers[k.strip().lower()] = v.strip()
    return status, headers


async def _body_chunks(reader: asyncio.StreamReader, headers: dict):
    """Yields the response body as it arrives (chunked or not)."""
    if headers.get("transfer-encoding", "").lower() == "chunked":
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                await reader.readline()
                return
            data = await reader.readexactly(size)
            await reader.readexactly(2)
            yield data
    elif "content-length" in headers:
        yield await reader.readexactly(int(headers["content-length"]))
    else:
        while data := await reader.read(65536):
            yield data


async def _request(host: str, port: int, method: str, path: str, body: bytes | None = None):
    reader, writer = await asyncio.open_connection(host, port)
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n"
    if body is not None:
        head += f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    writer.write(head.encode() + b"\r\n" + (body or b""))
    await writer.drain()
    return reader, writer


async def _stream_one(host: str, port: int, cfg: LoadConfig, model: str, prompt, level: Level, rng: random.Random) -> None:
    cancel_after = rng.randint(1, max(1, cfg.max_tokens - 1)) if rng.random() < cfg.cancel_prob else None
    body = {"model": model, "max_tokens": cfg.max_tokens, "stream": True, "ignore_eos": True, "temperature": 0,
            "stream_options": {"include_usage": True}}
    if cfg.endpoint == "chat":
        body["messages"] = [{"role": "user", "content": prompt}]
        path = "/v1/chat/completions"
    else:
        body["prompt"] = prompt
        path = "/v1/completions"
    level.requests += 1
    t0 = time.perf_counter()
    writer = None
    try:
        reader, writer = await _request(host, port, "POST", path, json.dumps(body).encode())
        status, headers = await _read_headers(reader)
        if status != 200:
            level.non_200 += 1
            level.status_5xx += status >= 500
            return
        tokens, last, usage_tokens, buf = 0, None, None, b""
        async for data in _body_chunks(reader, headers):
            now = time.perf_counter()
            buf += data
            while b"\n\n" in buf:
                event, buf = buf.split(b"\n\n", 1)
                payload = event.decode().removeprefix("data:").strip()
                if not payload or payload == "[DONE]":
                    continue
                msg = json.loads(payload)
                if msg.get("usage"):
                    usage_tokens = msg["usage"].get("completion_tokens")
                if not msg.get("choices"):
                    continue
                choice = msg["choices"][0]
                text = choice.get("text") if cfg.endpoint != "chat" else (choice.get("delta") or {}).get("content")
                if not text:
                    continue
                tokens += 1  # one event per token; the usage count below corrects merged events
                if last is None:
                    level.ttft.append(now - t0)
                else:
                    level.itl.append(now - last)
                last = now
                if cancel_after is not None and tokens >= cancel_after:
                    level.cancelled += 1
                    level.tokens += tokens
                    return
        tokens = usage_tokens if usage_tokens is not None else tokens
        level.tokens += tokens
        level.completed += 1
        level.short += tokens < cfg.max_tokens
    except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
        level.transport_errors += 1
    finally:
        if writer is not None:
            writer.close()


async def _health_prober(host: str, port: int, interval: float, level: Level, stop: asyncio.Event) -> None:
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            reader, writer = await _request(host, port, "GET", "/health")
            status, headers = await _read_headers(reader)
            async for _ in _body_chunks(reader, headers):
                pass
            writer.close()
            if status == 200:
                level.health_ms.append((time.perf_counter() - t0) * 1000)
            else:
                level.health_failed += 1
        except (OSError, ConnectionError, asyncio.IncompleteReadError, ValueError):
            level.health_failed += 1
        await asyncio.sleep(interval)


async def _rss_sampler(pid: int, interval: float, level: Level, stop: asyncio.Event) -> None:
    while not stop.is_set():
        if (r := rss_bytes(pid)) is not None:
            level.rss.append(r)
        await asyncio.sleep(interval)


def make_prompt(cfg: LoadConfig, client: int, request: int):
    """Distinct prompts per request (no prompt-cache hits between them) of a fixed length."""
    rng = random.Random(cfg.seed * 1_000_003 + client * 1009 + request)
    if cfg.endpoint == "chat":
        return " ".join(rng.choice(("alpha", "beta", "gamma", "delta", "omega")) for _ in range(cfg.prompt_tokens))
    return [rng.randrange(1000, 150000) for _ in range(cfg.prompt_tokens)]


async def _run_level(host: str, port: int, cfg: LoadConfig, model: str, concurrency: int, pid: int | None) -> dict:
    level = Level(concurrency)
    stop = asyncio.Event()
    side = []
    if cfg.health_interval:
        side.append(asyncio.create_task(_health_prober(host, port, cfg.health_interval, level, stop)))
    if pid:
        side.append(asyncio.create_task(_rss_sampler(pid, cfg.rss_interval, level, stop)))
    t0 = time.perf_counter()
    deadline = t0 + cfg.duration if cfg.duration else None

    async def client(i: int) -> None:
        rng = random.Random(cfg.seed * 7919 + i)
        n = 0
        while (deadline is not None and time.perf_counter() < deadline) or (deadline is None and n < cfg.requests_per_client):
            try:
                await asyncio.wait_for(_stream_one(host, port, cfg, model, make_prompt(cfg, i, n), level, rng), cfg.request_timeout)
            except asyncio.TimeoutError:
                level.transport_errors += 1
            n += 1

    await asyncio.gather(*(client(i) for i in range(concurrency)))
    wall = time.perf_counter() - t0
    stop.set()
    await asyncio.gather(*side)

    def ms(v):
        return None if v is None else v * 1000
    out = {"concurrency": concurrency, "wall_s": wall, "requests": level.requests, "completed": level.completed,
           "cancelled": level.cancelled, "non_200": level.non_200, "status_5xx": level.status_5xx,
           "transport_errors": level.transport_errors, "short_responses": level.short,
           "output_tokens": level.tokens, "aggregate_tok_s": level.tokens / wall,
           "ttft_p50_ms": ms(percentile(level.ttft, 50)), "ttft_p99_ms": ms(percentile(level.ttft, 99)),
           "itl_p50_ms": ms(percentile(level.itl, 50)), "itl_p99_ms": ms(percentile(level.itl, 99))}
    if cfg.health_interval:
        out.update({"health_probes": len(level.health_ms), "health_failed": level.health_failed,
                    "health_p50_ms": percentile(level.health_ms, 50), "health_p99_ms": percentile(level.health_ms, 99)})
    if level.rss:
        out.update({"rss_start": level.rss[0], "rss_peak": max(level.rss), "rss_end": level.rss[-1]})
    return out


def first_model(url: str) -> str:
    with urllib.request.urlopen(url.rstrip("/") + "/v1/models", timeout=10) as r:
        return json.loads(r.read())["data"][0]["id"]


def run(url: str, cfg: LoadConfig, pid: int | None = None, on_level=None) -> list[dict]:
    """Runs every level of `cfg` against the server at `url`; one result dict per level."""
    u = urlparse(url)
    model = cfg.model or first_model(url)
    results = []
    for c in cfg.levels:
        r = asyncio.run(_run_level(u.hostname, u.port, cfg, model, c, pid))
        results.append(r)
        if on_level:
            on_level(r)
    return results


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ServeProcess:
    """`sanctum serve` on a free loopback port, its logs in a temporary file; a context manager."""

    def __init__(self, binary: str, model: str, threads: int, extra: list[str] | None = None, timeout: float = 300):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tempfile.NamedTemporaryFile(prefix="sanctum-serve-", suffix=".log", delete=False)
        cmd = [binary, "serve", "--port", str(self.port), "--model", model, "--threads", str(threads), *(extra or [])]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=self.log)
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"sanctum serve exited with {self.proc.returncode}; log: {self.log.name}\n{self.tail()}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.close()
        raise RuntimeError(f"sanctum serve did not answer /health in {timeout} s; log: {self.log.name}")

    @property
    def pid(self) -> int:
        return self.proc.pid

    def tail(self, n: int = 2000) -> str:
        self.log.flush()
        return Path(self.log.name).read_text(errors="replace")[-n:]

    def close(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        return self.proc.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def print_row(r: dict) -> None:
    def f(v, spec):
        return format(v, spec) if v is not None else "-".rjust(len(format(0.0, spec)))
    line = (f"{r['concurrency']:>5}{r['requests']:>6}{r['aggregate_tok_s']:>10.1f}{f(r['ttft_p50_ms'], '10.1f')}"
            f"{f(r['ttft_p99_ms'], '10.1f')}{f(r['itl_p50_ms'], '9.1f')}{f(r['itl_p99_ms'], '9.1f')}"
            f"{r['cancelled']:>7}{r['non_200']:>6}{r['status_5xx']:>6}{r['transport_errors']:>6}")
    if "health_p99_ms" in r:
        line += f"{f(r['health_p99_ms'], '10.2f')}"
    if "rss_peak" in r:
        line += f"   RSS {r['rss_start'] / 1e6:.0f} / {r['rss_peak'] / 1e6:.0f} / {r['rss_end'] / 1e6:.0f} MB"
    print(line, flush=True)


def main() -> int:
    argv = sys.argv[1:]
    serve_extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="an already running server (default: start one with --model)")
    ap.add_argument("--pid", type=int, help="with --url: the server's pid, for RSS sampling")
    ap.add_argument("--model", help="checkpoint directory for the server this starts")
    ap.add_argument("--model-name", help="model id in requests (default: the server's first)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--levels", default="1,2,4,8,16", help="comma-separated concurrency levels")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--requests-per-client", type=int, default=2)
    ap.add_argument("--duration", type=float, help="seconds per level (clients loop); samples RSS")
    ap.add_argument("--endpoint", choices=["completions", "chat"], default="completions")
    ap.add_argument("--cancel-prob", type=float, default=0.0, help="chance a request is closed after a random token count")
    ap.add_argument("--health-interval", type=float, help="seconds between /health probes during the run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="write the results here")
    a = ap.parse_args(argv)
    if not a.url and not a.model:
        ap.error("give --model DIR (the server is started here) or --url of a running server")
    cfg = LoadConfig(levels=[int(x) for x in a.levels.split(",")], prompt_tokens=a.prompt_tokens, max_tokens=a.max_tokens,
                     requests_per_client=a.requests_per_client, duration=a.duration, endpoint=a.endpoint,
                     cancel_prob=a.cancel_prob, health_interval=a.health_interval, seed=a.seed, model=a.model_name)
    header = (f"{'conc':>5}{'reqs':>6}{'tok/s':>10}{'TTFT p50':>10}{'TTFT p99':>10}{'ITL p50':>9}{'ITL p99':>9}"
              f"{'cancel':>7}{'!200':>6}{'5xx':>6}{'io':>6}" + (f"{'health99':>10}" if a.health_interval else ""))
    print(f"prompt {cfg.prompt_tokens} tokens, max_tokens {cfg.max_tokens}, "
          + (f"{cfg.duration:g} s per level" if cfg.duration else f"{cfg.requests_per_client} requests per client")
          + f", {cfg.endpoint}; latencies in ms")
    print(header)
    server = None
    try:
        if a.url:
            url, pid = a.url, a.pid
        else:
            server = ServeProcess(a.sanctum, a.model, a.threads, serve_extra)
            url, pid = server.url, server.pid
        results = run(url, cfg, pid=pid, on_level=print_row)
        alive = server is None or server.proc.poll() is None
    finally:
        code = server.close() if server else None
    if server is not None:
        print(f"server alive at the end: {alive}; exit code on SIGTERM: {code}")
    if a.json:
        a.json.write_text(json.dumps({"config": cfg.__dict__, "levels": results, "server_alive": alive,
                                      "server_exit_code": code}, indent=2))
    bad = sum(r["status_5xx"] for r in results) + (0 if alive else 1)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
