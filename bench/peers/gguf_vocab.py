"""GGUF vocabulary metadata from a checkpoint's tokenizer.json (GPT-2 style byte-level BPE).

Ids past the tokenizer's last one (the embedding is padded to a round size) become unused
"[PADn]" tokens, as llama.cpp's own converter writes them, so the vocabulary matches the
embedding rows.
"""
from __future__ import annotations

import json
from pathlib import Path


def write(writer, model_dir: Path, vocab_size: int) -> None:
    import gguf

    path = Path(model_dir) / "tokenizer.json"
    if not path.exists():
        raise FileNotFoundError(f"{path}: llama.cpp needs a vocabulary; run bench/peers/checkpoints.py, which adds one")
    tok = json.loads(path.read_text())
    if tok["model"]["type"] != "BPE":
        raise ValueError(f"{path}: tokenizer model {tok['model']['type']}, only BPE converts")
    by_id: dict[int, tuple[str, int]] = {i: (t, gguf.TokenType.NORMAL) for t, i in tok["model"]["vocab"].items()}
    for added in tok.get("added_tokens", []):
        kind = gguf.TokenType.CONTROL if added["special"] else gguf.TokenType.USER_DEFINED
        by_id[added["id"]] = (added["content"], kind)
    if max(by_id) >= vocab_size:
        raise ValueError(f"{path}: token id {max(by_id)} does not fit the model's {vocab_size} embedding rows")
    tokens, types = [], []
    for i in range(vocab_size):
        text, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
        tokens.append(text)
        types.append(kind)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"]["merges"]]
    ids = {t: i for i, (t, _) in by_id.items()}

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("qwen2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    cfg_path = Path(model_dir) / "tokenizer_config.json"
    cfg = json.loads(cfg_path.read_text()) if cfg_path.exists() else {}
    for key, add in (("eos_token", writer.add_eos_token_id), ("pad_token", writer.add_pad_token_id),
                     ("bos_token", writer.add_bos_token_id)):
        if isinstance(cfg.get(key), str) and cfg[key] in ids:
            add(ids[cfg[key]])
    writer.add_add_bos_token(bool(cfg.get("add_bos_token", False)))
