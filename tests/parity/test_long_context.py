"""Long prompts against mlx-lm (the independent reference): 8,192 tokens in CI, 32,768 with
SANCTUM_LONG_CONTEXT_TOKENS=32768 (bench/RESULTS.md has that run), on tiny random checkpoints
of the hybrid qwen3_5, of mistral with YaRN scaling (factor 8 over 4,096 original positions, as
Devstral configures it) and of qwen2 with YaRN, in 4-bit. mlx-lm prefills in pieces through its own
cache (a whole-prompt forward would hold 32k x 32k scores); sanctum prefills in its pieces too.
- the logits of the last 8 prompt positions, the last 4 of them fed as decode steps (--split): within
  the parity tolerance of mlx-lm's and with the same argmax;
- 8 greedy tokens after the prompt: identical.
The positions past 4,096 are the ones YaRN rescales: the default length already exercises them."""
import os
import subprocess
import zlib

import mlx.core as mx
import numpy as np
import pytest
from mlx_lm.models.cache import make_prompt_cache

import tiny_models
from parity_common import DEVICE_ARGS, TIE_GAP, prompt_of

TOKENS = int(os.environ.get("SANCTUM_LONG_CONTEXT_TOKENS", "8192"))
TIMEOUT = 300 * max(1, TOKENS // 8192) ** 2  # attention's cost grows with the square of the length
TAIL = 8
DECODED = 4
GREEDY = 8
PIECE = 512

CASES = {
    "qwen3_5-hybrid": ("qwen3_5", {"max_position_embeddings": 65536}),
    "mistral-yarn8": ("mistral", {"max_position_embeddings": 32768 + 4096, "rope_scaling": {
        "type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096, "beta_fast": 32.0, "beta_slow": 1.0}}),
    "qwen2-yarn8": ("qwen2", {"max_position_embeddings": 32768 + 4096, "rope_scaling": {
        "type": "yarn", "factor": 8.0, "original_max_position_embeddings": 4096}}),
}


def reference(model, prompt):
    """mlx-lm's logits for the last TAIL prompt positions, then GREEDY greedy tokens, one cache throughout."""
    cache = make_prompt_cache(model)
    for start in range(0, len(prompt) - TAIL, PIECE):
        model(mx.array([prompt[start:min(start + PIECE, len(prompt) - TAIL)]]), cache=cache)
        mx.eval([c.state for c in cache])
    logits = model(mx.array([prompt[-TAIL:]]), cache=cache)
    tail = np.array(logits[0].astype(mx.float32))
    out = []
    for _ in range(GREEDY):
        token = int(mx.argmax(logits[0, -1]).item())
        out.append(token)
        logits = model(mx.array([[token]]), cache=cache)
    return tail, out


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    out = {}
    for name, (base, overrides) in CASES.items():
        cfg = dict(tiny_models.BASE_CONFIGS[base])
        cfg.update(overrides)
        model = tiny_models.make_model(cfg, seed=zlib.crc32(name.encode()) % 1000)
        path = tmp_path_factory.mktemp(name)
        tiny_models.save_checkpoint(model, cfg, path, bits=4, group_size=64)
        out[name] = (path, tiny_models.load(path), cfg)
    return out


@pytest.mark.parametrize("name", list(CASES))
def test_a_long_prompt_gives_mlx_lm_logits_and_tokens(sanctum_bin, built, tmp_path, name):
    path, ref_model, cfg = built[name]
    prompt = prompt_of(TOKENS, cfg["vocab_size"], seed=7)
    ref_tail, ref_tokens = reference(ref_model, prompt)
    ids = ",".join(map(str, prompt))
    subprocess.run([sanctum_bin, "logits", "--model", str(path), "--prompt-ids", ids, "--split", str(TOKENS - DECODED),
                    "--out", str(tmp_path / "l.npy"), *DEVICE_ARGS], check=True, capture_output=True, timeout=TIMEOUT)
    ours = np.load(tmp_path / "l.npy")[-TAIL:]
    scale = float(np.max(np.abs(ref_tail)))
    diff = float(np.max(np.abs(ours - ref_tail)))
    print(f"{name}: {TOKENS} tokens, max |dlogit| {diff:.3g} (scale {scale:.3g})")
    assert diff <= 2e-3 * max(1.0, scale), f"{name}: max |dlogit| {diff:.3g} at {TOKENS} tokens (scale {scale:.3g})"
    top2 = np.sort(ref_tail, axis=-1)[:, -2:]
    for pos in range(TAIL):
        if top2[pos, 1] - top2[pos, 0] >= TIE_GAP:
            assert int(np.argmax(ours[pos])) == int(np.argmax(ref_tail[pos])), f"{name} position {TOKENS - TAIL + pos}"
    r = subprocess.run([sanctum_bin, "generate", "--model", str(path), "--prompt-ids", ids, "--max-tokens", str(GREEDY),
                        "--temperature", "0", "--ignore-eos", *DEVICE_ARGS], check=True, capture_output=True, text=True, timeout=TIMEOUT)
    assert [int(t) for t in r.stdout.strip().split(",")] == ref_tokens
