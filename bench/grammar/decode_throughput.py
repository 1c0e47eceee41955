#!/usr/bin/env python3
"""Decode throughput with response_format against without, through a live server (the issue's target: a schema keeps
at least 95% of the unconstrained decode rate).

Each request streams /v1/chat/completions with the same prompt and max_tokens; the client timestamps every SSE chunk
(one token per chunk) and the decode rate is (tokens - 1) / (last chunk - first chunk), so prefill and HTTP set-up are
not counted. Modes run interleaved, repetition by repetition, after one warm-up request each (a new schema computes its
token masks on first use; a served schema is compiled once and stays cached). A random-weight model writes the same
few tokens again and again, so a constrained answer spends most of its tokens inside a JSON string: the string
context's mask, the common steady state of long outputs.

  decode_throughput.py --model bench/out/qwen2-0.5b-q4g64 [--threads 2] [--tokens 128] [--reps 5] [--no-pld] [--json]
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import server_harness as sh  # noqa: E402

SCHEMAS = ["Github_easy--o12228.json", "Github_medium--o21221.json", "Github_medium--o34384.json"]
PROMPT = [{"role": "user", "content": "Describe a user profile as JSON: name, age, email, address and a list of hobbies."}]


def decode_rate(port: int, body: dict) -> tuple[float, int, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/chat/completions", body=json.dumps({**body, "stream": True}).encode(),
                 headers={"Content-Type": "application/json"})
    r = conn.getresponse()
    if r.status != 200:
        raise RuntimeError(r.read().decode())
    times, finish = [], ""
    for line in r:
        if not line.startswith(b"data: {"):
            continue
        chunk = json.loads(line[6:])
        choice = chunk["choices"][0] if chunk.get("choices") else {}
        if choice.get("delta", {}).get("content") or choice.get("delta", {}).get("reasoning_content"):
            times.append(time.perf_counter())
        finish = choice.get("finish_reason") or finish
    conn.close()
    if len(times) < 2:
        return 0.0, len(times), finish
    return (len(times) - 1) / (times[-1] - times[0]), len(times), finish


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--no-pld", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    modes = {"free": None, "json_object": {"type": "json_object"}}
    available = [s for s in SCHEMAS if (ROOT / "tests" / "data" / "json_schemas" / s).exists()]
    for s in available:
        schema = json.loads((ROOT / "tests" / "data" / "json_schemas" / s).read_text())
        modes[s] = {"type": "json_schema", "json_schema": {"name": "x", "schema": schema}}
    extra = ["--threads", str(a.threads)] + (["--no-pld"] if a.no_pld else [])
    log = Path(tempfile.mkdtemp()) / "server.log"
    server = sh.Server(str(ROOT / "build" / "sanctum"), [f"m={a.model}"], log, extra=extra)
    rates: dict[str, list[float]] = {m: [] for m in modes}
    tokens: dict[str, list[int]] = {m: [] for m in modes}
    try:
        for rep in range(a.reps + 1):
            for mode, rf in modes.items():
                body = {"model": "m", "messages": PROMPT, "max_tokens": a.tokens, "temperature": a.temperature, "seed": 1}
                if rf:
                    body["response_format"] = rf
                rate, n, _ = decode_rate(server.port, body)
                if rep > 0:  # the first round warms every mode up
                    rates[mode].append(rate)
                    tokens[mode].append(n)
    finally:
        server.terminate()
    free = statistics.median(rates["free"])
    out = {m: {"tok_s_median": statistics.median(r), "tok_s_all": [round(x, 1) for x in r], "tokens": tokens[m],
               "vs_free": statistics.median(r) / free} for m, r in rates.items()}
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        for m, o in out.items():
            print(f"{m:32s} {o['tok_s_median']:7.1f} tok/s  {o['vs_free'] * 100:5.1f}% of free  tokens {o['tokens']}  all {o['tok_s_all']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
