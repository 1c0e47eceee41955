#!/usr/bin/env python3
"""Decode throughput with response_format against without, through a live server (the issue's target: a schema keeps
at least 95% of the unconstrained decode rate).

Each request streams /v1/chat/completions with the same prompt and max_tokens; the client timestamps every SSE chunk
(one token per chunk) and the decode rate is (tokens - 1) / (last chunk - first chunk), so prefill and HTTP set-up are
not counted. Each constrained request runs right after a free one with the same seed, and the ratio is taken per
pair, so both sides see the same load on a shared machine; the first pair of each schema is a warm-up (a new schema
computes its token masks on first use; a served schema is compiled once and stays cached).

  decode_throughput.py --model bench/out/qwen2-0.5b-q4g64 [--threads 2] [--tokens 128] [--reps 5] [--no-pld] [--json]
  SANCTUM_BIN=... decode_throughput.py --device cuda --shape qwen3_5-27b   (a random 4-bit checkpoint made for the run)
"""
from __future__ import annotations

import argparse
import http.client
import os
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import server_harness as sh  # noqa: E402

# A profile with required fields of every kind, so that every answer is long and walks many grammar states, and one
# real-world schema from tests/data/json_schemas.
PROFILE = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 40},
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "email": {"type": "string", "format": "email"},
    "address": {"type": "object", "properties": {"street": {"type": "string", "maxLength": 60}, "city": {"type": "string", "maxLength": 40},
                                                 "zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
                "required": ["street", "city", "zip"], "additionalProperties": False},
    "hobbies": {"type": "array", "items": {"type": "string", "maxLength": 30}, "minItems": 3, "maxItems": 8},
    "bio": {"type": "string", "maxLength": 600}},
    "required": ["name", "age", "email", "address", "hobbies", "bio"], "additionalProperties": False}
REAL = "Github_easy--o12228.json"
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
    ap.add_argument("--model", help="a checkpoint directory (or --shape)")
    ap.add_argument("--shape", help="make a random MLX 4-bit checkpoint of this production shape (bench/gpu/random_checkpoint.py)")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--no-pld", action="store_true")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if not a.model and not a.shape:
        ap.error("name --model or --shape")
    if a.shape:
        sys.path.insert(0, str(ROOT / "bench" / "gpu"))
        import batched_decode  # noqa: E402  (its checkpoint maker: the shape with the Qwen3 tokenizer)
        a.model = str(batched_decode.make_model(a.shape, Path(tempfile.mkdtemp()) / a.shape, None))

    real = json.loads((ROOT / "tests" / "data" / "json_schemas" / REAL).read_text())
    modes = {"profile schema": {"type": "json_schema", "json_schema": {"name": "profile", "schema": PROFILE}},
             REAL: {"type": "json_schema", "json_schema": {"name": "x", "schema": real}}}
    extra = ["--threads", str(a.threads), "--device", a.device] + (["--no-pld"] if a.no_pld else [])
    log = Path(tempfile.mkdtemp()) / "server.log"
    binary = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    server = sh.Server(binary, [f"m={a.model}"], log, extra=extra, ready_timeout=600)  # a GPU loads a 27B shape for minutes
    # Each constrained request is paired with a free one of the same seed right before it, so that both see the same
    # load on a shared machine; the ratio is taken per pair.
    out: dict[str, dict] = {}
    try:
        for mode, rf in modes.items():
            pairs = []
            for rep in range(a.reps + 1):
                body = {"model": "m", "messages": PROMPT, "max_tokens": a.tokens, "temperature": a.temperature, "seed": rep}
                free, n_free, _ = decode_rate(server.port, body)
                constrained, n, finish = decode_rate(server.port, {**body, "response_format": rf})
                if rep > 0:  # the first pair warms up (a new schema computes its masks on first use)
                    pairs.append((free, constrained, n_free, n, finish))
            ratios = [c / f for f, c, _, _, _ in pairs]
            out[mode] = {"ratio_median": statistics.median(ratios), "ratios": [round(r, 3) for r in ratios],
                         "free_tok_s": [round(p[0], 1) for p in pairs], "constrained_tok_s": [round(p[1], 1) for p in pairs],
                         "constrained_tokens": [p[3] for p in pairs], "finish": [p[4] for p in pairs]}
    finally:
        server.terminate()
    if a.json:
        print(json.dumps(out, indent=1))
    else:
        for m, o in out.items():
            print(f"{m:28s} constrained/free median {o['ratio_median'] * 100:5.1f}%  ratios {o['ratios']}")
            print(f"{'':28s} free {o['free_tok_s']} tok/s, constrained {o['constrained_tok_s']} tok/s, tokens {o['constrained_tokens']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
