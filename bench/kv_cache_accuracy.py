"""KV cache dtypes against the f32 cache: logits and greedy generations at long contexts.

For each model and context length: one prompt of random token ids, then
  * `sanctum logits` over the whole prompt (the prompt's last 64 positions fed one token at a time,
    so both the prefill and the decode attention read the stored cache): per dtype the largest
    |logit - f32 logit| over every position, that over the f32 logits' spread (max - min), and the
    share of positions whose argmax equals f32's;
  * `sanctum generate --temperature 0` for --gen tokens after the prompt less --gen tokens: the
    greedy tokens equal to f32's before the first difference, and the share equal position by
    position.
Models: the embedded default model (qwen3_5 hybrid, trained; its positions end at 4096) and tiny
random mistral / qwen2 / qwen3_5 checkpoints built with mlx-lm as the parity suites build them
(tools/tiny_models.py; positions raised to 32768).

  .venv/bin/python bench/kv_cache_accuracy.py --contexts 4096 16384 --models default mistral
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
DTYPES = ["f32", "bf16", "q8", "q4v"]
DECODED = 64  # prompt positions fed one token at a time in the logits run


def build_random(name: str, out: Path) -> Path:
    sys.path.insert(0, str(ROOT / "tools"))
    import tiny_models  # needs mlx-lm, as the parity suites do

    cfg = dict(tiny_models.BASE_CONFIGS[name])
    cfg["max_position_embeddings"] = 32768
    model = tiny_models.make_model(cfg, seed=7)
    return tiny_models.save_checkpoint(model, cfg, out / name)


def run(cmd, env):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)


def measure(binary, model, vocab, context, gen, threads, work):
    rng = np.random.default_rng(context)
    prompt = rng.integers(0, vocab, size=context).tolist()
    ids = ",".join(map(str, prompt))
    env = {**os.environ, "SANCTUM_MATMUL_PRECISION": "f32"}
    logits, tokens = {}, {}
    for dtype in DTYPES:
        out = work / f"logits-{dtype}.npy"
        run([binary, "logits", "--model", str(model), "--prompt-ids", ids, "--split", str(context - DECODED), "--out", str(out),
             "--threads", str(threads), "--kv-cache-dtype", dtype], env)
        logits[dtype] = np.load(out)
        g = run([binary, "generate", "--model", str(model), "--prompt-ids", ",".join(map(str, prompt[: context - gen])),
                 "--max-tokens", str(gen), "--temperature", "0", "--no-pld", "--threads", str(threads), "--kv-cache-dtype", dtype], env)
        tokens[dtype] = [int(t) for t in g.stdout.split()[-1].split(",") if t]
    ref, ref_tokens = logits["f32"], tokens["f32"]
    spread = float(np.max(ref.max(axis=1) - ref.min(axis=1)))
    rows = []
    for dtype in DTYPES[1:]:
        diff = float(np.max(np.abs(logits[dtype] - ref)))
        agree = float(np.mean(np.argmax(logits[dtype], axis=1) == np.argmax(ref, axis=1)))
        t = tokens[dtype]
        prefix = next((i for i, (a, b) in enumerate(zip(t, ref_tokens)) if a != b), min(len(t), len(ref_tokens)))
        same = float(np.mean([a == b for a, b in zip(t, ref_tokens)])) if ref_tokens else 1.0
        rows.append({"dtype": dtype, "max_abs_logit_diff": diff, "relative_to_spread": diff / spread, "argmax_agreement": agree,
                     "greedy_prefix": prefix, "greedy_tokens": len(ref_tokens), "greedy_same_share": same})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default=os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum")))
    ap.add_argument("--models", nargs="+", default=["default", "mistral", "qwen2", "qwen3_5"])
    ap.add_argument("--contexts", nargs="+", type=int, default=[4096, 16384])
    ap.add_argument("--gen", type=int, default=256)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="also write the rows here")
    a = ap.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name in a.models:
            model = ROOT / "models" / "default" / "mlx-4bit" if name == "default" else build_random(name, tmp)
            vocab = json.loads((model / "config.json").read_text()).get("vocab_size") or 512
            limit = 4096 if name == "default" else 32768
            for context in a.contexts:
                if context > limit:
                    print(f"{name}: {context} tokens are past its {limit} positions; skipped", flush=True)
                    continue
                for row in measure(a.binary, model, vocab, context, a.gen, a.threads, tmp):
                    row.update(model=name, context=context)
                    results.append(row)
                    print(f"{name:8s} ctx {context:6d} {row['dtype']:4s}  max|dlogit| {row['max_abs_logit_diff']:.4g} "
                          f"({row['relative_to_spread']:.2e} of the spread)  argmax agree {row['argmax_agreement']:.4f}  "
                          f"greedy {row['greedy_prefix']}/{row['greedy_tokens']} before the first difference, "
                          f"{row['greedy_same_share']:.3f} same", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
