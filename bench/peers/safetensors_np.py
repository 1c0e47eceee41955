"""Reads safetensors files into NumPy without the safetensors package (bf16 widened to f32)."""
from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "U32": np.uint32, "I32": np.int32, "U8": np.uint8, "BF16": np.uint16}


class LazyTensors(dict):
    """name -> array, memory-mapped; bf16 tensors come back as f32."""

    def __getitem__(self, name: str) -> np.ndarray:
        path, dtype, shape, start, end = super().__getitem__(name)
        raw = np.memmap(path, dtype=np.uint8, mode="r", offset=start, shape=(end - start,))
        arr = raw.view(DTYPES[dtype]).reshape(shape)
        if dtype == "BF16":
            return (arr.astype(np.uint32) << 16).view(np.float32)
        return arr


def open_dir(model_dir: Path) -> LazyTensors:
    out = LazyTensors()
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{model_dir}: no .safetensors files")
    for path in files:
        with open(path, "rb") as f:
            (n,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(n))
        for name, info in header.items():
            if name == "__metadata__":
                continue
            if info["dtype"] not in DTYPES:
                raise ValueError(f"{path}: {name} has dtype {info['dtype']}, which this reader does not know")
            start, end = info["data_offsets"]
            dict.__setitem__(out, name, (path, info["dtype"], tuple(info["shape"]), 8 + n + start, 8 + n + end))
    return out
