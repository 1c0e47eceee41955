#!/usr/bin/env python3
"""Peak RSS of one long prompt per KV cache dtype, beside the memory plan sanctum computes for it.

For each dtype: the plan `sanctum bench --json` reports for the model (weights, scratch of one prefill piece, one
sequence's recurrent state, KV bytes per token), with the KV bytes of the prompt plus the generated tokens added
(in whole 256-token blocks, which is what the cache commits and what the engine's admission counts);
then one `sanctum generate` of a random-id prompt of that length (a single prefill, unlike `sanctum bench`, which
also warms up) and its process's peak RSS from wait4. One JSON line per dtype.

  SANCTUM_MATMUL_PRECISION=int8 .venv/bin/python bench/kv_long_context_rss.py --model bench/out/qwen3_5-0.8b-q4g64 \\
      --tokens 32768 --dtypes bf16 q4v q8 f32
"""
import argparse
import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum")))
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokens", type=int, default=32768)
    ap.add_argument("--generate", type=int, default=2)
    ap.add_argument("--dtypes", nargs="+", default=["f32", "bf16", "q8", "q4v"])
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prompt = Path(tmp) / "prompt.txt"  # one line of ids: too long for a command-line argument
        prompt.write_text(",".join(str(100 + (i * 7919) % 240000) for i in range(a.tokens)) + "\n")
        for dtype in a.dtypes:
            out = subprocess.run([a.binary, "bench", "--model", a.model, "--pp", "1", "--tg", "1", "--repetitions", "1", "--threads",
                                  str(a.threads), "--kv-cache-dtype", dtype, "--json"], capture_output=True, text=True, check=True).stdout
            plan = json.loads(out)["memory_plan"]
            length = a.tokens + a.generate
            rows = -(-length // 256) * 256  # the cache commits whole 256-token blocks, as admission counts them
            total = plan["weights_mib"] + plan["scratch_mib"] + plan["recurrent_per_sequence_mib"] + plan["kv_per_token_kib"] * rows / 1024
            start = time.time()
            p = subprocess.Popen([a.binary, "generate", "--model", a.model, "--prompts-file", str(prompt), "--max-tokens", str(a.generate),
                                  "--ignore-eos", "--temperature", "0", "--threads", str(a.threads), "--kv-cache-dtype", dtype, "--no-pld"],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            _, status, usage = os.wait4(p.pid, 0)
            if status != 0:
                raise SystemExit(f"sanctum generate --kv-cache-dtype {dtype} failed: {p.stderr.read().decode()[-2000:]}")
            rss = usage.ru_maxrss / 1024
            print(json.dumps({"dtype": dtype, "tokens": length, "kv_rows": rows, "seconds": round(time.time() - start, 1),
                              "peak_rss_mib": round(rss, 1),
                              "plan_total_mib": round(total, 1), "rss_over_plan": round(rss / total, 3), "plan": plan}), flush=True)


if __name__ == "__main__":
    main()
