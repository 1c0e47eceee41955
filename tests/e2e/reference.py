"""Expectations computed apart from the server's sampling and prompt code, for the e2e checks of what
a parameter does: chat prompts rendered by jinja2 and counted by HF tokenizers, token ids recovered
from the `bytes` of chat logprobs, each step's raw logits from `sanctum logits` (the model alone),
and the penalties' formulas applied to them in numpy."""
from __future__ import annotations

import gzip
import importlib.util
import json
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np

from server_harness import ROOT

PENALTY_WINDOW = 64  # SamplingParams::penalty_window: the prompt's and the answer's last 64 tokens


def _byte_decoder() -> dict[str, int]:
    spec = importlib.util.spec_from_file_location("make_tekken", ROOT / "tests" / "tokenizer" / "make_tekken.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.byte_decoder()


class Vocab:
    """A model folder's tokenizer.json (HF tokenizers) and chat template; ids from raw token bytes."""

    def __init__(self, model_dir: Path):
        from tokenizers import Tokenizer
        path = Path(model_dir) / "tokenizer.json"
        text = path.read_text() if path.exists() else gzip.open(str(path) + ".gz", "rt").read()
        self.tokenizer = Tokenizer.from_str(text)
        config = json.loads((Path(model_dir) / "tokenizer_config.json").read_text())
        template = Path(model_dir) / "chat_template.jinja"
        self.template = template.read_text() if template.exists() else config["chat_template"]
        added = {t["id"] for t in json.loads(text)["added_tokens"]}
        dec = _byte_decoder()
        by_bytes: dict[bytes, list[int]] = {}
        for piece, i in self.tokenizer.get_vocab(with_added_tokens=True).items():
            raw = piece.encode() if i in added else bytes(dec[c] for c in piece)
            by_bytes.setdefault(raw, []).append(i)
        self.by_bytes = by_bytes

    def id_of(self, raw: bytes) -> int:
        ids = self.by_bytes.get(bytes(raw), [])
        assert len(ids) == 1, f"{raw!r} names {len(ids)} tokens"
        return ids[0]

    def ids_of(self, logprob_entries) -> list[int]:
        """The ids of a chat response's logprobs.content entries (each carries its raw bytes)."""
        return [self.id_of(bytes(e.bytes)) for e in logprob_entries]

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    def render(self, messages: list[dict], **kwargs) -> str:
        """The chat template with add_generation_prompt, as transformers renders it."""
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message):
            raise ValueError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        return env.from_string(self.template).render(messages=messages, add_generation_prompt=True, **kwargs)

    def chat_prompt(self, messages: list[dict], **kwargs) -> list[int]:
        return self.encode(self.render(messages, **kwargs))


def step_logits(sanctum_bin: str, model_dir: Path, prompt: list[int], answer: list[int], out: Path) -> np.ndarray:
    """The raw logits the model gives for each answer token, from the prompt and the answer before it
    (prompt fed as one prefill, then one token a step): row k is what the k-th token was picked from."""
    ids = prompt + answer[:-1]
    subprocess.run([sanctum_bin, "logits", "--model", str(model_dir), "--prompt-ids", ",".join(map(str, ids)),
                    "--out", str(out), "--split", str(len(prompt)), "--threads", "1"],
                   check=True, capture_output=True, timeout=300)
    return np.load(out)[len(prompt) - 1:]


def log_softmax(row: np.ndarray) -> np.ndarray:
    row = row.astype(np.float64)
    peak = row.max()
    return row - (peak + np.log(np.exp(row - peak).sum()))


def penalized(row: np.ndarray, history: list[int], presence=0.0, frequency=0.0, repetition=1.0) -> np.ndarray:
    """OpenAI's presence and frequency penalties (minus presence once and frequency per occurrence) and
    the CTRL repetition penalty (positive logits divided, negative multiplied), over the window."""
    out = row.astype(np.float64).copy()
    for token, count in Counter(history[-PENALTY_WINDOW:]).items():
        if repetition != 1.0:
            out[token] = out[token] / repetition if out[token] > 0 else out[token] * repetition
        out[token] -= presence + frequency * count
    return out


def sampling_filter(row: np.ndarray, temperature: float, top_k: int, top_p: float, min_p: float) -> set[int]:
    """The tokens sampling may pick: the top_k largest logits (ties: lower id first), then those whose
    probability at the temperature is at least min_p times the best one's, then the smallest prefix
    whose mass reaches top_p."""
    scaled = row.astype(np.float64) / temperature
    order = np.lexsort((np.arange(len(scaled)), -scaled))
    if top_k > 0:
        order = order[:top_k]
    p = np.exp(scaled[order] - scaled[order[0]])
    p /= p.sum()
    if min_p > 0:
        keep = p >= min_p * p[0]
        order, p = order[keep], p[keep]
    if top_p < 1:
        order = order[:int(np.searchsorted(np.cumsum(p), top_p)) + 1]
    return set(order.tolist())


def repeats(ids: list[int]) -> int:
    """Tokens that already appeared earlier in the same answer."""
    return len(ids) - len(set(ids))
