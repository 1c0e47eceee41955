"""Shared helpers for the image parity tests: the image_prepare driver and transformers' PIL processor."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
QWEN3_5_CONFIG = ROOT / "tests" / "data" / "image" / "qwen3_5" / "preprocessor_config.json"


def prepare_bin() -> Path:
    # Beside the server binary (build/image_prepare), or where SANCTUM_IMAGE_PREPARE says.
    bin_dir = Path(os.environ.get("SANCTUM_BIN", ROOT / "build" / "sanctum")).parent
    path = Path(os.environ.get("SANCTUM_IMAGE_PREPARE", bin_dir / "image_prepare"))
    if not path.exists():
        pytest.fail(f"image_prepare not found at {path}: build the image_prepare target")
    return path


def run_prepare(image_path: Path, config_path: Path, out_prefix: Path | None = None, *extra: str) -> dict:
    cmd = [str(prepare_bin()), "--config", str(config_path), *extra, str(image_path)]
    if out_prefix is not None:
        cmd[1:1] = ["--out", str(out_prefix)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 2), done.stderr
    return json.loads(done.stdout)


def sanctum_outputs(image_path: Path, config_path: Path, tmp: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    meta = run_prepare(image_path, config_path, tmp / "out")
    assert "error" not in meta, meta
    rgb = np.fromfile(tmp / "out.rgb", dtype=np.uint8).reshape(meta["height"], meta["width"], 3)
    pixels = np.fromfile(tmp / "out.f32", dtype=np.float32).reshape(meta["rows"], meta["cols"])
    return meta, rgb, pixels


def reference_processor(config_path: Path):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    cfg = json.loads(config_path.read_text())
    kwargs = {k: v for k, v in cfg.items() if k not in ("processor_class", "image_processor_type")}
    return Qwen2VLImageProcessorPil(**kwargs)


def reference_rgb(image_path: Path) -> np.ndarray:
    """What the processor converts a file to: PIL's open, then transformers' convert_to_rgb."""
    from transformers.image_transforms import convert_to_rgb

    with Image.open(image_path) as im:
        return convert_to_rgb(im, return_numpy=True)
