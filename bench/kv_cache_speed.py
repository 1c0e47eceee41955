"""Decode speed and memory per KV cache dtype on the CPU, in one run.

For each model, context and dtype (interleaved, so a loaded machine slows every dtype alike):
`sanctum bench --tg N --decode-context C --kv-cache-dtype D --json` in a fresh process, reporting decode
tok/s, the process's peak RSS, and the KV bytes per token the dtype stores (the memory plan's
formula: src/ops/kv_format.h) with the KV bytes of the context that implies.

  .venv/bin/python bench/kv_cache_speed.py --models models/default/mlx-4bit --contexts 512 4096
"""
import argparse
import json
import os
import subprocess
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
    return tg_row["tokens_per_second"], tg_row["stddev"], usage.ru_maxrss * 1024


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum")))
    ap.add_argument("--models", nargs="+", default=[str(ROOT / "models" / "default" / "mlx-4bit")])
    ap.add_argument("--contexts", nargs="+", type=int, default=[512, 4096])
    ap.add_argument("--dtypes", nargs="+", default=DTYPES)
    ap.add_argument("--tg", type=int, default=64)
    ap.add_argument("--repetitions", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()
    rows = []
    for model in map(Path, a.models):
        for context in a.contexts:
            for dtype in a.dtypes:
                tps, sd, rss = bench(a.binary, model, context, dtype, a.tg, a.repetitions, a.threads)
                per_token = kv_bytes_per_token(model, dtype)
                row = {"model": model.name, "context": context, "dtype": dtype, "decode_tokens_per_second": tps, "stddev": sd,
                       "peak_rss_mib": rss / 2**20, "kv_bytes_per_token": per_token,
                       "kv_mib_at_context": per_token * (context + a.tg) / 2**20}
                rows.append(row)
                print(f"{model.name:22s} ctx {context:6d} {dtype:4s}  decode {tps:8.2f} ± {sd:5.2f} tok/s  peak RSS {row['peak_rss_mib']:8.1f} MiB  "
                      f"KV {per_token} B/token ({row['kv_mib_at_context']:.1f} MiB at the context)", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
