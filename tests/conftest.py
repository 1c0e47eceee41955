"""Shared pytest fixtures: the sanctum binary and the tools/ helpers on sys.path."""
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))

# The suites compare against independent references, so every sanctum they start runs the exact f32
# path unless a test asks otherwise (--matmul-precision wins over this variable). The CPU's default
# (int8 where the CPU has VNNI) has its own checks: tests/cli/test_default_precision.py.
os.environ.setdefault("SANCTUM_MATMUL_PRECISION", "f32")
# Likewise the exact f32 KV cache (--kv-cache-dtype wins); the other dtypes are checked against it in
# tests/cli/test_kv_cache_dtype.py.
os.environ.setdefault("SANCTUM_KV_CACHE_DTYPE", "f32")


@pytest.fixture(scope="session")
def sanctum_bin() -> str:
    path = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    if not Path(path).exists():
        pytest.fail(f"sanctum binary not found at {path}: build first or set SANCTUM_BIN")
    return path
