"""Shared machinery of the mlx-lm parity suites: build a tiny random checkpoint with mlx-lm, run
sanctum on it, compare logits and greedy generations with mlx-lm evaluated in float32."""
import os
import shlex
import subprocess
import zlib

import numpy as np

import tiny_models

FORMATS = {"bf16": (0, 64), "q4g64": (4, 64), "q8g64": (8, 64), "q4g32": (4, 32), "q8g128": (8, 128)}
PROMPT_LENGTHS = [1, 7, 64]
GREEDY_TOKENS = 32
TIE_GAP = 1e-3  # reference top-2 gaps below this are near-ties: reported, not asserted
# Extra sanctum flags for every run, e.g. "--device cuda --matmul-precision f32" to hold the GPU
# backend to the same references (scripts/gpu_check.sh sets it on a GPU machine).
DEVICE_ARGS = shlex.split(os.environ.get("SANCTUM_PARITY_DEVICE_ARGS", ""))


class CheckpointCache:
    """Builds each (case, format) checkpoint once per module."""

    def __init__(self, cases, base_configs, tmp_path_factory):
        self.cases, self.base, self.tmp = cases, base_configs, tmp_path_factory
        self.built = {}

    def get(self, name, fmt):
        key = (name, fmt)
        if key not in self.built:
            base_name, overrides = self.cases[name]
            cfg = dict(self.base[base_name])
            overrides = dict(overrides)
            nest = overrides.pop("nest_as_vl", False)
            cfg.update(overrides)
            if nest:
                cfg = tiny_models.nest_as_vl(cfg)
            bits, group = FORMATS[fmt]
            model = tiny_models.make_model(cfg, seed=zlib.crc32(name.encode()) % 1000)
            out = self.tmp.mktemp(f"{name}-{fmt}")
            tiny_models.save_checkpoint(model, cfg, out, bits=bits, group_size=group)
            self.built[key] = (out, tiny_models.load(out), cfg)
        return self.built[key]


def vocab_of(cfg):
    return cfg.get("vocab_size") or cfg["text_config"]["vocab_size"]


def prompt_of(length, vocab, seed):
    return np.random.default_rng(seed).integers(0, vocab, size=length).tolist()


def sanctum_logits(sanctum_bin, model_dir, prompt, out_path, split=None, extra=()):
    cmd = [sanctum_bin, "logits", "--model", str(model_dir), "--prompt-ids", ",".join(map(str, prompt)), "--out", str(out_path)]
    if split is not None:
        cmd += ["--split", str(split)]
    cmd += list(extra) + DEVICE_ARGS
    subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300)
    return np.load(out_path)


def sanctum_greedy(sanctum_bin, model_dir, prompt, max_tokens):
    r = subprocess.run([sanctum_bin, "generate", "--model", str(model_dir), "--prompt-ids", ",".join(map(str, prompt)),
                        "--max-tokens", str(max_tokens), "--temperature", "0", "--ignore-eos", *DEVICE_ARGS],
                       check=True, capture_output=True, text=True, timeout=300)
    return [int(t) for t in r.stdout.strip().split(",")]


def check_logits(sanctum_bin, model_dir, ref_model, cfg, tmp_path, label, rel_tol=2e-3):
    worst, near_ties, positions = 0.0, 0, 0
    for length in PROMPT_LENGTHS:
        prompt = prompt_of(length, vocab_of(cfg), seed=length)
        ref = tiny_models.reference_logits(ref_model, prompt)
        ours = sanctum_logits(sanctum_bin, model_dir, prompt, tmp_path / f"l{length}.npy")
        assert ours.shape == ref.shape
        diff = float(np.max(np.abs(ours - ref)))
        worst = max(worst, diff)
        scale = float(np.max(np.abs(ref)))
        assert diff <= rel_tol * max(1.0, scale), f"{label} len {length}: max |dlogit| {diff:.3g} (logit scale {scale:.3g})"
        top2 = np.sort(ref, axis=-1)[:, -2:]
        for pos in range(length):
            positions += 1
            if top2[pos, 1] - top2[pos, 0] < TIE_GAP:
                near_ties += 1
                continue
            assert int(np.argmax(ours[pos])) == int(np.argmax(ref[pos])), f"{label} len {length} pos {pos}: argmax differs"
    print(f"{label}: max |dlogit| = {worst:.3g}, near-ties skipped {near_ties}/{positions}")
    assert near_ties <= max(1, positions // 20)


def check_greedy(sanctum_bin, model_dir, ref_model, cfg):
    prompt = prompt_of(7, vocab_of(cfg), seed=123)
    expected = tiny_models.reference_greedy(ref_model, prompt, GREEDY_TOKENS)
    assert sanctum_greedy(sanctum_bin, model_dir, prompt, GREEDY_TOKENS) == expected
