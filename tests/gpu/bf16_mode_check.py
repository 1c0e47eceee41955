"""The default bf16 mode on a GPU machine tracks the exact f32 mode: on the embedded default model
(tied embeddings, 4-bit weights, which the bf16 mode reorders in place at load for its mat-vec and
which the embedding lookup then reads in that layout), `sanctum logits --device cuda` over a prompt
prefilled in part (96 tokens: the tensor-core GEMMs and the bf16 flash-attention kernel) and then
stepped one token at a time (the tiled mat-vec) must pick the same top token as the f32 mode
wherever f32's top two are well apart, with logits within a fraction of their scale.

  python3 tests/gpu/bf16_mode_check.py          (needs SANCTUM_BIN)
"""
import sys
import tempfile
from pathlib import Path

from logit_compare import agrees, step_logits

# Calibrated against the CPU's int8 mode, which rounds activations about as coarsely as bf16: there,
# on this model and prompt, 124/124 positions with a top-2 gap of 0.5 agree and max |d| is 9% of
# the scale. A misread weight layout gives unrelated logits and fails both by far.
GAP = 0.5         # top-2 gap of the f32 logits below which a position is a near tie
TOLERANCE = 0.15  # max |bf16 - f32| as a fraction of the largest f32 logit


def main() -> int:
    ids = ",".join(str(11 + (i * 53) % 4000) for i in range(160))
    with tempfile.TemporaryDirectory() as tmp:
        exact = step_logits(ids, Path(tmp) / "logits-f32.npy", "f32", 96)
        fast = step_logits(ids, Path(tmp) / "logits-bf16.npy", "bf16", 96)
    ok = agrees(exact, fast, GAP, TOLERANCE, "bf16 vs f32 logits")
    print("bf16 mode check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
