"""Every tuning knob's off path (`sanctum --help-tuning`), on a GPU machine: each CUDA knob turned off
alone must give what the defaults give, in the bf16 mode where the fused and tiled paths run.

- Logits (`sanctum logits --device cuda`, a prompt of 64 tokens as one forward, then 32 one-token
  steps), on three models that between them reach every path: the embedded default model (a dense
  hybrid: GatedDeltaNet and gated attention, head dim 64), a random-weight MoE at the Qwen3.6-35B-A3B
  layer shapes cut to 4 layers (the expert launches), and a random-weight Devstral-24B shape cut to 2
  layers (head dim 128: the wgmma flash attention and its bf16 output). A knob whose two paths do the
  same arithmetic must give the same bits; any other the same top token wherever the defaults' top two
  are apart, and every logit within a fraction of the largest (a looser one on the MoE, where a
  rounding moved elsewhere can send a token to another expert).
- Tokens (`sanctum generate --device cuda --temperature 0`, 200 tokens): identical to the defaults'
  for the knobs of the decode step as a whole (graphs, device picks, chaining, the host copy, early
  launch), which change no arithmetic.

  python3 tests/gpu/tuning_off_paths_check.py [--knobs a,b]     (needs SANCTUM_BIN)
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from logit_compare import MODEL, agrees

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
import random_checkpoint  # noqa: E402

# As split_norm_check.py: a knob that moves where a value is rounded moves the logits by a fraction of
# their scale; a wrong path moves them by far more. Measured on an H200: at most 0.018 of the scale on
# the dense models (gemm_bf16_out on the default model) and 0.108 on the MoE (delta_bf16).
GAP = 0.5
TOLERANCE = 0.03
MOE_TOLERANCE = 0.15
# The knobs whose off path does the same arithmetic in another launch shape, order of launches or
# memory placement: their logits must be identical (measured so on the H200 on all three models).
SAME_BITS = ("cuda_graphs", "gpu_sampling", "batch_graphs", "chained_decode", "host_copy_kernel", "early_launch", "matvec_split_waves", "weight_evict_first",
             "fuse_swiglu", "route_in_experts", "stage_expert_tables", "fuse_head_norm_rope", "fuse_attention_gate", "norm_bf16_out",
             "attention_bf16_out", "group_decode_experts")
# The knobs whose off path changes no arithmetic: their tokens must be identical.
STEP_KNOBS = ("cuda_graphs", "gpu_sampling", "batch_graphs", "chained_decode", "host_copy_kernel", "early_launch")


def cuda_knobs() -> list[str]:
    table = subprocess.run([os.environ["SANCTUM_BIN"], "--help-tuning", "--markdown"], capture_output=True, text=True, check=True).stdout
    return re.findall(r"^\| `([a-z0-9_]+)` \| cuda \|", table, flags=re.M)


def sanctum(args: list[str], knob: str | None) -> subprocess.CompletedProcess:
    env = dict(os.environ)
    env.pop("SANCTUM_TUNE", None)
    tune = ["--tune", f"{knob}=0"] if knob else []
    r = subprocess.run([os.environ["SANCTUM_BIN"], *args, *tune], capture_output=True, text=True, timeout=600, env=env)
    if r.returncode != 0:
        raise SystemExit(f"sanctum {' '.join(args + tune)} failed: {r.stderr.strip()}")
    return r


def logits(model: Path, ids: str, out: Path, knob: str | None) -> np.ndarray:
    sanctum(["logits", "--model", str(model), "--prompt-ids", ids, "--out", str(out), "--split", "64", "--step", "1", "--device", "cuda",
             "--matmul-precision", "bf16"], knob)
    return np.load(out)


def tokens(model: Path, ids: str, knob: str | None) -> str:
    return sanctum(["generate", "--model", str(model), "--prompt-ids", ids, "--max-tokens", "200", "--ignore-eos", "--temperature", "0",
                    "--device", "cuda", "--matmul-precision", "bf16"], knob).stdout.strip()


def prompt(vocab: int) -> str:
    return ",".join(str(11 + (i * 53) % (vocab - 11)) for i in range(96))


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--knobs", help="comma-separated knobs to check (default: every CUDA knob)")
    args = ap.parse_args()
    knobs = args.knobs.split(",") if args.knobs else cuda_knobs()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models = {"default model": MODEL}
        for name, shape, layers in (("MoE, 4 layers", "qwen3_5_moe-35b-a3b", 4), ("24B, 2 layers", "mistral-24b", 2)):
            models[name] = random_checkpoint.write_mlx_4bit(tmp / shape, random_checkpoint.hf_config(shape, layers))
        for name, model in models.items():
            vocab = json.loads((model / "config.json").read_text())["vocab_size"]
            ids = prompt(vocab)
            reference = logits(model, ids, tmp / "reference.npy", None)
            for knob in knobs:
                other = logits(model, ids, tmp / f"{knob}.npy", knob)
                tolerance = MOE_TOLERANCE if name.startswith("MoE") else TOLERANCE
                ok &= agrees(reference, other, GAP, tolerance, f"{name}, {knob}=0")
                if knob in SAME_BITS and not np.array_equal(reference, other):
                    ok = False
                    print(f"{name}, {knob}=0: the logits differ from the defaults' where the two paths do the same arithmetic")
        ids = prompt(4096)
        reference = tokens(MODEL, ids, None)
        for knob in (k for k in knobs if k in STEP_KNOBS):
            same = tokens(MODEL, ids, knob) == reference
            ok &= same
            print(f"default model, {knob}=0: 200 greedy tokens identical to the defaults': {same}")
    print("tuning off-path check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
