"""The vision tower and image prompts on a GPU: `sanctum vision --device cuda` against the committed
transformers references (tests/data/hf_vl_fixtures: Hugging Face layout, bf16 tower, dense and MoE
text models) and, where made, mlx-vlm references for MLX 4-bit checkpoints with the tower quantized
too (made here by `make-fixtures`, since mlx-vlm is not on the GPU machine), and against the same
binary's CPU run. In the f32 precision mode:
- tower embeddings within 1e-4 relative (max |Δ| / max |ref|) of the reference and of the CPU;
- logits of every prompt position within the parity suites' tolerance, the same argmax outside
  near-ties, and 32 greedy tokens identical to the reference's and the CPU's;
- the text after the last image fed as decode steps gives the same logits and tokens.
In the bf16 mode the tower within 2e-2 of the reference (bf16 matmul inputs); its greedy agreement
is printed.

  python3 tests/gpu/cuda_vision_check.py [--mlx-fixtures DIR]     (needs SANCTUM_BIN; prints PASS or FAIL)
  .venv/bin/python tests/gpu/cuda_vision_check.py make-fixtures DIR  (here: the mlx-vlm references)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
HF_FIXTURES = ROOT / "tests" / "data" / "hf_vl_fixtures"
REL_TOL = 2e-3  # the parity suites' logits tolerance (tests/parity/parity_common.py)
TIE_GAP = 1e-3
GREEDY = 32


def make_fixtures(out: Path) -> None:
    """MLX 4-bit (group 64) checkpoints with the tower quantized, dense and MoE, each with one
    image-text-image prompt past 256 patches, and mlx-vlm's f32 tower output, logits and greedy tokens,
    in the layout of tests/data/hf_vl_fixtures."""
    sys.path[:0] = [str(ROOT / "tests" / "vision"), str(ROOT / "tools")]
    import zlib

    import vl_models as vl

    grids = [[1, 16, 20], [1, 4, 6]]
    for model_type in ("qwen3_5", "qwen3_5_moe"):
        d = out / f"{model_type}_q4_tower"
        cfg = vl.vl_config(model_type)
        model = vl.make_model(cfg, seed=zlib.crc32(model_type.encode()) % 1000)
        vl.save_checkpoint(model, cfg, d, bits=4, group_size=64, quantize_tower=True)
        ref = vl.load(d)
        pixels = vl.random_pixels(grids, seed=7, patch_values=3 * 2 * 4 * 4)
        prompt = vl.image_prompt([[16, 17], 0, [18, 19, 20, 21], 1, [22, 23]], grids)
        np.save(d / "pixel_values.npy", pixels)
        np.save(d / "tower.npy", vl.tower_embeddings(ref, pixels, grids))
        np.save(d / "logits.npy", vl.reference_logits(ref, prompt, pixels, grids))
        greedy = vl.reference_greedy(ref, prompt, pixels, grids, GREEDY)
        (d / "expected.json").write_text(json.dumps({"prompt": prompt, "grids": grids, "greedy": greedy}))
        print(f"{d}: {sum(f.stat().st_size for f in d.iterdir()) / 1e6:.1f} MB")


class Case:
    def __init__(self, d: Path, tmp: Path):
        self.dir, self.name = d, d.name
        self.expected = json.loads((d / "expected.json").read_text())
        self.pixels = tmp / f"{d.name}.f32"
        np.load(d / "pixel_values.npy").astype("<f4").tofile(self.pixels)
        self.grids = ",".join(f"{t}x{h}x{w}" for t, h, w in self.expected["grids"])
        self.prompt = self.expected["prompt"]
        self.tmp = tmp

    def run(self, device: str, precision: str, tag: str, *extra) -> tuple[np.ndarray, np.ndarray, list[int]]:
        emb, logits = self.tmp / f"{self.name}-{tag}-emb.npy", self.tmp / f"{self.name}-{tag}-logits.npy"
        cmd = [os.environ["SANCTUM_BIN"], "vision", "--model", str(self.dir), "--pixels", str(self.pixels), "--grids", self.grids,
               "--device", device, "--matmul-precision", precision, "--embeddings-out", str(emb),
               "--prompt-ids", ",".join(map(str, self.prompt)), "--out", str(logits), "--greedy", str(GREEDY), *map(str, extra)]
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)}\n{r.stderr.strip()}")
        return np.load(emb), np.load(logits), [int(t) for t in r.stdout.strip().split(",")]

    def after_last_image(self) -> int:
        """Tokens up to and including the last image placeholder: the rest can run as decode steps."""
        image_token = json.loads((self.dir / "config.json").read_text()).get("image_token_id", 500)
        return max(i for i, t in enumerate(self.prompt) if t == image_token) + 1


def rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(float(np.max(np.abs(b))), 1e-30))


def logits_ok(ours: np.ndarray, ref: np.ndarray) -> tuple[bool, str]:
    if ours.shape != ref.shape:
        return False, f"shape {ours.shape} != {ref.shape}"
    diff, scale = float(np.max(np.abs(ours - ref))), float(np.max(np.abs(ref)))
    top2 = np.sort(ref, axis=-1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] >= TIE_GAP
    argmax_same = bool(np.all(np.argmax(ours, -1)[clear] == np.argmax(ref, -1)[clear]))
    return diff <= REL_TOL * max(1.0, scale) and argmax_same, f"max |dlogit| {diff:.3g} (scale {scale:.3g}), argmax same: {argmax_same}"


def check_case(case: Case) -> bool:
    ok = True

    def report(what: str, passed: bool, detail: str) -> None:
        nonlocal ok
        ok &= passed
        print(f"  {'ok  ' if passed else 'FAIL'} {what}: {detail}")

    print(f"{case.name} (grids {case.grids}, {len(case.prompt)} prompt tokens)")
    ref_tower, ref_logits = np.load(case.dir / "tower.npy"), np.load(case.dir / "logits.npy")
    cpu_tower, _, cpu_greedy = case.run("cpu", "f32", "cpu")
    tower, logits, greedy = case.run("cuda", "f32", "cuda")
    r_ref, r_cpu = rel(tower, ref_tower), rel(tower, cpu_tower)
    report("f32 tower vs reference", tower.shape == ref_tower.shape and r_ref <= 1e-4, f"{r_ref:.3g}")
    report("f32 tower vs cpu", r_cpu <= 1e-4, f"{r_cpu:.3g}")
    passed, detail = logits_ok(logits, ref_logits)
    report("f32 logits vs reference", passed, detail)
    report("f32 greedy vs reference and cpu", greedy == case.expected["greedy"] == cpu_greedy,
           f"{sum(a == b for a, b in zip(greedy, case.expected['greedy']))}/{GREEDY} as the reference")
    split = case.after_last_image()
    _, split_logits, split_greedy = case.run("cuda", "f32", "split", "--split", split)
    diff = float(np.max(np.abs(split_logits - logits)))
    report(f"f32 decode steps after token {split} vs one prefill", diff <= 1e-3 * max(1.0, float(np.max(np.abs(logits)))) and
           split_greedy == greedy, f"max |dlogit| {diff:.3g}, greedy same: {split_greedy == greedy}")
    bf_tower, _, bf_greedy = case.run("cuda", "bf16", "bf16")
    r_bf = rel(bf_tower, ref_tower)
    report("bf16 tower vs reference", r_bf <= 2e-2, f"{r_bf:.3g}; greedy {sum(a == b for a, b in zip(bf_greedy, greedy))}/{GREEDY} as f32")
    return ok


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("command", nargs="?", choices=["check", "make-fixtures"], default="check")
    ap.add_argument("dir", nargs="?", help="make-fixtures: where to write them")
    ap.add_argument("--mlx-fixtures", help="a folder make-fixtures wrote, checked too")
    a = ap.parse_args()
    if a.command == "make-fixtures":
        make_fixtures(Path(a.dir))
        return 0
    dirs = sorted(p for p in HF_FIXTURES.iterdir() if (p / "expected.json").exists())
    if a.mlx_fixtures:
        dirs += sorted(p for p in Path(a.mlx_fixtures).iterdir() if (p / "expected.json").exists())
    ok = bool(dirs)
    with tempfile.TemporaryDirectory() as tmp:
        for d in dirs:
            try:
                ok &= check_case(Case(d, Path(tmp)))
            except RuntimeError as e:
                print(f"{d.name}: FAIL, sanctum failed:\n{e}")
                ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
