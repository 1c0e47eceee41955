"""Qwen3.5 vision-language parity with mlx-vlm 0.7.10 on tiny random checkpoints (vl_models.py),
dense and MoE, bf16 and MLX 4-bit (language model quantized, tower bf16; and tower quantized too):
- the vision tower's output embeddings within 1e-4 relative (max |Δ| / max |ref|) in f32;
- with images in the prompt (one, two, image-text-image; several sizes and aspect ratios): the logits
  of every position within the parity suites' tolerance and the same argmax, and 32 greedy tokens
  identical, also when the prompt after the images is fed as decode steps (the state's rotary offset);
- a text-only prompt through the VL checkpoint gives the logits of the text path bit for bit."""
import subprocess
import zlib

import numpy as np
import pytest

import vl_models as vl

REL_TOL = 2e-3  # the mlx-lm parity suites' logits tolerance (tests/parity/parity_common.py)
TIE_GAP = 1e-3
GREEDY_TOKENS = 32
PATCH_VALUES = 3 * 2 * 4 * 4

FORMATS = {"bf16": (0, False), "q4g64": (4, False), "q4g64-tower": (4, True)}
MODELS = ("qwen3_5", "qwen3_5_moe")

# Patch grids (t, h, w): square, wide, tall, larger than the 8 x 8 learned grid, past 256 patches, and pairs.
IMAGE_CASES = {
    "square": ([[1, 4, 4]], [[1, 2, 3], 0, [4, 5, 6]]),
    "wide": ([[1, 4, 10]], [[7], 0, [8, 9]]),
    "tall-large": ([[1, 12, 6]], [[10, 11], 0, [12]]),
    "many-patches": ([[1, 16, 20]], [[24], 0, [25]]),  # 320 patches: the tower's attention by matmul
    "two-images": ([[1, 6, 4], [1, 4, 8]], [[13], 0, 1, [14, 15]]),
    "image-text-image": ([[1, 4, 6], [1, 8, 8]], [[16, 17], 0, [18, 19, 20, 21], 1, [22, 23]]),
}


class Checkpoints:
    def __init__(self, tmp_path_factory):
        self.tmp, self.built = tmp_path_factory, {}

    def get(self, model_type, fmt):
        key = (model_type, fmt)
        if key not in self.built:
            cfg = vl.vl_config(model_type)
            bits, tower = FORMATS[fmt]
            model = vl.make_model(cfg, seed=zlib.crc32(model_type.encode()) % 1000)
            out = vl.save_checkpoint(model, cfg, self.tmp.mktemp(f"{model_type}-{fmt}"), bits=bits, quantize_tower=tower)
            self.built[key] = (out, vl.load(out))
        return self.built[key]


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    return Checkpoints(tmp_path_factory)


def run_vision(sanctum_bin, model_dir, pixels_path, grids, *extra):
    cmd = [sanctum_bin, "vision", "--model", str(model_dir), "--pixels", str(pixels_path), "--grids", vl.grids_flag(grids),
           "--matmul-precision", "f32", *map(str, extra)]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)


def case_inputs(tmp_path, case):
    grids, pieces = IMAGE_CASES[case]
    pixels = vl.random_pixels(grids, seed=zlib.crc32(case.encode()), patch_values=PATCH_VALUES)
    return grids, vl.image_prompt(pieces, grids), pixels, vl.write_pixels(tmp_path / "pixels.f32", pixels)


def params(cases):
    for model_type in MODELS:
        for fmt in FORMATS:
            for case in cases:
                yield pytest.param(model_type, fmt, case, id=f"{model_type}-{fmt}-{case}")


@pytest.mark.parametrize("model_type,fmt,case", list(params(IMAGE_CASES)))
def test_tower_embeddings_match_mlx_vlm(sanctum_bin, checkpoints, tmp_path, model_type, fmt, case):
    model_dir, ref_model = checkpoints.get(model_type, fmt)
    grids, _, pixels, pixels_path = case_inputs(tmp_path, case)
    run_vision(sanctum_bin, model_dir, pixels_path, grids, "--embeddings-out", tmp_path / "emb.npy")
    ours, ref = np.load(tmp_path / "emb.npy"), vl.tower_embeddings(ref_model, pixels, grids)
    assert ours.shape == ref.shape
    rel = float(np.max(np.abs(ours - ref)) / np.max(np.abs(ref)))
    print(f"{model_type}/{fmt}/{case}: tower max |Δ| / max |ref| = {rel:.3g}")
    assert rel <= 1e-4


