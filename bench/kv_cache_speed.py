"""Decode speed and memory per KV cache dtype on the CPU, in one run.

For each model, context and dtype (interleaved, so a loaded machine slows every dtype alike):
`sanctum bench --tg N --decode-context C --kv-cache-dtype D --json` in a fresh process, reporting decode
tok/s, the process's peak RSS beside the memory plan sanctum computes for one sequence of that length (weights,
KV cache, recurrent state, scratch: engine/memory_plan.h), and the KV bytes per token the dtype stores (counted here
from the config, as a check of the plan's formula: src/ops/kv_format.h) with the KV bytes of the context that implies.

  .venv/bin/python bench/kv_cache_speed.py --models models/default/mlx-4bit --contexts 512 4096

With --gguf (one per model, the same weights as GGUF: bench/peers/checkpoints.py writes both) llama.cpp
decodes beside it at each context with its f16 and its q8_0 KV cache (flash attention on, which its
quantized V needs), each in a child process of its own; run it with the bench venv
(bench/peers/setup_venv.sh):
  .venv-bench/bin/python bench/kv_cache_speed.py --models bench/out/qwen3_5-0.8b-q4g64 \
      --gguf bench/out/qwen3_5-0.8b-q4g64.gguf --contexts 512 4096 16384
"""
import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DTYPES = ["f32", "bf16", "q8", "q4v"]


def kv_bytes_per_token(model_dir: Path, dtype: str) -> int:
    c = json.loads((model_dir / "config.json").read_text())
    c = c.get("text_config", c)
    d = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    blocks = -(-d // 32)
    head = {"f32": 4 * d, "bf16": 2 * d, "q8": d + 2 * blocks, "q4": 20 * blocks}
    key, value = {"f32": ("f32", "f32"), "bf16": ("bf16", "bf16"), "q8": ("q8", "q8"), "q4v": ("q8", "q4")}[dtype]
    if "layer_types" in c:
        layers = sum(t == "full_attention" for t in c["layer_types"])
    elif "full_attention_interval" in c:
        layers = c["num_hidden_layers"] // c["full_attention_interval"]
    else:
        layers = c["num_hidden_layers"]
    return layers * c["num_key_value_heads"] * (head[key] + head[value])


def bench(binary, model, context, dtype, tg, reps, threads):
    cmd = [binary, "bench", "--model", str(model), "--pp", "1", "--tg", str(tg), "--decode-context", str(context), "--repetitions",
           str(reps), "--threads", str(threads), "--kv-cache-dtype", dtype, "--json"]
    env = {**os.environ, "SANCTUM_MATMUL_PRECISION": os.environ.get("SANCTUM_MATMUL_PRECISION", "f32")}
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    _, status, usage = os.wait4(p.pid, 0)
    out, err = p.stdout.read(), p.stderr.read()
    if status != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{err}")
    result = json.loads(out)
    tg_row = next(r for r in result["results"] if r["test"].startswith("tg"))
    return tg_row["tokens_per_second"], tg_row["stddev"], usage.ru_maxrss * 1024, result["memory_plan"]


def llama_decode(gguf: str, context: int, kv_type: str, tg: int, reps: int, threads: int) -> tuple[float, int]:
    """llama.cpp's decode tok/s of tg tokens after `context`, and its process's peak RSS."""
    cmd = [sys.executable, __file__, "--llama-child", gguf, str(context), kv_type, str(tg), str(reps), str(threads)]
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    _, status, usage = os.wait4(p.pid, 0)
    out, err = p.stdout.read(), p.stderr.read()
    if status != 0:
        raise SystemExit(f"llama.cpp decode failed:\n{err[-3000:]}")
    return json.loads(out.strip().splitlines()[-1])["tok_s"], usage.ru_maxrss * 1024


def llama_child(gguf: str, context: int, kv_type: str, tg: int, reps: int, threads: int) -> None:
    sys.path.insert(0, str(ROOT / "bench" / "peers"))
    import llama_peer

    peer = llama_peer.LlamaPeer(gguf, threads, n_ctx=context + tg + 16, kv_type=kv_type)
    try:
        ctx = llama_peer.random_tokens(context, peer.vocab, 7)
        gen = llama_peer.random_tokens(tg, peer.vocab, 9)
        peer.time_decode(ctx, gen[:4])  # warm-up
        rates = [tg / peer.time_decode(ctx, gen) for _ in range(reps)]
    finally:
        peer.close()
    print(json.dumps({"tok_s": sum(rates) / len(rates), "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--llama-child":
        g, c, k, t, r, th = sys.argv[2:8]
        return llama_child(g, int(c), k, int(t), int(r), int(th))
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum")))
    ap.add_argument("--models", nargs="+", default=[str(ROOT / "models" / "default" / "mlx-4bit")])
    ap.add_argument("--contexts", nargs="+", type=int, default=[512, 4096])
    ap.add_argument("--dtypes", nargs="+", default=DTYPES)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gguf", nargs="+", default=[], help="llama.cpp beside each model: its GGUF, in --models order")
    ap.add_argument("--llama-kv", nargs="+", default=["f16", "q8_0"], choices=["f16", "q8_0"], help="llama.cpp's KV cache types to run")
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()
    if a.gguf and len(a.gguf) != len(a.models):
        ap.error("--gguf names one file per --models entry")
    rows = []
    for m, model in enumerate(map(Path, a.models)):
        for context in a.contexts:
            for kv_type in a.llama_kv if a.gguf else []:
                tps, rss = llama_decode(a.gguf[m], context, kv_type, a.tg, a.repetitions, a.threads)
                rows.append({"model": model.name, "context": context, "dtype": f"llama.cpp {kv_type}", "decode_tokens_per_second": tps,
                             "peak_rss_mib": rss / 2**20})
                print(f"{model.name:22s} ctx {context:6d} llama.cpp {kv_type:4s}  decode {tps:8.2f} tok/s  peak RSS {rss / 2**20:8.1f} MiB",
                      flush=True)
            for dtype in a.dtypes:
                tps, sd, rss, plan = bench(a.binary, model, context, dtype, a.tg, a.repetitions, a.threads)
                per_token = kv_bytes_per_token(model, dtype)
                row = {"model": model.name, "context": context, "dtype": dtype, "decode_tokens_per_second": tps, "stddev": sd,
                       "peak_rss_mib": rss / 2**20, "kv_bytes_per_token": per_token,
                       "kv_mib_at_context": per_token * (context + a.tg) / 2**20, "memory_plan": plan,
                       "peak_rss_over_plan": rss / 2**20 / plan["total_mib"]}
                rows.append(row)
                print(f"{model.name:22s} ctx {context:6d} {dtype:4s}  decode {tps:8.2f} ± {sd:5.2f} tok/s  peak RSS {row['peak_rss_mib']:8.1f} MiB  "
                      f"plan {plan['total_mib']:8.1f} MiB (RSS/plan {row['peak_rss_over_plan']:.3f})  "
                      f"KV {per_token} B/token ({row['kv_mib_at_context']:.1f} MiB at the context)", flush=True)
                if abs(plan["kv_per_token_kib"] * 1024 - per_token) > 0.5:
                    raise SystemExit(f"the plan counts {plan['kv_per_token_kib'] * 1024} KV bytes per token, the config {per_token}")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
