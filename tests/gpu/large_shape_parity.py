"""Large-shape parity on a GPU machine: a random-weight Qwen3.5 model with the 27B layer shapes (hidden
5120, 24/4 heads of 256, GatedDeltaNet 16/48 heads of 128, MLP 17408, vocab 248320), built and saved by
transformers itself, must give the same 32 greedy tokens under `sanctum --device cuda` as transformers
evaluates in float32, and the same logits along that sequence. In the default bf16 mode, where
4-bit weights are tiled at load for the tensor-core mat-vec, the logits must match those of the same
mode with the row layout kept (--tune tile_weights=0): the two differ only in how sums are split.

The depth is cut to --layers (default 8: six GatedDeltaNet + two attention layers) so the bf16
checkpoint fits the machine's disk next to the benchmark models; every kernel shape of the 27B model
is exercised.

  python3 tests/gpu/large_shape_parity.py [--layers 8] [--work DIR]     (needs SANCTUM_BIN)
"""
import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
import transformers_peer  # noqa: E402

TIE_GAP = 1e-3
TOKENS = 32


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--work", default="/tmp/sanctum-large-parity")
    args = ap.parse_args()
    work = Path(args.work)
    model, config = transformers_peer.build("qwen3_5-27b", args.layers)  # random bf16 weights, seeded
    model.save_pretrained(work)
    model = model.float().eval()

    prompt = np.random.default_rng(5).integers(0, config.vocab_size, size=16).tolist()
    with torch.no_grad():
        generated = model.generate(torch.tensor([prompt], device="cuda"), max_new_tokens=TOKENS, min_new_tokens=TOKENS,
                                   do_sample=False, eos_token_id=None, pad_token_id=0)
        expected = generated[0, len(prompt):].tolist()
        ref_logits = model(generated[:, :-1]).logits[0].float().cpu().numpy()
    del model
    torch.cuda.empty_cache()

    sanctum = os.environ["SANCTUM_BIN"]
    device = ["--device", "cuda", "--matmul-precision", "f32"]
    r = subprocess.run([sanctum, "generate", "--model", str(work), "--prompt-ids", ",".join(map(str, prompt)), "--max-tokens",
                        str(TOKENS), "--temperature", "0", "--ignore-eos", *device], capture_output=True, text=True, check=True)
    ours = [int(t) for t in r.stdout.strip().split(",")]
    ids = generated[0, :-1].tolist()
    npy = work / "logits.npy"
    subprocess.run([sanctum, "logits", "--model", str(work), "--prompt-ids", ",".join(map(str, ids)), "--out", str(npy), *device],
                   capture_output=True, text=True, check=True)
    logits = np.load(npy)

    def bf16_logits(tiled: bool) -> np.ndarray:
        env = dict(os.environ, SANCTUM_TUNE=f"tile_weights={1 if tiled else 0}")
        out = work / f"logits-bf16-{int(tiled)}.npy"
        # A 16-token prefill, then one-token steps: the steps run the decode mat-vec.
        subprocess.run([sanctum, "logits", "--model", str(work), "--prompt-ids", ",".join(map(str, ids)), "--out", str(out), "--split", "16",
                        "--step", "1", "--device", "cuda", "--matmul-precision", "bf16"], capture_output=True, text=True, check=True, env=env)
        return np.load(out)

    tiled, rows = bf16_logits(True), bf16_logits(False)
    bf16_diff = float(np.max(np.abs(tiled - rows)))
    rows_top2 = np.sort(rows, axis=-1)[:, -2:]
    rows_decided = rows_top2[:, 1] - rows_top2[:, 0] >= TIE_GAP
    bf16_agree = int(np.sum((np.argmax(tiled, -1) == np.argmax(rows, -1)) & rows_decided))

    diff = float(np.max(np.abs(logits - ref_logits)))
    scale = float(np.max(np.abs(ref_logits)))
    top2 = np.sort(ref_logits, axis=-1)[:, -2:]
    decided = top2[:, 1] - top2[:, 0] >= TIE_GAP
    agree = int(np.sum((np.argmax(logits, -1) == np.argmax(ref_logits, -1)) & decided))
    report = {"layers": args.layers, "greedy_equal": ours == expected, "sanctum": ours, "transformers": expected,
              "max_abs_dlogit": diff, "logit_scale": scale, "argmax_agree_decided": f"{agree}/{int(decided.sum())}",
              "bf16_tiled_vs_rows_max_abs_dlogit": bf16_diff, "bf16_tiled_vs_rows_argmax_agree_decided": f"{bf16_agree}/{int(rows_decided.sum())}",
              "bf16_vs_transformers_max_abs_dlogit": float(np.max(np.abs(tiled - ref_logits)))}
    print(json.dumps(report))
    ok = ours == expected and diff <= 2e-3 * max(1.0, scale) and agree == int(decided.sum())
    ok = ok and bf16_diff <= 1e-3 * max(1.0, scale) and bf16_agree == int(rows_decided.sum())
    print("large-shape parity:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
