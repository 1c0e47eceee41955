#!/usr/bin/env python3
"""Concurrent streaming load on a live `sanctum serve`, with a /health prober beside it.

Reports /health latency percentiles (the guardian lesson: probes must not wait behind inference),
status counts (zero 5xx expected), streamed tokens/s, and whether the server is still alive.

  load_test.py --model DIR [--seconds 60] [--concurrency 8] [--max-tokens 64] [--json]
  load_test.py --url http://127.0.0.1:8080 --model-name tiny ...   (an already running server)
Without --model/--url it builds the tiny e2e model in a temp dir.
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import server_harness as sh  # noqa: E402


def percentile(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, int(round(p / 100.0 * (len(s) - 1)))))
    return s[k]


def run_load(host: str, port: int, model: str, seconds: float, concurrency: int, max_tokens: int,
             probe_interval: float = 0.01) -> dict:
    stop_at = time.time() + seconds
    statuses: Counter = Counter()
    errors: Counter = Counter()
    tokens = [0]
    lock = threading.Lock()
    health_ms: list[float] = []
    health_bad: Counter = Counter()

    def streamer(i: int) -> None:
        conn = http.client.HTTPConnection(host, port, timeout=120)
        n = 0
        while time.time() < stop_at:
            body = sh.chat_body(model, f"Load client {i} request {n}", stream=True, max_tokens=max_tokens,
                                temperature=0.7, seed=i * 100000 + n, ignore_eos=True)
            n += 1
            try:
                conn.request("POST", "/v1/chat/completions", body=json.dumps(body),
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                got = 0
                if r.status == 200:
                    for line in r:
                        if line.startswith(b"data: {") and b'"content":"' in line and b'"role"' not in line:
                            got += 1
                else:
                    r.read()
                with lock:
                    statuses[r.status] += 1
                    tokens[0] += got
            except (OSError, http.client.HTTPException) as e:
                with lock:
                    errors[type(e).__name__] += 1
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=120)
        conn.close()

    def prober() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=10)
        while time.time() < stop_at:
            t0 = time.perf_counter()
            try:
                conn.request("GET", "/health")
                r = conn.getresponse()
                r.read()
                dt = (time.perf_counter() - t0) * 1000.0
                if r.status == 200:
                    health_ms.append(dt)
                else:
                    health_bad[r.status] += 1
            except (OSError, http.client.HTTPException) as e:
                health_bad[type(e).__name__] += 1
                conn.close()
                conn = http.client.HTTPConnection(host, port, timeout=10)
            time.sleep(probe_interval)
        conn.close()

    threads = [threading.Thread(target=streamer, args=(i,)) for i in range(concurrency)]
    threads.append(threading.Thread(target=prober))
    t0 = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    return {
        "seconds": round(wall, 1),
        "concurrency": concurrency,
        "requests": sum(statuses.values()),
        "statuses": {str(k): v for k, v in sorted(statuses.items())},
        "5xx": sum(v for k, v in statuses.items() if k >= 500),
        "client_errors": dict(errors),
        "streamed_tokens_per_s": round(tokens[0] / wall, 1),
        "health_probes": len(health_ms),
        "health_failures": dict(health_bad),
        "health_p50_ms": round(percentile(health_ms, 50), 2),
        "health_p99_ms": round(percentile(health_ms, 99), 2),
        "health_max_ms": round(max(health_ms), 2) if health_ms else None,
        "health_mean_ms": round(statistics.fmean(health_ms), 2) if health_ms else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="model directory (tokenizer included) to serve")
    ap.add_argument("--url", help="an already running server")
    ap.add_argument("--model-name", default="tiny")
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=0, help="compute threads for the server (0: its default)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    server = None
    if a.url:
        u = urlparse(a.url)
        host, port = u.hostname, u.port
    else:
        model_dir = Path(a.model) if a.model else sh.make_tiny_chat_model(Path(tempfile.mkdtemp()) / "tiny-chat")
        extra = ["--max-queue", str(max(16, 2 * a.concurrency))] + (["--threads", str(a.threads)] if a.threads else [])
        server = sh.Server(sh.env_binary(), [f"{a.model_name}={model_dir}"], Path(tempfile.mkdtemp()) / "server.log", extra)
        host, port = "127.0.0.1", server.port
    try:
        result = run_load(host, port, a.model_name, a.seconds, a.concurrency, a.max_tokens)
        alive = sh.request(port, "GET", "/health")[0] == 200
        result["server_alive_after"] = alive
        if server:
            result["server_exit_code"] = server.terminate()
    finally:
        if server and server.proc.poll() is None:
            server.terminate()
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:24} {v}")
    ok = result["5xx"] == 0 and result["server_alive_after"] and result["health_p99_ms"] < 25
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