def check_logits(ours, ref, label):
    assert ours.shape == ref.shape
    diff, scale = float(np.max(np.abs(ours - ref))), float(np.max(np.abs(ref)))
    assert diff <= REL_TOL * max(1.0, scale), f"{label}: max |dlogit| {diff:.3g} (logit scale {scale:.3g})"
    top2 = np.sort(ref, axis=-1)[:, -2:]
    ties = 0
    for pos in range(ref.shape[0]):
        if top2[pos, 1] - top2[pos, 0] < TIE_GAP:
            ties += 1
            continue
        assert int(np.argmax(ours[pos])) == int(np.argmax(ref[pos])), f"{label} pos {pos}: argmax differs"
    assert ties <= max(1, ref.shape[0] // 20)
    print(f"{label}: max |dlogit| = {diff:.3g}")


@pytest.mark.parametrize("model_type,fmt,case", list(params(IMAGE_CASES)))
def test_image_prompt_logits_and_greedy_match_mlx_vlm(sanctum_bin, checkpoints, tmp_path, model_type, fmt, case):
    model_dir, ref_model = checkpoints.get(model_type, fmt)
    grids, prompt, pixels, pixels_path = case_inputs(tmp_path, case)
    r = run_vision(sanctum_bin, model_dir, pixels_path, grids, "--prompt-ids", ",".join(map(str, prompt)), "--out",
                   tmp_path / "logits.npy", "--greedy", GREEDY_TOKENS)
    label = f"{model_type}/{fmt}/{case}"
    check_logits(np.load(tmp_path / "logits.npy"), vl.reference_logits(ref_model, prompt, pixels, grids), label)
    expected = vl.reference_greedy(ref_model, prompt, pixels, grids, GREEDY_TOKENS)
    assert [int(t) for t in r.stdout.strip().split(",")] == expected, label


@pytest.mark.parametrize("model_type,fmt,case", list(params(["image-text-image"])))
def test_text_after_the_images_as_decode_steps_equals_one_prefill(sanctum_bin, checkpoints, tmp_path, model_type, fmt, case):
    model_dir, _ = checkpoints.get(model_type, fmt)
    grids, prompt, _, pixels_path = case_inputs(tmp_path, case)
    prompt = prompt + [30, 31, 32]
    ids = ",".join(map(str, prompt))
    run_vision(sanctum_bin, model_dir, pixels_path, grids, "--prompt-ids", ids, "--out", tmp_path / "full.npy")
    run_vision(sanctum_bin, model_dir, pixels_path, grids, "--prompt-ids", ids, "--out", tmp_path / "split.npy", "--split", len(prompt) - 4)
    full, split = np.load(tmp_path / "full.npy"), np.load(tmp_path / "split.npy")
    np.testing.assert_allclose(split, full, rtol=0, atol=1e-3 * max(1.0, float(np.max(np.abs(full)))))
    assert (np.argmax(split, axis=-1) == np.argmax(full, axis=-1)).all()


@pytest.mark.parametrize("model_type", MODELS)
def test_text_only_prompt_is_the_text_path_bit_for_bit(sanctum_bin, checkpoints, tmp_path, model_type):
    model_dir, _ = checkpoints.get(model_type, "bf16")
    grids = [[1, 4, 4]]
    pixels_path = vl.write_pixels(tmp_path / "pixels.f32", vl.random_pixels(grids, 0, PATCH_VALUES))
    prompt = ",".join(str(t) for t in [5, 9, 200, 3, 77, 41, 8])
    run_vision(sanctum_bin, model_dir, pixels_path, grids, "--prompt-ids", prompt, "--out", tmp_path / "vision.npy")
    subprocess.run([sanctum_bin, "logits", "--model", str(model_dir), "--prompt-ids", prompt, "--out", str(tmp_path / "text.npy"),
                    "--matmul-precision", "f32"], check=True, capture_output=True, timeout=300)
    assert np.array_equal(np.load(tmp_path / "vision.npy"), np.load(tmp_path / "text.npy"))
