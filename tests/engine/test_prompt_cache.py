"""Prompt-cache reuse is exact: at temperature 0 a battery of single prompts and multi-turn
conversations (each turn = the previous prompt + the model's reply + a new message) gives
byte-identical outputs with the cache on or off, and with speculation on or off — all four
combinations, every architecture — while the cache really serves prompt tokens."""
import numpy as np
import pytest

from engine_models import ARCHS
from prompts_file import generate_prompts

TURNS = 4
CONVERSATIONS = 10
SINGLES = 12
MAX_TOKENS = 12


def run(sanctum_bin, model_dir, prompts, tmp_path, *flags):
    outs, reused, _ = generate_prompts(sanctum_bin, model_dir, prompts, tmp_path, MAX_TOKENS, flags, timeout=600)
    return outs, sum(reused)


def conversation_battery(sanctum_bin, model_dir, vocab, tmp_path):
    """Prompts in serving order: conversations built turn by turn from real replies, then singles."""
    rng = np.random.default_rng(11)
    convs = [[rng.integers(0, vocab, size=int(rng.integers(20, 90))).tolist()] for _ in range(CONVERSATIONS)]
    for _ in range(TURNS - 1):
        replies, _ = run(sanctum_bin, model_dir, [c[-1] for c in convs], tmp_path, "--no-pld")
        for c, reply in zip(convs, replies):
            c.append(c[-1] + reply + rng.integers(0, vocab, size=int(rng.integers(3, 30))).tolist())
    prompts = [p for c in convs for p in c]
    singles = [rng.integers(0, vocab, size=int(rng.integers(2, 60))).tolist() for _ in range(SINGLES)]
    # Some singles share a long prefix with a conversation: cache hits across unrelated requests.
    singles += [convs[i][0][:50] + rng.integers(0, vocab, size=5).tolist() for i in range(3)]
    return prompts + singles


@pytest.mark.parametrize("arch", list(ARCHS))
def test_cache_and_speculation_never_change_greedy_output(sanctum_bin, models, tmp_path, arch):
    model_dir, vocab = models[arch]
    prompts = conversation_battery(sanctum_bin, model_dir, vocab, tmp_path)
    assert len(prompts) >= 50
    reference, reused_off = run(sanctum_bin, model_dir, prompts, tmp_path, "--no-pld")
    assert reused_off == 0
    for flags in (("--prompt-cache-mb", "256", "--no-pld"), ("--prompt-cache-mb", "256", "--pld-always"), ("--pld-always",)):
        outs, reused = run(sanctum_bin, model_dir, prompts, tmp_path, *flags)
        assert outs == reference, f"{arch} {flags}"
        if "--prompt-cache-mb" in flags:
            total = sum(len(p) for p in prompts)
            print(f"{arch} {flags}: {reused} of {total} prompt tokens served from the cache")
            assert reused > total // 4


def test_tiny_cache_evicts_and_stays_exact(sanctum_bin, models, tmp_path):
    model_dir, vocab = models["qwen3_5"]
    prompts = conversation_battery(sanctum_bin, model_dir, vocab, tmp_path)[:16]
    reference, _ = run(sanctum_bin, model_dir, prompts, tmp_path, "--no-pld")
    outs, _ = run(sanctum_bin, model_dir, prompts, tmp_path, "--prompt-cache-mb", "1")
    assert outs == reference
