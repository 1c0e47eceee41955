#!/usr/bin/env python3
"""Trains the byte-level BPE tokenizer on rendered synthetic chats and writes tokenizer.json +
tokenizer_config.json (with the chat template) into --out.

The pre-tokenizer, normalizer and decoder are Qwen2/Qwen3's (NFC, the same split regex, byte-level),
so the engine's Qwen tokenizer path covers this file. Added tokens take ids 0..8.
"""
import argparse
import json
import sys
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import data  # noqa: E402

SPLIT_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tool_call>", "</tool_call>",
           "<tool_response>", "</tool_response>"]
# The think and tool tags are added tokens that stay in decoded text (like Qwen3), so they are not "special"
NOT_SPECIAL = {"<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"}


def corpus(seed: int, n: int):
    per = 5000
    for shard in range((n + per - 1) // per):
        for e in data.train_examples(seed + 1000, shard, per):
            yield e.prompt() + e.target() + "<|im_end|>\n"
    # every word of the tables appears, so each has a chance at its own merges
    from tables import COUNTRIES, NAMES, WORDS
    yield " ".join(WORDS) + " " + " ".join(NAMES) + " " + " ".join(c + " " + k for c, k in COUNTRIES)


def build(seed: int, vocab_size: int, n_texts: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token=None, byte_fallback=False, fuse_unk=False))
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(SPLIT_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(corpus(seed, n_texts), trainer=trainer)
    return tok


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--vocab-size", type=int, default=4096)
    ap.add_argument("--texts", type=int, default=200000)
    ap.add_argument("--max-length", type=int, default=4096)
    a = ap.parse_args()

    tok = build(a.seed, a.vocab_size, a.texts)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    # Mark the think tags as non-special added tokens (the trainer adds every special token as special).
    tj = json.loads((out / "tokenizer.json").read_text())
    for t in tj["added_tokens"]:
        if t["content"] in NOT_SPECIAL:
            t["special"] = False
    tj["post_processor"] = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    (out / "tokenizer.json").write_text(json.dumps(tj, ensure_ascii=False, indent=1) + "\n")

    ids = {t["content"]: t["id"] for t in tj["added_tokens"]}
    cfg = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "add_bos_token": False,
        "add_prefix_space": False,
        "clean_up_tokenization_spaces": False,
        "split_special_tokens": False,
        "errors": "replace",
        "model_max_length": a.max_length,
        "added_tokens_decoder": {str(ids[s]): {"content": s, "lstrip": False, "normalized": False, "rstrip": False,
                                               "single_word": False, "special": s not in NOT_SPECIAL} for s in SPECIAL},
        "chat_template": (HERE / "chat_template.jinja").read_text(),
    }
    (out / "tokenizer_config.json").write_text(json.dumps(cfg, ensure_ascii=False, indent=2) + "\n")
    print(f"vocab {tok.get_vocab_size()} (asked {a.vocab_size}); special ids {ids}; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
