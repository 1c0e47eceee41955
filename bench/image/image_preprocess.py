"""Time to decode and preprocess one image for Qwen3.5 (tests/data/image/qwen3_5/preprocessor_config.json):
sanctum's image path (build/image_prepare, 2 threads) beside transformers' PIL image processor
(Qwen2VLImageProcessorPil, what the checkpoint's processor computes, without torch) in the same run,
on the same encoded bytes, checking that both give the same pixel_values.

    .venv/bin/python bench/image/image_preprocess.py [--runs 10] [--threads 2]

Cases: a 1024x1024 PNG (a multiple of 32: no resize, so decode + normalize + patchify) and a
1000x750 JPEG (resized to 992x736 by PIL's bicubic). Prints one table row per case: median and best
of --runs after one warm-up, for each side.
"""
import argparse
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from PIL import Image

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "tests" / "data" / "image" / "qwen3_5" / "preprocessor_config.json"


def photo_like(width, height, seed=0):
    """Smooth gradients with texture: compresses like a photograph, not like noise."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    img = np.stack([128 + 100 * np.sin(x / 37 + c) * np.cos(y / 53 - c) for c in range(3)], axis=-1)
    img += rng.normal(0, 12, img.shape)
    return Image.fromarray(np.clip(img, 0, 255).astype(np.uint8), "RGB")


def transformers_runs(data, runs):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import Qwen2VLImageProcessorPil

    cfg = json.loads(CONFIG.read_text())
    proc = Qwen2VLImageProcessorPil(**{k: v for k, v in cfg.items() if k not in ("processor_class", "image_processor_type")})
    times, out = [], None
    for i in range(runs + 1):
        t0 = time.perf_counter()
        with Image.open(io.BytesIO(data)) as im:
            out = proc(images=[im], return_tensors="np")
        if i:  # the first run warms up
            times.append(time.perf_counter() - t0)
    return times, out["pixel_values"]


def sanctum_runs(binary, path, runs, threads, tmp):
    done = subprocess.run([binary, "--config", str(CONFIG), "--threads", str(threads), "--repeat", str(runs + 1),
                           "--out", str(tmp / "out"), str(path)], capture_output=True, text=True, check=True)
    meta = json.loads(done.stdout)
    pixels = np.fromfile(tmp / "out.f32", dtype=np.float32).reshape(meta["rows"], meta["cols"])
    return meta["seconds"][1:], pixels


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bin", default=os.environ.get("SANCTUM_IMAGE_PREPARE", str(ROOT / "build" / "image_prepare")))
    args = ap.parse_args()
    import transformers
    print(f"transformers {transformers.__version__}, Pillow {Image.__version__}, numpy {np.__version__}, "
          f"{os.cpu_count()} CPUs, sanctum with {args.threads} threads", file=sys.stderr)
    print("| image | sanctum median (best) ms | transformers PIL median (best) ms | speed-up | max abs diff |")
    print("| --- | ---: | ---: | ---: | ---: |")
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for name, (w, h), fmt in [("1024x1024 PNG", (1024, 1024), "PNG"), ("1000x750 JPEG q90", (1000, 750), "JPEG")]:
            b = io.BytesIO()
            photo_like(w, h).save(b, format=fmt, **({"quality": 90} if fmt == "JPEG" else {}))
            path = tmp / ("in." + fmt.lower())
            path.write_bytes(b.getvalue())
            ours, ours_px = sanctum_runs(args.bin, path, args.runs, args.threads, tmp)
            theirs, their_px = transformers_runs(b.getvalue(), args.runs)
            diff = float(np.max(np.abs(ours_px - their_px)))
            om, tm = statistics.median(ours) * 1e3, statistics.median(theirs) * 1e3
            print(f"| {name} | {om:.1f} ({min(ours) * 1e3:.1f}) | {tm:.1f} ({min(theirs) * 1e3:.1f}) | {tm / om:.1f}x | {diff:g} |")


if __name__ == "__main__":
    main()
