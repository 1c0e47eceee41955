#!/usr/bin/env python3
"""Converts the Hugging Face checkpoint to MLX 4-bit (affine, group 64) with mlx-lm's own converter.

  convert_mlx.py --hf models/default/hf-bf16 --out models/default/mlx-4bit

transformers saves the text-only model with model_type "qwen3_5_text", which mlx-lm has no module for;
its "qwen3_5" module reads a flat text config as well, so the converter gets a staged copy whose
config says "qwen3_5" (nothing else changes). The MLX checkpoint therefore carries model_type
"qwen3_5", flat text fields, layer_types and full_attention_interval.
"""
import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hf", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bits", type=int, default=4)
    ap.add_argument("--group-size", type=int, default=64)
    a = ap.parse_args()

    out = Path(a.out)
    if out.exists():
        shutil.rmtree(out)
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "hf"
        shutil.copytree(a.hf, staged)
        cfg = json.loads((staged / "config.json").read_text())
        cfg["model_type"] = "qwen3_5"
        (staged / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
        cmd = [sys.executable, "-m", "mlx_lm", "convert", "--hf-path", str(staged), "--mlx-path", str(out), "-q",
               "--q-bits", str(a.bits), "--q-group-size", str(a.group_size), "--dtype", "bfloat16"]
        print(" ".join(cmd[1:]))
        subprocess.run(cmd, check=True)
    # mlx-lm writes a stub model card; the model's card is models/default/README.md
    (out / "README.md").unlink(missing_ok=True)
    # the generation config and tokenizer files travel unchanged
    for f in ("generation_config.json", "tokenizer.json", "tokenizer_config.json"):
        shutil.copy(Path(a.hf) / f, out / f)
    total = sum(p.stat().st_size for p in out.iterdir())
    print(f"wrote {out} ({total / 1e6:.2f} MB): {sorted(p.name for p in out.iterdir())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
