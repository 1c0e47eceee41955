"""The KV cache in bf16, q8 and q4v on a GPU machine against the CPU's, end to end on the embedded
default model: with --kv-cache-dtype bf16 (then q8, then q4v) on --device cuda and on the CPU, both in
the exact matmul mode, `sanctum generate` greedy for 32 tokens must print the same tokens, and
`sanctum logits` over a 300-token prompt prefilled in part (280 tokens: past one 256-row cache block,
read by the prefill kernels) and then stepped one token at a time (the decode kernel reading the
stored rows) must pick the same top token wherever the CPU's top two are apart, with every logit
within TOLERANCE of the CPU's largest. The f32 cache's CPU/GPU distance is printed beside each as
the baseline. Then the fast matmul mode on the GPU (tensor-core prefill reading the stored rows)
against the CPU with the bf16 mode check's bounds.

  python3 tests/gpu/kv_dtype_check.py          (needs SANCTUM_BIN)
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from logit_compare import agrees

MODEL = Path(__file__).resolve().parents[2] / "models" / "default" / "mlx-4bit"
PROMPT = ",".join(str(11 + (i * 53) % 4000) for i in range(300))
SPLIT = 280
# Exact mode: the same stored bytes on both devices up to the rows' own f32 rounding differences (a
# K value a CPU and a GPU compute 1 ulp apart may round to neighbouring bf16s or q8 codes). On the CPU,
# rounding every value differently (the f32 cache against bf16 or q8) moves these logits by 0.16 and
# 0.21 of a scale of 23; the bound is under half that, and a misread row or block is off by the spread.
# q4v's keys are q8's; its 4-bit values cost 1.24 on the CPU (f32 against q4v, this prompt), but the
# devices still differ only where a value lies within that 1-ulp difference of a code boundary: a q4
# step is about 17 times a q8 one, so such values are about 17 times rarer and each moves 17 times as
# far, and the expected distance stays q8's (measured 0.0037 on an H100). So the same bound, a
# seventeenth of q4v's own cost; a misread nibble, scale or min is off by more than that whole cost.
GAP, TOLERANCE = 0.1, 0.003
# Fast mode: bf16 tensor-core matmuls on the GPU against the CPU's exact ones (bf16_mode_check.py).
FAST_GAP, FAST_TOLERANCE = 0.5, 0.15


def run(args: list[str]) -> str:
    r = subprocess.run([os.environ["SANCTUM_BIN"], *args], capture_output=True, text=True, timeout=600)
    if r.returncode != 0:
        raise SystemExit(f"sanctum {' '.join(args)} failed: {r.stderr.strip()}")
    return r.stdout.strip()


def logits(tmp: Path, device: str, dtype: str, precision: str = "f32") -> np.ndarray:
    out = tmp / f"logits-{device}-{dtype}-{precision}.npy"
    run(["logits", "--model", str(MODEL), "--prompt-ids", PROMPT, "--out", str(out), "--split", str(SPLIT), "--step", "1", "--device", device,
         "--matmul-precision", precision, "--kv-cache-dtype", dtype])
    return np.load(out)


def greedy(device: str, dtype: str) -> str:
    return run(["generate", "--model", str(MODEL), "--device", device, "--matmul-precision", "f32", "--kv-cache-dtype", dtype, "--prompt-ids",
                PROMPT, "--max-tokens", "32", "--ignore-eos", "--temperature", "0"])


def main() -> int:
    ok = True
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        base = {device: logits(tmp, device, "f32") for device in ("cpu", "cuda")}
        agrees(base["cpu"], base["cuda"], GAP, TOLERANCE, "f32 cache, cuda vs cpu (baseline)")
        for dtype in ("bf16", "q8", "q4v"):
            cpu, gpu = logits(tmp, "cpu", dtype), logits(tmp, "cuda", dtype)
            ok &= agrees(cpu, gpu, GAP, TOLERANCE, f"{dtype} cache, cuda vs cpu, exact mode")
            cpu_tokens, gpu_tokens = greedy("cpu", dtype), greedy("cuda", dtype)
            same = cpu_tokens == gpu_tokens and len(gpu_tokens.split(",")) == 32
            ok &= same
            print(f"{dtype} cache: 32 greedy tokens after 300, cuda == cpu: {same}")
            fast = logits(tmp, "cuda", dtype, "bf16")
            ok &= agrees(cpu, fast, FAST_GAP, FAST_TOLERANCE, f"{dtype} cache, cuda fast mode vs cpu exact mode")
    print("kv dtype check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
