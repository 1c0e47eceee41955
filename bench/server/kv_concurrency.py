#!/usr/bin/env python3
"""How many concurrent sequences of a given length fit a fixed `--memory-limit-mb`, per KV cache dtype.

For each dtype: `sanctum serve --memory-limit-mb N --kv-cache-dtype D` (the memory bound, not --max-seqs, is
what limits the batch), its memory plan from /health, and the count that plan admits: the state pool (the
state bound, plus the prompt cache's share when the cache yields to the state) over one sequence's state at
its longest (recurrent state + KV bytes per token x the sequence's whole 256-token blocks), as the engine's
admission counts it. Then N = that count + --extra streaming requests at once, each a distinct random prompt
(the prompt cache cannot share them) of --sequence-tokens minus --max-tokens tokens; sanctum_engine_running_sequences
sampled from /metrics gives how many ran at once, /proc the server's peak resident memory.

What must hold per dtype: every request a 200, no stream ending in an error event, the most running at once
equal to the plan's count (the rest waited), and the peak RSS within the limit. One JSON line per dtype, then
a table; exit status 1 if anything failed.

  SANCTUM_MATMUL_PRECISION=int8 .venv/bin/python bench/server/kv_concurrency.py \\
      --model bench/out/qwen3_5-0.8b-q4g64 --memory-limit-mb 800 --dtypes f32 bf16 q8 q4v
"""
from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "e2e"))
sys.path.insert(0, str(HERE))
import server_harness as sh  # noqa: E402
from memory_load import resident_bytes, run_clients, stream_one  # noqa: E402

MIB = 1 << 20
BLOCK = 256  # KvCache::kBlockTokens: a cache commits whole blocks, and admission counts them


def planned_count(plan: dict, sequence_tokens: int, max_seqs: int) -> tuple[int, float, float]:
    """(sequences the plan admits at once, the state pool in MiB, one sequence's state in MiB)."""
    pool = plan["state_bound_mib"] + (plan["prompt_cache_mib"] if plan["cache_yields_to_state"] else 0)
    rows = -(-sequence_tokens // BLOCK) * BLOCK
    per_sequence = plan["recurrent_per_sequence_mib"] + plan["kv_per_token_kib"] * rows / 1024
    return max(1, min(max_seqs, math.floor(pool / per_sequence + 1e-9))), pool, per_sequence


def run_dtype(args, dtype: str, tmp: Path) -> dict:
    name = "m"
    extra = ["--threads", str(args.threads), "--memory-limit-mb", str(args.memory_limit_mb), "--kv-cache-dtype", dtype,
             "--max-seqs", str(args.max_seqs), "--max-queue", str(args.max_seqs)]
    server = sh.Server(sh.env_binary(), [f"{name}={args.model}"], tmp / f"server-{dtype}.log", extra=extra, ready_timeout=120)
    try:
        plan = json.loads(sh.request(server.port, "GET", "/health")[2])["memory"]["models"][name]
        count, pool, per_sequence = planned_count(plan, args.sequence_tokens, args.max_seqs)
        n = count + args.extra
        config = json.loads((Path(args.model) / "config.json").read_text())
        vocab = config.get("vocab_size") or config.get("text_config", {}).get("vocab_size", 32000)
        prompt_tokens = args.sequence_tokens - args.max_tokens
        statuses, lock, done = Counter(), threading.Lock(), threading.Event()
        seen = {"running": 0, "state_bytes": 0.0, "rss": 0, "tokens": 0, "errored": 0}

        def client(i: int) -> None:
            rng = random.Random(f"{dtype}-{i}")
            prompt = [rng.randrange(100, min(vocab, 100000)) for _ in range(prompt_tokens)]
            try:  # a queued request sees no byte until it runs: on a slow machine that is many minutes
                code, tokens, errored = stream_one(server.port, name, prompt, args.max_tokens, timeout=args.client_timeout)
            except OSError as e:
                code, tokens, errored = f"no answer: {e!r}", 0, False
            with lock:
                statuses[code] += 1
                seen["tokens"] += tokens
                seen["errored"] += errored

        def sampler() -> None:
            last_metrics = 0.0
            while not done.is_set() and server.proc.poll() is None:
                seen["rss"] = max(seen["rss"], resident_bytes(server.proc.pid))
                if time.time() - last_metrics >= 0.25:
                    last_metrics = time.time()
                    text = sh.request(server.port, "GET", "/metrics")[2].decode()
                    seen["running"] = max(seen["running"], int(sh.metric_value(text, "sanctum_engine_running_sequences", {"model": name})))
                    seen["state_bytes"] = max(seen["state_bytes"], sh.metric_value(text, "sanctum_engine_state_bytes", {"model": name}))
                time.sleep(0.05)

        wall = run_clients(n, client, sampler, done)
        alive = server.proc.poll() is None
    finally:
        server.terminate()
    limit = args.memory_limit_mb * MIB
    ok = (alive and statuses == Counter({200: n}) and seen["errored"] == 0 and seen["running"] == count and seen["rss"] <= limit)
    return {"dtype": dtype, "memory_limit_mib": args.memory_limit_mb, "sequence_tokens": args.sequence_tokens,
            "prompt_tokens": prompt_tokens, "max_tokens": args.max_tokens, "requests": n, "planned_at_once": count,
            "state_pool_mib": round(pool, 1), "per_sequence_mib": round(per_sequence, 2), "most_running_at_once": seen["running"],
            "peak_state_mib": round(seen["state_bytes"] / MIB, 1), "statuses": dict(statuses), "errored_streams": seen["errored"],
            "streamed_tokens": seen["tokens"], "peak_rss_mib": round(seen["rss"] / MIB, 1), "seconds": round(wall, 1), "alive": alive,
            "pass": ok, "plan": plan}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="checkpoint directory (tokenizer included)")
    ap.add_argument("--memory-limit-mb", type=int, required=True)
    ap.add_argument("--dtypes", nargs="+", default=["f32", "bf16", "q8", "q4v"])
    ap.add_argument("--sequence-tokens", type=int, default=4096, help="prompt plus max_tokens of each request")
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--extra", type=int, default=2, help="requests beyond the plan's count, which must wait")
    ap.add_argument("--max-seqs", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--client-timeout", type=float, default=3600, help="seconds a client waits for the server's next bytes")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()

    rows = []
    with tempfile.TemporaryDirectory(prefix="kv-concurrency-") as tmp:
        for dtype in args.dtypes:
            row = run_dtype(args, dtype, Path(tmp))
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(f"\n--memory-limit-mb {args.memory_limit_mb}, sequences of {args.sequence_tokens} tokens "
          f"({args.sequence_tokens - args.max_tokens} prompt + {args.max_tokens} generated)")
    print("| dtype | state pool MiB | per sequence MiB | plan admits | ran at once | requests | statuses | peak RSS MiB | pass |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |")
    for r in rows:
        print(f"| {r['dtype']} | {r['state_pool_mib']} | {r['per_sequence_mib']} | {r['planned_at_once']} | {r['most_running_at_once']} | "
              f"{r['requests']} | {r['statuses']} | {r['peak_rss_mib']} | {'yes' if r['pass'] else 'NO'} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if all(r["pass"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
