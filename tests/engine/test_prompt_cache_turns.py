"""Agent-style multi-turn continuations through the prompt cache: each turn's prompt is the previous
prompt + the model's (long) answer + a tool result, several conversations interleaved as a server
sees them. At temperature 0 the outputs are byte-identical with the cache on/off and speculation
on/off, and every turn after the first continues from past the previous prompt: on hybrid models
from the end-of-generation snapshot (the last 64-aligned position of previous prompt + answer), on
attention-only models from the whole previous sequence."""
import numpy as np
import pytest

from engine_models import ARCHS
from prompts_file import generate_prompts

TURNS = 5
CONVERSATIONS = 4
ANSWER = 160  # tokens per answer: long enough that most of it lies before its last aligned position
HYBRID = {"qwen3_5", "qwen3_5_moe"}


def aligned_point(n):
    return max(0, n - 2) // 64 * 64


def run(sanctum_bin, model_dir, prompts, tmp_path, *flags):
    outs, reused, log = generate_prompts(sanctum_bin, model_dir, prompts, tmp_path, ANSWER, flags, timeout=900)
    assert len(reused) == len(prompts)
    return outs, reused, log


def conversations(sanctum_bin, model_dir, vocab, tmp_path):
    """Turn by turn from real answers; returned in serving order (the conversations interleaved)."""
    rng = np.random.default_rng(5)
    convs = [[rng.integers(0, vocab, size=int(rng.integers(30, 200))).tolist()] for _ in range(CONVERSATIONS)]
    for _ in range(TURNS - 1):
        answers, _, _ = run(sanctum_bin, model_dir, [c[-1] for c in convs], tmp_path, "--no-pld")
        for c, answer in zip(convs, answers):
            c.append(c[-1] + answer + rng.integers(0, vocab, size=int(rng.integers(5, 60))).tolist())
    return [c[t] for t in range(TURNS) for c in convs]


@pytest.mark.parametrize("arch", ["qwen3_5", "qwen3_5_moe", "qwen2"])
def test_next_turn_continues_past_the_previous_answer_and_outputs_stay_exact(sanctum_bin, models, tmp_path, arch):
    model_dir, vocab = models[arch]
    prompts = conversations(sanctum_bin, model_dir, vocab, tmp_path)
    reference, reused_off, _ = run(sanctum_bin, model_dir, prompts, tmp_path, "--no-pld")
    assert sum(reused_off) == 0
    for flags in (("--prompt-cache-mb", "256", "--no-pld"), ("--prompt-cache-mb", "256", "--pld-always"), ("--pld-always",)):
        outs, reused, log = run(sanctum_bin, model_dir, prompts, tmp_path, *flags)
        assert outs == reference, f"{arch} {flags}"
        if "--prompt-cache-mb" not in flags:
            continue
        if arch in HYBRID:
            assert "end-of-generation snapshot" in log
        for i in range(CONVERSATIONS, len(prompts)):
            previous, answer = prompts[i - CONVERSATIONS], reference[i - CONVERSATIONS]
            end = len(previous) + len(answer)  # the previous turn's prompt + answer
            if arch in HYBRID:
                assert reused[i] == aligned_point(end), (arch, flags, i)
            else:
                assert reused[i] >= end - 1, (arch, flags, i)  # all but the last sampled token, never fed
            assert reused[i] > len(previous), (arch, flags, i)
            assert reused[i] - len(previous) >= len(answer) // 2, (arch, flags, i)  # most of the answer
        total = sum(len(p) for p in prompts[CONVERSATIONS:])
        print(f"{arch} {flags}: turns 2-{TURNS}: {sum(reused[CONVERSATIONS:])} of {total} prompt tokens from the cache")


def test_end_of_generation_snapshots_fit_a_small_pool_and_stay_exact(sanctum_bin, models, tmp_path):
    model_dir, vocab = models["qwen3_5"]
    prompts = conversations(sanctum_bin, model_dir, vocab, tmp_path)
    reference, _, _ = run(sanctum_bin, model_dir, prompts, tmp_path, "--no-pld")
    outs, _, _ = run(sanctum_bin, model_dir, prompts, tmp_path, "--no-pld", "--prompt-cache-mb", "1")
    assert outs == reference
