#!/usr/bin/env python3
"""Load at the memory limit: `sanctum serve --memory-limit-mb N` under streaming clients that mix long
and short prompts for a fixed time, the server's resident memory sampled from /proc all along.

What must hold: no 5xx, no stream that ends in an error event, the server alive at the end, and the
peak resident memory within the limit. Requests whose prompt plus max_tokens cannot fit the state
bound even alone are a 400 by design; this load sizes its long prompts to fit, so every answer
here is expected to be a 200 (a 429 means the queue filled: reported, not an error).

  memory_load.py --model DIR --memory-limit-mb 900 [--seconds 60] [--concurrency 8]
                 [--long-tokens 3000] [--short-tokens 64] [--long-share 0.3] [--serve-arg=--kv-cache-dtype=bf16 ...]
"""
from __future__ import annotations

import argparse
import http.client
import json
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import server_harness as sh  # noqa: E402


def resident_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def run_clients(count: int, client, sampler, done: threading.Event) -> float:
    """Runs client(i) for each i < count on threads of their own beside sampler() on another, sets `done`
    once every client has returned and waits for the sampler; returns the clients' wall seconds."""
    threads = [threading.Thread(target=client, args=(i,)) for i in range(count)]
    watch = threading.Thread(target=sampler)
    t0 = time.time()
    for t in [watch] + threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.time() - t0
    done.set()
    watch.join()
    return wall


def stream_one(port: int, model: str, prompt: list[int], max_tokens: int, timeout: float = 600) -> tuple[int, int, bool]:
    """(status, tokens streamed, whether the stream ended in an error event); `timeout` bounds each wait for bytes."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    body = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "ignore_eos": True, "temperature": 0}
    try:
        conn.request("POST", "/v1/completions", body=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        if resp.status != 200:
            resp.read()
            return resp.status, 0, False
        tokens, errored = 0, False
        for raw in resp:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            msg = json.loads(line[len("data: "):])
            if "error" in msg:
                errored = True
            elif msg.get("choices") and msg["choices"][0].get("text"):
                tokens += 1
        return 200, tokens, errored
    finally:
        conn.close()


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True, help="checkpoint directory (tokenizer included)")
    ap.add_argument("--memory-limit-mb", type=int, required=True)
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--long-tokens", type=int, default=3000)
    ap.add_argument("--short-tokens", type=int, default=64)
    ap.add_argument("--long-share", type=float, default=0.3)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--serve-arg", action="append", default=[], help="an extra `sanctum serve` argument (repeatable)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    binary = sh.env_binary()
    name = "m"
    with tempfile.TemporaryDirectory(prefix="memory-load-") as tmp:
        extra = ["--threads", str(args.threads), "--memory-limit-mb", str(args.memory_limit_mb), *args.serve_arg]
        server = sh.Server(binary, [f"{name}={args.model}"], Path(tmp) / "server.log", extra=extra)
        try:
            status, _, health = sh.request(server.port, "GET", "/health")
            plan = json.loads(health)["memory"]
            vocab = json.loads((Path(args.model) / "config.json").read_text()).get("vocab_size", 32000)
            statuses, lock, stop_at = Counter(), threading.Lock(), time.time() + args.seconds
            totals = {"tokens": 0, "errored_streams": 0, "long": 0, "short": 0, "peak_rss": 0}

            def client(i: int) -> None:
                rng = random.Random(1000 + i)
                while time.time() < stop_at:
                    long = rng.random() < args.long_share
                    n = args.long_tokens if long else args.short_tokens
                    prompt = [rng.randrange(100, min(vocab, 30000)) for _ in range(n)]
                    code, tokens, errored = stream_one(server.port, name, prompt, args.max_tokens)
                    with lock:
                        statuses[code] += 1
                        totals["tokens"] += tokens
                        totals["errored_streams"] += errored
                        totals["long" if long else "short"] += code == 200

            def sampler() -> None:
                while time.time() < stop_at + 5 and server.proc.poll() is None:
                    totals["peak_rss"] = max(totals["peak_rss"], resident_bytes(server.proc.pid))
                    time.sleep(0.1)

            wall = run_clients(args.concurrency, client, sampler, threading.Event())
            alive = server.proc.poll() is None
            final = json.loads(sh.request(server.port, "GET", "/health")[2])["memory"] if alive else None
        finally:
            server.terminate()

    limit = args.memory_limit_mb << 20
    out = {"memory_limit_mib": args.memory_limit_mb, "seconds": wall, "concurrency": args.concurrency,
           "statuses": dict(statuses), "completed_long": totals["long"], "completed_short": totals["short"],
           "streamed_tokens": totals["tokens"], "errored_streams": totals["errored_streams"],
           "peak_rss_mib": totals["peak_rss"] / 2**20, "alive": alive, "plan_at_start": plan, "health_at_end": final,
           "serve_args": args.serve_arg}
    ok = (alive and totals["errored_streams"] == 0 and not any(code >= 500 for code in statuses)
          and totals["peak_rss"] <= limit)
    print(f"{args.seconds:.0f} s at --memory-limit-mb {args.memory_limit_mb}, {args.concurrency} clients, "
          f"{args.long_share:.0%} of prompts {args.long_tokens} tokens, the rest {args.short_tokens}: "
          f"statuses {dict(statuses)}, completed {totals['long']} long + {totals['short']} short, "
          f"{totals['tokens']} tokens streamed, {totals['errored_streams']} streams ended in an error; "
          f"peak RSS {totals['peak_rss'] / 2**20:.0f} MiB of {args.memory_limit_mb} MiB; "
          f"server {'alive' if alive else 'DEAD'} -> {'PASS' if ok else 'FAIL'}")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
