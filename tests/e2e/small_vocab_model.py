"""Random models with a small byte-level BPE vocabulary, for tests where only a constraint can make the output valid.

A grammar's token masks cost a walk over the vocabulary, so over ~1,000 tokens hundreds of schemas run in seconds
where a 150k vocabulary would take minutes. The merges are trained (tokenizers' BpeTrainer) on the JSON schemas of
tests/data/json_schemas, so property names and JSON punctuation become tokens, as in a real vocabulary. Each family
pairs the tokenizer with a real chat template from tests/data/chat_templates and the special tokens it needs, so the
server detects the tool-call format from the template as it does for real checkpoints. The weights are untied: tied
random embeddings make a model repeat its last token, which never ends a string.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "data" / "chat_templates"
MODEL_VOCAB = 1088  # padded past the tokenizer's ~1,040 ids: masks must cover the model's width

QWEN_SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
QWEN_TEXT = ["<think>", "</think>", "<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>"]
MISTRAL_SPECIAL = ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[AVAILABLE_TOOLS]", "[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]",
                   "[/TOOL_RESULTS]", "[TOOL_CALLS]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]"]

# family -> (chat template file or None for the server's ChatML, special tokens, plain added tokens, bos, eos)
FAMILIES = {
    "chatml": (None, QWEN_SPECIAL, QWEN_TEXT, None, "<|im_end|>"),
    "qwen_xml": ("Qwen3.5-4B.jinja", QWEN_SPECIAL, QWEN_TEXT, None, "<|im_end|>"),
    "hermes": ("Qwen-Qwen2.5-7B-Instruct.jinja", QWEN_SPECIAL, QWEN_TEXT, None, "<|im_end|>"),
    "mistral": ("mistralai-Mistral-Nemo-Instruct-2407.jinja", MISTRAL_SPECIAL, [], "<s>", "</s>"),
    "mistral_args": ("Mistral-Small-3.2-24B-Instruct-2506.jinja", MISTRAL_SPECIAL + ["[ARGS]", "[CALL_ID]"], [], "<s>", "</s>"),
}


def make_model(out: Path, family: str, seed: int = 0) -> Path:
    """A random 2-layer qwen2 checkpoint at `out` with the family's tokenizer and template (made once)."""
    if (out / "tokenizer.json").exists():
        return out
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers
    template, special, plain, bos, eos = FAMILIES[family]
    subprocess.run([sys.executable, str(ROOT / "tools" / "make_tiny_model.py"), "--arch", "qwen2", "--out", str(out), "--quantize", "4",
                    "--hidden", "64", "--layers", "2", "--heads", "2", "--kv-heads", "1", "--vocab", str(MODEL_VOCAB), "--untied",
                    "--seed", str(seed)], check=True, capture_output=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1024, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=special,
                                  show_progress=False)
    corpus = [p.read_text() for p in sorted((ROOT / "tests" / "data" / "json_schemas").glob("*.json"))]
    tok.train_from_iterator(corpus, trainer)
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in plain])
    tok.save(str(out / "tokenizer.json"))
    config = {"bos_token": bos, "eos_token": eos}
    if template:
        config["chat_template"] = (TEMPLATES / template).read_text()
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    cfg = json.loads((out / "config.json").read_text())
    cfg["eos_token_id"] = tok.token_to_id(eos)
    cfg["bos_token_id"] = tok.token_to_id(bos) if bos else None
    (out / "config.json").write_text(json.dumps(cfg))
    return out


def token_id(model: Path, text: str) -> int:
    """The id of one token of the model's tokenizer (a whole added token, or a single character)."""
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(model / "tokenizer.json"))
    ids = tok.encode(text, add_special_tokens=False).ids
    assert len(ids) == 1, (text, ids)
    return ids[0]
