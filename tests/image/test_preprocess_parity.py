"""Preprocessing equals transformers' Qwen2-VL PIL image processor (the family the Qwen3.5
checkpoints name) on random images: the same grid, the same placeholder count, and pixel_values
equal to f32 rounding (the resize is exact in uint8, so any difference would be a whole level)."""
import json

import numpy as np
import pytest
from PIL import Image

from image_reference import QWEN3_5_CONFIG, reference_processor, sanctum_outputs

# The largest difference allowed in pixel_values: 0, since every value is the same f32 computation
# of the same uint8 (rescale in f64 then cast, normalize in f32).
MAX_ABS_DIFF = 0.0

# (width, height): tiny, odd, very wide, very tall, square multiples, and past max_pixels.
SIZES = [(1, 1), (3, 5), (17, 33), (224, 224), (333, 517), (640, 31), (40, 1000), (1024, 1024), (1023, 769)]


def random_image(rng, width, height, kind):
    if kind == "noise":
        a = rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)
    else:  # smooth: gradients plus mild noise, the case where rounding ties are common
        y, x = np.mgrid[0:height, 0:width]
        a = np.stack([(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), ((x + y) % 256)], axis=-1)
        a = np.clip(a + rng.integers(-3, 4, size=a.shape), 0, 255).astype(np.uint8)
    return Image.fromarray(a, "RGB")


def compare(path, config_path, tmp_path):
    meta, _, ours = sanctum_outputs(path, config_path, tmp_path)
    with Image.open(path) as im:
        ref = reference_processor(config_path)(images=[im], return_tensors="np")
    want = ref["pixel_values"]
    assert meta["grid_thw"] == ref["image_grid_thw"][0].tolist()
    merge = json.loads(config_path.read_text()).get("merge_size", 2)
    assert meta["tokens"] == int(np.prod(ref["image_grid_thw"][0])) // merge**2
    assert ours.shape == want.shape
    diff = float(np.max(np.abs(ours - want)))
    assert diff <= MAX_ABS_DIFF, f"max abs difference {diff} for {path.name}"


@pytest.mark.parametrize("kind", ["noise", "smooth"])
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_pixel_values_equal_transformers(tmp_path, size, kind):
    rng = np.random.default_rng(size[0] * 7919 + size[1])
    path = tmp_path / "in.png"
    random_image(rng, *size, kind).save(path)
    compare(path, QWEN3_5_CONFIG, tmp_path)


# A small pixel budget (Qwen2-VL's documented bounds, patch 14) sends mid-sized images down the
# max_pixels branch and larger ones through strong downscales, cheaply.
SMALL_BUDGET = {"patch_size": 14, "temporal_patch_size": 2, "merge_size": 2, "min_pixels": 3136, "max_pixels": 200704,
                "image_mean": [0.48145466, 0.4578275, 0.40821073], "image_std": [0.26862954, 0.26130258, 0.27577711]}


@pytest.mark.parametrize("size", [(800, 600), (2000, 97), (4000, 3000), (57, 29)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_downscale_past_max_pixels(tmp_path, size):
    config = tmp_path / "preprocessor_config.json"
    config.write_text(json.dumps(SMALL_BUDGET))
    path = tmp_path / "in.png"
    random_image(np.random.default_rng(size[0]), *size, "smooth").save(path)
    compare(path, config, tmp_path)


def test_same_pixels_same_hash_whatever_the_encoding(tmp_path):
    from image_reference import run_prepare

    im = random_image(np.random.default_rng(5), 64, 48, "noise")
    im.save(tmp_path / "a.png")
    im.save(tmp_path / "b.webp", lossless=True)
    im.convert("RGBA").save(tmp_path / "c.png")
    hashes = {run_prepare(tmp_path / n, QWEN3_5_CONFIG)["hash"] for n in ("a.png", "b.webp", "c.png")}
    assert len(hashes) == 1
    other = np.array(im)
    other[0, 0, 0] ^= 1
    Image.fromarray(other).save(tmp_path / "d.png")
    assert run_prepare(tmp_path / "d.png", QWEN3_5_CONFIG)["hash"] not in hashes


def test_aspect_ratio_past_200_is_refused_like_transformers(tmp_path):
    from image_reference import run_prepare

    path = tmp_path / "strip.png"
    random_image(np.random.default_rng(9), 402, 2, "noise").save(path)
    with Image.open(path) as im, pytest.raises(ValueError, match="aspect ratio"):
        reference_processor(QWEN3_5_CONFIG)(images=[im], return_tensors="np")
    out = run_prepare(path, QWEN3_5_CONFIG)
    assert out["kind"] == "limit" and "aspect ratio is over 200" in out["error"]
