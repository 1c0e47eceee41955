"""The command-line tools' CPU default is the fast path: int8 activations where the CPU has AVX-512
VNNI, f32 elsewhere; --matmul-precision and SANCTUM_MATMUL_PRECISION override it. The other suites pin
f32 through the environment (tests/conftest.py), so these start sanctum without it."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "default" / "mlx-4bit"


def has_vnni() -> bool:
    flags = next((line for line in Path("/proc/cpuinfo").read_text().splitlines() if line.startswith("flags")), "")
    return " avx512_vnni" in flags and " avx512bw" in flags


def env(**extra):
    e = {k: v for k, v in os.environ.items() if k != "SANCTUM_MATMUL_PRECISION"}
    return {**e, **extra}


def logits(sanctum_bin, tmp_path, *flags, **extra_env):
    out = tmp_path / "logits.npy"
    subprocess.run([sanctum_bin, "logits", "--model", str(MODEL), "--prompt-ids", "1,872,198,3045,525,2,198,1,1000,198",
                    "--out", str(out), *flags], capture_output=True, check=True, timeout=120, env=env(**extra_env))
    return np.load(out)


def bench_precision(sanctum_bin, *flags, **extra_env):
    r = subprocess.run([sanctum_bin, "bench", "--model", str(MODEL), "--pp", "8", "--tg", "2", "--repetitions", "1", "--json", *flags],
                       capture_output=True, text=True, check=True, timeout=120, env=env(**extra_env))
    return json.loads(r.stdout)["matmul_precision"]


def test_the_cpu_default_is_int8_where_vnni_runs_and_f32_elsewhere(sanctum_bin):
    assert bench_precision(sanctum_bin) == ("int8" if has_vnni() else "f32")


def test_the_flag_and_the_environment_override_the_default(sanctum_bin):
    assert bench_precision(sanctum_bin, "--matmul-precision", "f32") == "f32"
    assert bench_precision(sanctum_bin, SANCTUM_MATMUL_PRECISION="f32") == "f32"
    assert bench_precision(sanctum_bin, "--matmul-precision", "int8", SANCTUM_MATMUL_PRECISION="f32") == "int8"


def test_the_default_computes_that_path_bit_for_bit(sanctum_bin, tmp_path):
    default = logits(sanctum_bin, tmp_path)
    int8, f32 = logits(sanctum_bin, tmp_path, "--matmul-precision", "int8"), logits(sanctum_bin, tmp_path, "--matmul-precision", "f32")
    assert not np.array_equal(int8, f32)  # the two paths are told apart
    assert np.array_equal(default, int8 if has_vnni() else f32)
