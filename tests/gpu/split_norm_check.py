"""The RMSNorm split across the projections around it (ops/normed_matmul.h, one-token steps on a GPU in
the bf16 mode) against the unsplit add+RMSNorm, end to end: `sanctum logits --device cuda` on the
embedded default model (a dense hybrid: GatedDeltaNet and attention layers, 4-bit weights) over a
prompt prefilled in part and then stepped one token at a time must give, with the split on (the
default) and off (--tune fuse_norm=0), the same top token wherever the unsplit logits' top two are
apart, and logits within a small fraction of their scale. The two differ only in where x is rounded
to bf16 (u before the scale, against u times the scale). A MoE model is left out: any rounding change
moves some token to another expert, and its logits with it.

  python3 tests/gpu/split_norm_check.py          (needs SANCTUM_BIN)
"""
import sys
import tempfile
from pathlib import Path

from logit_compare import agrees, step_logits

# As bf16_mode_check.py. Measured on an H200: 62/62 decided positions agree, max |d| 0.19 of a scale
# of 20.7 (0.9%); a wrong or missing scale moves the logits by far more.
GAP = 0.5         # top-2 gap of the unsplit logits below which a position is a near tie
TOLERANCE = 0.03  # max |split - unsplit| as a fraction of the largest unsplit logit


def main() -> int:
    ids = ",".join(str(11 + (i * 53) % 3989) for i in range(80))
    with tempfile.TemporaryDirectory() as tmp:
        split = step_logits(ids, Path(tmp) / "split.npy", "bf16", 16)
        unsplit = step_logits(ids, Path(tmp) / "unsplit.npy", "bf16", 16, {"SANCTUM_TUNE": "fuse_norm=0"})
    ok = agrees(unsplit, split, GAP, TOLERANCE, "split against unsplit norm")
    print("split norm check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
