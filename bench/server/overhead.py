#!/usr/bin/env python3
"""Server overhead: time to first token through HTTP minus the in-process prefill of the same request.

Each request is a streamed /v1/completions call with a fixed prompt of --prompt-tokens ids and
max_tokens=1. The client times send -> first SSE data chunk; the server's access log gives the same
request's in-process prefill (prefill + first sample, `prefill_ms`). The difference is everything
the server adds: HTTP parse, validation, queue hand-off, thread wake-ups, SSE write. The script also
reports `sanctum bench --pp N` (a separate in-process run) for comparison.

  overhead.py [--model DIR] [--requests 50] [--prompt-tokens 32] [--threads N] [--json]
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import server_harness as sh  # noqa: E402


def ttft_once(port: int, prompt: list[int], request_id: str) -> float:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    body = json.dumps({"model": "tiny", "prompt": prompt, "max_tokens": 1, "temperature": 0, "stream": True,
                       "ignore_eos": True}).encode()
    conn.connect()  # connection set-up is the client's cost, not the server's
    t0 = time.perf_counter()
    conn.request("POST", "/v1/completions", body=body, headers={"Content-Type": "application/json",
                                                               "X-Request-Id": request_id})
    r = conn.getresponse()
    ttft = None
    for line in r:
        if line.startswith(b"data: {"):
            ttft = time.perf_counter() - t0
            break
    r.read()
    conn.close()
    return ttft * 1000.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--prompt-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    model_dir = Path(a.model) if a.model else sh.make_tiny_chat_model(Path(tempfile.mkdtemp()) / "tiny-chat")
    threads = ["--threads", str(a.threads)] if a.threads else []
    server = sh.Server(sh.env_binary(), [f"tiny={model_dir}"], Path(tempfile.mkdtemp()) / "server.log", threads)
    prompt = [(7919 * i) % 150000 + 100 for i in range(a.prompt_tokens)]
    try:
        for i in range(5):  # warm-up: first-touch of weights and scratch
            ttft_once(server.port, prompt, f"warm-{i}")
        ttft = {}
        for i in range(a.requests):
            rid = f"ovh-{i}"
            ttft[rid] = ttft_once(server.port, prompt, rid)
        time.sleep(0.2)
        prefill = {r["request_id"]: float(r["prefill_ms"]) for r in server.log_records()
                   if r.get("msg") == "access" and r.get("request_id", "").startswith("ovh-")}
    finally:
        server.terminate()

    overhead = [ttft[k] - prefill[k] for k in ttft if k in prefill]
    bench = subprocess.run([sh.env_binary(), "bench", "--model", str(model_dir), "--pp", str(a.prompt_tokens), "--tg", "1",
                            "--repetitions", "10", "--json"] + threads, capture_output=True, text=True)
    pp_ms = None
    if bench.returncode == 0:
        out = json.loads(bench.stdout)
        for r in out.get("results", []):
            if r.get("test") == f"pp{a.prompt_tokens}":
                pp_ms = a.prompt_tokens / r["tokens_per_second"] * 1000.0
    result = {
        "prompt_tokens": a.prompt_tokens,
        "requests": len(overhead),
        "ttft_http_median_ms": round(statistics.median(ttft.values()), 3),
        "prefill_in_server_median_ms": round(statistics.median(prefill[k] for k in ttft if k in prefill), 3),
        "overhead_median_ms": round(statistics.median(overhead), 3),
        "overhead_p90_ms": round(sorted(overhead)[int(0.9 * (len(overhead) - 1))], 3),
        "bench_pp_in_process_ms": round(pp_ms, 3) if pp_ms else None,
        "ttft_minus_bench_pp_median_ms": round(statistics.median(ttft.values()) - pp_ms, 3) if pp_ms else None,
    }
    if a.json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:32} {v}")
    return 0 if result["overhead_median_ms"] < 2.0 else 1


if __name__ == "__main__":
    sys.exit(main())
