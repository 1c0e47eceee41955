#!/usr/bin/env python3
"""sanctum vs mlx-lm on this CPU, side by side in one run, on the same checkpoint.

Builds (once, cached under bench/out/) a random-weight Qwen2.5-0.5B-shaped qwen2 saved by mlx-lm as
an MLX 4-bit g64 checkpoint, then measures on the same machine:
  prefill tok/s (--prompt tokens), decode tok/s (--gen tokens after the prompt), peak RSS;
and prints sanctum/mlx-lm ratios, plus sanctum's decode as a fraction of the memory-bandwidth floor
(weight bytes per token / measured streaming read bandwidth).

Usage: .venv/bin/python bench/cpu_vs_mlx.py [--threads 2] [--prompt 512] [--gen 128] [--shape qwen2-0.5b]
"""
import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

SHAPES = {
    "qwen2-0.5b": {
        "model_type": "qwen2", "hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24,
        "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936, "rms_norm_eps": 1e-6,
        "max_position_embeddings": 32768, "rope_theta": 1000000.0, "tie_word_embeddings": True,
    },
    # Qwen3.5-0.8B: 24 layers (every 4th full attention), 8 / 2 heads of 256, GatedDeltaNet 16 / 16 of 128.
    "qwen3_5-0.8b": {
        "model_type": "qwen3_5", "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 24,
        "full_attention_interval": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "vocab_size": 248320, "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
        "tie_word_embeddings": True,
        "rope_parameters": {"type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    },
    # A small hybrid MoE: the 0.8B trunk with 64 experts of 256, top 4, plus a shared expert of 512.
    "qwen3_5_moe-small": {
        "model_type": "qwen3_5_moe", "hidden_size": 1024, "intermediate_size": 3584, "num_hidden_layers": 24,
        "full_attention_interval": 4, "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 16, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "vocab_size": 248320, "rms_norm_eps": 1e-6, "max_position_embeddings": 262144,
        "num_experts": 64, "num_experts_per_tok": 4, "moe_intermediate_size": 256, "shared_expert_intermediate_size": 512,
        "decoder_sparse_step": 1, "norm_topk_prob": True, "tie_word_embeddings": True,
        "rope_parameters": {"type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    },
}


def build_checkpoint(shape: str, out: Path) -> Path:
    if (out / "config.json").exists():
        return out
    import tiny_models
    model = tiny_models.make_model(SHAPES[shape], seed=0)
    tiny_models.save_checkpoint(model, SHAPES[shape], out, bits=4, group_size=64)
    return out


def mlx_child(model_dir: str, prompt_len: int, gen: int, reps: int) -> dict:
    """Runs in a fresh process so its peak RSS is its own."""
    import mlx.core as mx
    import numpy as np
    from mlx_lm.generate import generate_step
    from mlx_lm.models.cache import make_prompt_cache
    from mlx_lm.utils import load_model

    model, _ = load_model(Path(model_dir))
    vocab = SHAPES_FROM_DIR(model_dir)["vocab_size"]
    prompt = mx.array(np.random.default_rng(0).integers(0, vocab, size=prompt_len).tolist())
    pp, tg = [], []
    mx.eval(model(prompt[None, :16], cache=make_prompt_cache(model)))  # warm-up
    for rep in range(reps):
        cache = make_prompt_cache(model)
        t0 = time.perf_counter()
        logits = model(prompt[None], cache=cache)
        mx.eval(logits)
        t_pp = time.perf_counter() - t0
        # mlx-lm's own decode loop (asynchronous evaluation), after a fresh prefill of the same prompt.
        steps = 0
        t0 = None
        for _token, _ in generate_step(prompt, model, max_tokens=gen + 1):
            if t0 is None:
                t0 = time.perf_counter()  # first token = prefill; time the remaining `gen`
            else:
                steps += 1
        t_tg = time.perf_counter() - t0
        pp.append(prompt_len / t_pp)
        tg.append(steps / t_tg)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"pp": sum(pp) / len(pp), "tg": sum(tg) / len(tg), "peak_rss": rss}


def SHAPES_FROM_DIR(model_dir):
    return json.loads((Path(model_dir) / "config.json").read_text())


def run_sanctum(bin_path: str, model_dir: Path, prompt_len: int, gen: int, threads: int, reps: int, precision: str) -> dict:
    cmd = [bin_path, "bench", "--model", str(model_dir), "--pp", str(prompt_len), "--tg", str(gen), "--decode-context",
           str(prompt_len), "--repetitions", str(reps), "--threads", str(threads), "--matmul-precision", precision, "--json"]
    r = subprocess.run(cmd + ["--memory-bandwidth"], capture_output=True, text=True, check=True)
    data = json.loads(r.stdout)
    # Peak RSS from a run without --memory-bandwidth, whose 1 GiB probe buffer would count as the
    # process's own memory: a prefill of the prompt and a few decode steps at the same context.
    rss_cmd = ["/usr/bin/time", "-f", "%M", *cmd[:cmd.index("--tg") + 1], "8", *cmd[cmd.index("--tg") + 2:]]
    rss_cmd[rss_cmd.index("--repetitions") + 1] = "1"
    rss = subprocess.run(rss_cmd, capture_output=True, text=True, check=True)
    peak_kb = int(rss.stderr.strip().splitlines()[-1])
    res = {x["test"].split("@")[0][:2]: x for x in data["results"]}
    return {"pp": res["pp"]["tokens_per_second"], "tg": res["tg"]["tokens_per_second"],
            "floor_fraction": res["tg"].get("fraction_of_bandwidth_floor"), "bandwidth": data.get("memory_read_gb_per_second"),
            "weight_bytes": data["weight_bytes_per_token"], "peak_rss": peak_kb * 1024}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen2-0.5b", choices=sorted(SHAPES))
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--mlx-reps", type=int, default=1)
    ap.add_argument("--mlx-prompt", type=int, help="mlx-lm's prompt length (default: --prompt); shorter runs favour it")
    ap.add_argument("--mlx-gen", type=int, help="mlx-lm's decode tokens (default: --gen)")
    ap.add_argument("--mlx-timeout", type=int, default=1800, help="seconds before mlx-lm is reported as not finishing")
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--mlx-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.mlx_child:
        print(json.dumps(mlx_child(a.mlx_child, a.prompt, a.gen, a.reps)))
        return 0

    model_dir = build_checkpoint(a.shape, ROOT / "bench" / "out" / f"{a.shape}-q4g64")
    files = sum(p.stat().st_size for p in model_dir.glob("*.safetensors"))
    ours = {p: run_sanctum(a.sanctum, model_dir, a.prompt, a.gen, a.threads, a.reps, p) for p in ("f32", "int8")}
    env = dict(os.environ)
    mlx_prompt, mlx_gen = a.mlx_prompt or a.prompt, a.mlx_gen or a.gen
    try:
        r = subprocess.run([sys.executable, __file__, "--mlx-child", str(model_dir), "--prompt", str(mlx_prompt), "--gen", str(mlx_gen),
                            "--reps", str(a.mlx_reps)], capture_output=True, text=True, check=True, env=env, timeout=a.mlx_timeout)
        mlx = json.loads(r.stdout.strip().splitlines()[-1])
    except subprocess.TimeoutExpired:
        # An upper bound: it did not even finish one prefill and decode in the time allowed.
        bound = (mlx_prompt + mlx_gen) / a.mlx_timeout
        print(f"mlx-lm did not finish {mlx_prompt}+{mlx_gen} tokens in {a.mlx_timeout} s: below {bound:.2f} tok/s")
        mlx = {"pp": bound, "tg": bound, "peak_rss": 0, "bound": True}

    print(f"shape {a.shape} MLX 4-bit g64, weights {files / 1e6:.0f} MB, {a.threads} threads, "
          f"prompt {a.prompt}, decode {a.gen} after the prompt (mlx-lm: {mlx_prompt} / {mlx_gen})"
          + ("; mlx-lm figures are upper bounds" if mlx.get("bound") else ""))
    print(f"{'':22}{'prefill tok/s':>14}{'vs mlx':>8}{'decode tok/s':>14}{'vs mlx':>8}{'peak RSS MB':>13}{'% floor':>9}")
    for name, x in [("sanctum f32", ours["f32"]), ("sanctum int8-act", ours["int8"]), ("mlx-lm", mlx)]:
        floor = f"{x['floor_fraction'] * 100:8.0f}%" if x.get("floor_fraction") else f"{'':9}"
        print(f"{name:22}{x['pp']:14.1f}{x['pp'] / mlx['pp']:8.2f}{x['tg']:14.1f}{x['tg'] / mlx['tg']:8.2f}"
              f"{x['peak_rss'] / 1e6:13.0f}{floor}")
    f32 = ours["f32"]
    print(f"memory read bandwidth {f32['bandwidth']:.1f} GB/s; weights read per decoded token {f32['weight_bytes'] / 1e6:.0f} MB; "
          f"bandwidth floor {f32['bandwidth'] * 1e9 / f32['weight_bytes']:.1f} tok/s; weight files {files / 1e6:.0f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
