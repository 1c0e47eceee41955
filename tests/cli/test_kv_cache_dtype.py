"""--kv-cache-dtype: bf16 by default on the CPU, f32|bf16|q8|q4v by flag or SANCTUM_KV_CACHE_DTYPE, each
dtype's logits within a stated distance of the f32 cache's on the default model over a prompt long
enough to fill several cache blocks (both the prefill and the decode attention reading the stored
rows), and the memory plan counting the dtype's bytes; with --device cuda every dtype taken. The
other suites pin f32 through the environment (tests/conftest.py), so these start sanctum without it."""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
MODEL = ROOT / "models" / "default" / "mlx-4bit"
PROMPT = np.random.default_rng(5).integers(0, 4096, size=600).tolist()
SPLIT = 560  # the last 40 positions are fed one token at a time: the decode kernel reads the cache too

# Largest |logit - f32 logit| allowed, over every position, and the share of positions whose argmax
# must equal f32's. Measured on this prompt with the default model retrained with tools: bf16 0.065
# and 99.7%, q8 0.16 and 99.3%, q4v 2.04 and 93.8%, on logits spread over 39 (the weights before
# gave q4v 0.93 and 98.5%: 4-bit values cost visibly more on this model; bench/RESULTS.md, "KV cache
# dtypes"). The bounds leave about twice the distance; a broken format is off by the whole spread.
TOLERANCE = {"bf16": (0.15, 0.99), "q8": (0.4, 0.98), "q4v": (4.0, 0.88)}


def env(**extra):
    e = {k: v for k, v in os.environ.items() if k != "SANCTUM_KV_CACHE_DTYPE"}
    return {**e, "SANCTUM_MATMUL_PRECISION": "f32", **extra}


def logits(sanctum_bin, tmp_path, *flags, **extra_env):
    out = tmp_path / "logits.npy"
    subprocess.run([sanctum_bin, "logits", "--model", str(MODEL), "--prompt-ids", ",".join(map(str, PROMPT)), "--split", str(SPLIT),
                    "--threads", "2", "--out", str(out), *flags], capture_output=True, check=True, timeout=300, env=env(**extra_env))
    return np.load(out)


def bench_dtype(sanctum_bin, *flags, **extra_env):
    r = subprocess.run([sanctum_bin, "bench", "--model", str(MODEL), "--pp", "8", "--tg", "2", "--repetitions", "1", "--json", *flags],
                       capture_output=True, text=True, check=True, timeout=120, env=env(**extra_env))
    return json.loads(r.stdout)["kv_cache_dtype"]


def test_the_cpu_default_is_bf16_and_the_flag_and_environment_override_it(sanctum_bin):
    assert bench_dtype(sanctum_bin) == "bf16"
    assert bench_dtype(sanctum_bin, SANCTUM_KV_CACHE_DTYPE="q8") == "q8"
    assert bench_dtype(sanctum_bin, "--kv-cache-dtype", "q4v", SANCTUM_KV_CACHE_DTYPE="q8") == "q4v"


def test_an_unknown_dtype_is_refused_naming_the_choices(sanctum_bin):
    r = subprocess.run([sanctum_bin, "bench", "--model", str(MODEL), "--kv-cache-dtype", "q3"], capture_output=True, text=True,
                       timeout=60, env=env())
    assert r.returncode != 0 and "use f32, bf16, q8 or q4v" in r.stderr


@pytest.mark.parametrize("dtype", ["bf16", "q8", "q4v"])
def test_each_dtype_keeps_the_logits_near_the_f32_caches(sanctum_bin, tmp_path, dtype):
    want = logits(sanctum_bin, tmp_path, "--kv-cache-dtype", "f32")
    got = logits(sanctum_bin, tmp_path, "--kv-cache-dtype", dtype)
    max_diff, min_agreement = TOLERANCE[dtype]
    assert np.max(np.abs(got - want)) <= max_diff
    assert np.mean(np.argmax(got, axis=1) == np.argmax(want, axis=1)) >= min_agreement
    assert not np.array_equal(got, want)  # the dtype took effect: its rounding shows


def test_the_default_computes_bf16_bit_for_bit(sanctum_bin, tmp_path):
    assert np.array_equal(logits(sanctum_bin, tmp_path), logits(sanctum_bin, tmp_path, "--kv-cache-dtype", "bf16"))


def bench_on_cuda(sanctum_bin, dtype):
    return subprocess.run([sanctum_bin, "bench", "--model", str(MODEL), "--device", "cuda", "--kv-cache-dtype", dtype, "--pp", "8", "--tg", "2",
                           "--repetitions", "1", "--json"], capture_output=True, text=True, timeout=120, env=env())


@pytest.mark.parametrize("dtype", ["bf16", "q8", "q4v"])
def test_cuda_takes_every_dtype_past_the_dtype_check(sanctum_bin, dtype):
    # Runs where a GPU is; elsewhere it stops at the GPU's absence, never at the dtype.
    r = bench_on_cuda(sanctum_bin, dtype)
    assert r.returncode == 0 or "--kv-cache-dtype" not in r.stderr, r.stderr
