"""Parity with transformers on Hugging Face-format Qwen3.5 vision-language checkpoints (dense and MoE).

The checkpoints and reference outputs under tests/data/hf_vl_fixtures/ come from
tools/hf_fixtures/make_hf_vl_fixtures.py (transformers' Qwen3_5(Moe)ForConditionalGeneration, bf16
weights evaluated in f32; pixel values from transformers' PIL image processor). They exercise the
Hugging Face flavour of the tower (model.visual.*, the Conv3d in torch's layout, the merged-block patch
order) and of the multimodal positions: text, image, text, image, text.
"""
import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parent.parent / "data" / "hf_vl_fixtures"
CASES = ["qwen3_5_moe_vl", "qwen3_5_vl"]
REL_TOL = 2e-3  # the parity suites' logits tolerance (tests/parity/parity_common.py)
TIE_GAP = 1e-3


def test_fixtures_exist():
    assert sorted(p.name for p in FIXTURES.iterdir() if (p / "expected.json").exists()) == CASES


def run(sanctum_bin, case, tmp_path, *extra):
    d = FIXTURES / case
    expected = json.loads((d / "expected.json").read_text())
    pixels = tmp_path / "pixels.f32"
    np.load(d / "pixel_values.npy").astype("<f4").tofile(pixels)
    grids = ",".join(f"{t}x{h}x{w}" for t, h, w in expected["grids"])
    r = subprocess.run([sanctum_bin, "vision", "--model", str(d), "--pixels", str(pixels), "--grids", grids,
                        "--matmul-precision", "f32", *map(str, extra)], check=True, capture_output=True, text=True, timeout=300)
    return expected, r.stdout


@pytest.mark.parametrize("case", CASES)
def test_tower_embeddings_match_transformers(sanctum_bin, tmp_path, case):
    run(sanctum_bin, case, tmp_path, "--embeddings-out", tmp_path / "tower.npy")
    ours, ref = np.load(tmp_path / "tower.npy"), np.load(FIXTURES / case / "tower.npy")
    assert ours.shape == ref.shape
    rel = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))
    print(f"{case}: tower max |Δ| / max |ref| = {rel:.3g}")
    assert rel <= 1e-4


@pytest.mark.parametrize("case", CASES)
def test_logits_and_greedy_match_transformers(sanctum_bin, tmp_path, case):
    ids = ",".join(map(str, json.loads((FIXTURES / case / "expected.json").read_text())["prompt"]))
    expected, stdout = run(sanctum_bin, case, tmp_path, "--prompt-ids", ids, "--out", tmp_path / "logits.npy", "--greedy", 32)
    ours, ref = np.load(tmp_path / "logits.npy"), np.load(FIXTURES / case / "logits.npy")
    assert ours.shape == ref.shape
    diff, scale = float(np.max(np.abs(ours - ref))), float(np.max(np.abs(ref)))
    print(f"{case}: max |dlogit| = {diff:.3g} (logit scale {scale:.3g})")
    assert diff <= REL_TOL * max(1.0, scale)
    top2 = np.sort(ref, axis=-1)[:, -2:]
    for pos in range(ref.shape[0]):
        if top2[pos, 1] - top2[pos, 0] >= TIE_GAP:
            assert int(np.argmax(ours[pos])) == int(np.argmax(ref[pos])), f"{case} pos {pos}: argmax differs"
    assert [int(t) for t in stdout.strip().split(",")] == expected["greedy"]
