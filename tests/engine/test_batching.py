"""Continuous batching is exact: prompts run through the engine several at once (random arrivals,
lengths, max_tokens, cancellations, n > 1 choices sharing a prefill, prompt-lookup drafts and
prompt-cache hits) give every sequence the tokens of its solo run, for every architecture, in bf16
and MLX 4-bit, in both CPU matmul precisions, greedy and seeded sampling. The solo reference is the
plain generate path (one sequence, no engine), so the batched engine is checked against code that
never batches."""
import subprocess

import numpy as np
import pytest

import tiny_models
from engine_models import ARCHS


@pytest.fixture(scope="module")
def bf16_models(tmp_path_factory):
    built = {}
    for name, (base, overrides) in ARCHS.items():
        cfg = dict(tiny_models.BASE_CONFIGS[base])
        cfg.update(overrides)
        out = tmp_path_factory.mktemp(name + "-bf16")
        tiny_models.save_checkpoint(tiny_models.make_model(cfg, seed=5), cfg, out)
        built[name] = (out, cfg["vocab_size"])
    return built


def schedule(vocab, n=14, seed=0):
    """Random prompts (some sharing a prefix, so the prompt cache hits; some copy-heavy, so drafts are
    kept), each with random max_tokens, an arrival delay, sometimes n > 1 or a cancellation."""
    rng = np.random.default_rng(seed)
    shared = rng.integers(0, vocab, size=70).tolist()
    lines = []
    for i in range(n):
        kind = i % 3
        if kind == 0:
            ids = rng.integers(0, vocab, size=int(rng.integers(2, 90))).tolist()
        elif kind == 1:
            ids = shared[: int(rng.integers(20, 70))] + rng.integers(0, vocab, size=int(rng.integers(1, 20))).tolist()
        else:
            span = rng.integers(0, vocab, size=int(rng.integers(4, 12))).tolist()
            ids = span + span + span[: len(span) // 2]
        settings = {"max_tokens": int(rng.integers(1, 24)), "delay_ms": int(rng.integers(0, 30))}
        if rng.random() < 0.25:
            settings["n"] = int(rng.integers(2, 4))
        elif rng.random() < 0.25:
            settings["cancel_after"] = int(rng.integers(1, settings["max_tokens"] + 1))
        lines.append((ids, settings))
    return lines


def write(tmp_path, name, lines, with_settings=True):
    f = tmp_path / name
    text = []
    for ids, settings in lines:
        row = ",".join(map(str, ids))
        if with_settings:
            row += "|" + ",".join(f"{k}={v}" for k, v in settings.items())
        text.append(row)
    f.write_text("\n".join(text) + "\n")
    return f


def run(sanctum_bin, model_dir, prompts_file, *flags):
    r = subprocess.run([sanctum_bin, "generate", "--model", str(model_dir), "--prompts-file", str(prompts_file), "--ignore-eos",
                        *flags], check=True, capture_output=True, text=True, timeout=600)
    return r.stdout.strip().split("\n")


def choices(line):
    return [[int(t) for t in c.strip().split(",") if t] for c in line.split("|")]


def check_against_solo(sanctum_bin, model_dir, vocab, tmp_path, *flags, seed=0):
    lines = schedule(vocab, seed=seed)
    batched = run(sanctum_bin, model_dir, write(tmp_path, "batched.txt", lines), "--parallel", "6", "--pld-always",
                  "--prompt-cache-mb", "64", "--max-tokens", "24", *flags)
    assert len(batched) == len(lines)
    # The solo reference: each prompt alone through the plain generate loop, long enough for any
    # max_tokens; line i samples with seed + i there as in the batched run.
    solo = run(sanctum_bin, model_dir, write(tmp_path, "solo.txt", lines, with_settings=False), "--no-pld",
               "--max-tokens", "24", *flags)
    solo = [choices(s)[0] for s in solo]
    sampled = "--temperature" in flags
    for i, ((ids, settings), line) in enumerate(zip(lines, batched)):
        got = choices(line)
        assert len(got) == settings.get("n", 1), f"line {i}"
        want_len = min(settings["max_tokens"], settings.get("cancel_after", 10**9))
        for c, tokens in enumerate(got):
            if sampled and c > 0:
                continue  # choice c samples on another stream; covered by test_n_choices_sample_their_own_streams
            assert tokens == solo[i][:want_len], f"line {i} choice {c}: batched {tokens} != solo {solo[i][:want_len]}"


@pytest.mark.parametrize("arch", list(ARCHS))
def test_batched_schedule_equals_solo_4bit(sanctum_bin, models, tmp_path, arch):
    model_dir, vocab = models[arch]
    check_against_solo(sanctum_bin, model_dir, vocab, tmp_path)


@pytest.mark.parametrize("arch", list(ARCHS))
def test_batched_schedule_equals_solo_bf16(sanctum_bin, bf16_models, tmp_path, arch):
    model_dir, vocab = bf16_models[arch]
    check_against_solo(sanctum_bin, model_dir, vocab, tmp_path, seed=1)


@pytest.mark.parametrize("arch", ["qwen2", "qwen3_5", "qwen3_5_moe"])
def test_batched_schedule_equals_solo_int8_activations(sanctum_bin, models, tmp_path, arch):
    model_dir, vocab = models[arch]
    check_against_solo(sanctum_bin, model_dir, vocab, tmp_path, "--matmul-precision", "int8", seed=2)


@pytest.mark.parametrize("arch", ["mistral", "qwen3_5"])
def test_seeded_sampling_batched_equals_solo(sanctum_bin, models, tmp_path, arch):
    model_dir, vocab = models[arch]
    check_against_solo(sanctum_bin, model_dir, vocab, tmp_path, "--temperature", "0.8", "--top-p", "0.9", "--seed", "11", seed=3)


def test_n_choices_sample_their_own_streams(sanctum_bin, models, tmp_path):
    # Choice c of line 0 samples with seed + c: the stream line c of a solo run uses.
    model_dir, vocab = models["qwen3_5"]
    prompt = np.random.default_rng(4).integers(0, vocab, size=20).tolist()
    flags = ("--temperature", "1.0", "--seed", "21", "--max-tokens", "16")
    batched = run(sanctum_bin, model_dir, write(tmp_path, "n.txt", [(prompt, {"n": 3})]), "--parallel", "4", *flags)
    solo = run(sanctum_bin, model_dir, write(tmp_path, "s.txt", [(prompt, {})] * 3, with_settings=False), *flags)
    got = choices(batched[0])
    assert got == [choices(s)[0] for s in solo]
    assert len({tuple(c) for c in got}) > 1, "three sampled choices came out identical"
