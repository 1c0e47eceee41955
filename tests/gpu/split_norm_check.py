"""The RMSNorm split across the projections around it (ops/normed_matmul.h, one-token steps on a GPU in
the bf16 mode) against the unsplit add+RMSNorm, end to end: `sanctum logits --device cuda` on the
embedded default model (a dense hybrid: GatedDeltaNet and attention layers, 4-bit weights) over a
prompt prefilled in part and then stepped one token at a time must give, with the split on (the
default) and off (SANCTUM_FUSE_NORM=0), the same top token wherever the unsplit logits' top two are
apart, and logits within a small fraction of their scale. The two differ only in where x is rounded
to bf16 (u before the scale, against u times the scale). A MoE model is left out: any rounding change
moves some token to another expert, and its logits with it.

  python3 tests/gpu/split_norm_check.py          (needs SANCTUM_BIN)
"""
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

MODEL = Path(__file__).resolve().parents[2] / "models" / "default" / "mlx-4bit"
# As bf16_mode_check.py. Measured on an H200: 62/62 decided positions agree, max |d| 0.19 of a scale
# of 20.7 (0.9%); a wrong or missing scale moves the logits by far more.
GAP = 0.5         # top-2 gap of the unsplit logits below which a position is a near tie
TOLERANCE = 0.03  # max |split - unsplit| as a fraction of the largest unsplit logit


def logits(ids: str, out: Path, env: dict) -> np.ndarray:
    r = subprocess.run([os.environ["SANCTUM_BIN"], "logits", "--model", str(MODEL), "--prompt-ids", ids, "--out", str(out), "--split", "16",
                        "--step", "1", "--device", "cuda", "--matmul-precision", "bf16"], capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, **env))
    if r.returncode != 0:
        raise SystemExit(f"sanctum logits ({env or 'split'}) failed: {r.stderr.strip()}")
    return np.load(out)


def main() -> int:
    ids = ",".join(str(11 + (i * 53) % 3989) for i in range(80))
    with tempfile.TemporaryDirectory() as tmp:
        split = logits(ids, Path(tmp) / "split.npy", {})
        unsplit = logits(ids, Path(tmp) / "unsplit.npy", {"SANCTUM_FUSE_NORM": "0"})
    top2 = np.sort(unsplit, axis=-1)[:, -2:]
    decided = top2[:, 1] - top2[:, 0] >= GAP
    agree = int(np.sum((np.argmax(split, -1) == np.argmax(unsplit, -1)) & decided))
    diff, scale = float(np.max(np.abs(split - unsplit))), float(np.max(np.abs(unsplit)))
    ok = agree == int(decided.sum()) and diff <= TOLERANCE * max(1.0, scale)
    print(f"split against unsplit norm: argmax agree {agree}/{int(decided.sum())} decided positions, max |d| {diff:.4f} of scale {scale:.2f}")
    print("split norm check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
