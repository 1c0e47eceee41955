"""What the GPU logit checks share (bf16_mode_check.py, split_norm_check.py): the logits of the
embedded default model under `sanctum logits --device cuda`, a prompt prefilled in part and then
stepped one token at a time, and the comparison of two such runs."""
import os
import subprocess
from pathlib import Path

import numpy as np

MODEL = Path(__file__).resolve().parents[2] / "models" / "default" / "mlx-4bit"


def step_logits(ids: str, out: Path, precision: str, split: int, env: dict | None = None) -> np.ndarray:
    """Logits of every position: the first `split` tokens as one prompt, then one-token steps."""
    r = subprocess.run([os.environ["SANCTUM_BIN"], "logits", "--model", str(MODEL), "--prompt-ids", ids, "--out", str(out), "--split", str(split),
                        "--step", "1", "--device", "cuda", "--matmul-precision", precision], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **(env or {})))
    if r.returncode != 0:
        raise SystemExit(f"sanctum logits ({precision}, {env or 'defaults'}) failed: {r.stderr.strip()}")
    return np.load(out)


def agrees(reference: np.ndarray, other: np.ndarray, gap: float, tolerance: float, what: str) -> bool:
    """The same top token wherever the reference's top two are at least `gap` apart, and every logit
    within `tolerance` of the reference's largest; prints the figures."""
    top2 = np.sort(reference, axis=-1)[:, -2:]
    decided = top2[:, 1] - top2[:, 0] >= gap
    agree = int(np.sum((np.argmax(other, -1) == np.argmax(reference, -1)) & decided))
    diff, scale = float(np.max(np.abs(other - reference))), float(np.max(np.abs(reference)))
    print(f"{what}: argmax agree {agree}/{int(decided.sum())} decided positions, max |d| {diff:.4f} of scale {scale:.2f}")
    return agree == int(decided.sum()) and diff <= tolerance * max(1.0, scale)
