#!/usr/bin/env python3
"""Memory of concurrent requests that share a long prefix (an agent's system prompt and tools), with the
KV cache's prefix pages shared (the default) and copied per sequence (`--tune kv_shared_pages=0`),
side by side in one run.

Per mode: `sanctum serve` with its prompt cache; one request of the prefix alone puts the prefix in the
prompt cache; then --streams concurrent streams, each the prefix plus a distinct suffix, all continuing
the cached prefix. Sampled all along: the server's memory with each page counted once (PSS from
/proc/PID/smaps_rollup; the kernel's RSS counts a page once per mapping), sanctum_kv_cache_page_bytes,
sanctum_kv_cache_shared_page_bytes, the running sequences and their state (sanctum_engine_state_bytes,
shared buffers once). Reported: what the streams add over the
server after the warm-up (peak PSS minus PSS before them), the most streams that ran at once (with
--kv-cache-mb, admission counts the cached prefix's rows once where pages are shared), and the tokens
of every stream, which must be the same in both modes (temperature 0). Exit status 1 if any request
failed or the modes' tokens differ.

  .venv/bin/python bench/server/shared_prefix_memory.py --model bench/out/qwen2-0.5b-q4g64 \\
      --prefix-tokens 3000 --streams 8 [--kv-cache-mb 100]

On a GPU (--device cuda) the KV cache's granules are what is shared (sanctum_kv_cache_gpu_granule_bytes
and sanctum_kv_cache_gpu_shared_granule_bytes are sampled instead of the pages; PSS is the host's, the
peak state the GPU's): --shape builds a random 4-bit checkpoint at a production shape, as
bench/gpu/batched_decode.py does. In the bf16 mode the two modes' tokens may differ where the random
weights' logits nearly tie: decode attention splits a cache's keys by its capacity, which the two
storages grow differently; --matmul-precision f32 compares them exactly.

  SANCTUM_BIN=... python3 bench/server/shared_prefix_memory.py --device cuda --shape qwen3_5-27b \\
      --prefix-tokens 8000 --streams 16 --kv-cache-mb 3000 --max-tokens 64 [--matmul-precision f32]
"""
from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "tests" / "e2e"))
sys.path.insert(0, str(HERE))
import server_harness as sh  # noqa: E402
from memory_load import resident_bytes, run_clients  # noqa: E402

MIB = 1 << 20
# The KV cache's memory as the server counts it, and the part of it more than one holder maps.
KV_METRICS = {"cpu": ("sanctum_kv_cache_page_bytes", "sanctum_kv_cache_shared_page_bytes"),
              "cuda": ("sanctum_kv_cache_gpu_granule_bytes", "sanctum_kv_cache_gpu_shared_granule_bytes")}


def pss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1]) * 1024
    return 0


def completion(port: int, name: str, prompt: list[int], max_tokens: int) -> tuple[int, list[str], float]:
    """(status, the streamed texts, seconds to the first one)."""
    t0 = time.time()
    body = {"model": name, "prompt": prompt, "max_tokens": max_tokens, "stream": True, "ignore_eos": True, "temperature": 0}
    stream = sh.SseStream(port, "/v1/completions", body, timeout=3600)
    if stream.status != 200:
        return stream.status, [], 0.0
    texts, first = [], 0.0
    for data in stream.events():
        if data == "[DONE]":
            break
        msg = json.loads(data)
        if "error" in msg:
            return 500, texts, first
        if msg.get("choices"):
            first = first or time.time() - t0
            texts.append(msg["choices"][0].get("text") or "")
    stream.close()
    return 200, texts, first


def run_mode(args, shared: bool, tmp: Path) -> dict:
    name = "m"
    extra = ["--threads", str(args.threads), "--max-seqs", str(args.streams), "--max-queue", str(args.streams), "--device", args.device]
    extra += ["--kv-cache-mb", str(args.kv_cache_mb)] if args.kv_cache_mb else []
    extra += [] if shared else ["--tune", "kv_shared_pages=0"]
    extra += ["--matmul-precision", args.matmul_precision] if args.matmul_precision else []
    label = "shared" if shared else "copied"
    server = sh.Server(sh.env_binary(), [f"{name}={args.model}"], tmp / f"server-{label}.log", extra=extra, ready_timeout=120)
    try:
        config = json.loads((Path(args.model) / "config.json").read_text())
        vocab = config.get("vocab_size") or config.get("text_config", {}).get("vocab_size", 32000)
        rng = random.Random("prefix")
        prefix = [rng.randrange(100, min(vocab, 100000)) for _ in range(args.prefix_tokens)]
        status, _, _ = completion(server.port, name, prefix, 1)  # the prefix goes into the prompt cache
        assert status == 200, f"warm-up answered {status}"
        time.sleep(1.0)
        before = pss_bytes(server.proc.pid)
        peak = {"pss": before, "rss": 0, "pages": 0.0, "shared": 0.0, "running": 0.0, "state": 0.0}
        done = threading.Event()
        held_metric, shared_metric = KV_METRICS[args.device]

        def sampler() -> None:
            while not done.is_set() and server.proc.poll() is None:
                peak["pss"] = max(peak["pss"], pss_bytes(server.proc.pid))
                peak["rss"] = max(peak["rss"], resident_bytes(server.proc.pid))
                text = sh.request(server.port, "GET", "/metrics")[2].decode()
                peak["pages"] = max(peak["pages"], sh.metric_value(text, held_metric))
                peak["shared"] = max(peak["shared"], sh.metric_value(text, shared_metric))
                peak["running"] = max(peak["running"], sh.metric_value(text, "sanctum_engine_running_sequences", {"model": name}))
                peak["state"] = max(peak["state"], sh.metric_value(text, "sanctum_engine_state_bytes", {"model": name}))
                time.sleep(0.1)

        results = [None] * args.streams

        def client(i: int) -> None:
            suffix = [random.Random(f"suffix-{i}").randrange(100, min(vocab, 100000)) for _ in range(args.suffix_tokens)]
            results[i] = completion(server.port, name, prefix + suffix, args.max_tokens)

        wall = run_clients(args.streams, client, sampler, done)
        metrics = sh.request(server.port, "GET", "/metrics")[2].decode()
        hits = sh.metric_value(metrics, "sanctum_mlx_prompt_cache_lookups_total", {"result": "hit"})
    finally:
        server.terminate()
    ttfts = sorted(r[2] for r in results)
    return {"mode": label, "streams": args.streams, "prefix_tokens": args.prefix_tokens, "suffix_tokens": args.suffix_tokens,
            "max_tokens": args.max_tokens, "statuses": [r[0] for r in results], "prompt_cache_hits": hits,
            "pss_before_mib": round(before / MIB, 1), "peak_pss_mib": round(peak["pss"] / MIB, 1),
            "added_mib": round((peak["pss"] - before) / MIB, 1), "peak_rss_mib": round(peak["rss"] / MIB, 1),
            "peak_kv_pages_mib": round(peak["pages"] / MIB, 1), "peak_shared_pages_mib": round(peak["shared"] / MIB, 1),
            "most_running": int(peak["running"]), "peak_state_mib": round(peak["state"] / MIB, 1),
            "ttft_p50_s": round(ttfts[len(ttfts) // 2], 3), "seconds": round(wall, 1), "texts": ["".join(r[1]) for r in results]}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    source = ap.add_mutually_exclusive_group(required=True)
    source.add_argument("--model", help="checkpoint directory (tokenizer included)")
    source.add_argument("--shape", help="a random 4-bit checkpoint at this production shape (bench/gpu/random_checkpoint.py)")
    ap.add_argument("--device", default="cpu", choices=sorted(KV_METRICS))
    ap.add_argument("--prefix-tokens", type=int, default=3000)
    ap.add_argument("--suffix-tokens", type=int, default=32)
    ap.add_argument("--streams", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--kv-cache-mb", type=int, help="the server's --kv-cache-mb (default: its own)")
    ap.add_argument("--matmul-precision", help="the server's --matmul-precision (default: its own)")
    ap.add_argument("--json", type=Path, help="also write the rows here")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="shared-prefix-") as tmp:
        if args.shape:
            sys.path.insert(0, str(HERE.parent / "gpu"))
            from batched_decode import make_model  # noqa: E402
            args.model = str(make_model(args.shape, Path(tmp) / args.shape, None))
        rows = [run_mode(args, True, Path(tmp)), run_mode(args, False, Path(tmp))]
    for r in rows:
        print(json.dumps({k: v for k, v in r.items() if k != "texts"}), flush=True)
    print(f"\n{args.streams} streams of a {args.prefix_tokens}-token cached prefix + {args.suffix_tokens} tokens each, "
          f"{args.max_tokens} generated")
    unit = "granules" if args.device == "cuda" else "pages"
    print(f"| KV prefix | added MiB (PSS) | peak KV {unit} MiB | shared {unit} MiB | peak RSS MiB | peak state MiB | most at once | "
          "TTFT p50 s | seconds |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        print(f"| {r['mode']} | {r['added_mib']} | {r['peak_kv_pages_mib']} | {r['peak_shared_pages_mib']} | {r['peak_rss_mib']} | "
              f"{r['peak_state_mib']} | {r['most_running']} | {r['ttft_p50_s']} | {r['seconds']} |")
    shared, copied = rows
    print(f"copied / shared added memory: {copied['added_mib'] / max(shared['added_mib'], 0.1):.2f}x")
    ok = all(s == 200 for r in rows for s in r["statuses"]) and shared["texts"] == copied["texts"]
    if shared["texts"] != copied["texts"]:
        print("the two modes' tokens differ")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
