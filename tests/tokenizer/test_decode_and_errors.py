"""Decode parity with HF, streaming-detokenizer properties, and clear errors on bad input."""
import gzip
import json
import os
import random
import shutil
import subprocess

import pytest

import corpus
from conftest import NAMES, TOKENIZERS, hf_tokenizer, run_jsonl, sanctum_bin


def sample_ids(hf, n, seed):
    rng = random.Random(seed)
    texts = corpus.build([], seed=seed, n_random=n, n_mix=n, with_big_word=False)
    ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=True)]
    vocab = hf.get_vocab_size()
    ids += [[rng.randrange(vocab) for _ in range(rng.randint(1, 30))] for _ in range(n)]  # arbitrary sequences
    return ids


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("skip_special", [False, True])
def test_decode_matches_hf(name, skip_special):
    hf = hf_tokenizer(name)
    ids = sample_ids(hf, 300, 7)
    args = ["detokenize", "--tokenizer", str(TOKENIZERS / name)] + (["--skip-special"] if skip_special else [])
    ours = run_jsonl(args, ids)
    expected = hf.decode_batch(ids, skip_special_tokens=skip_special)
    bad = [(i, o, e) for i, o, e in zip(ids, ours, expected) if o != e]
    print(f"{name} decode skip_special={skip_special}: {len(ids)} cases, {len(bad)} mismatches")
    for i, o, e in bad[:3]:
        print(f"  ids {i[:20]}\n   ours {o!r}\n   hf   {e!r}")
    assert not bad


@pytest.mark.parametrize("name", NAMES)
def test_streaming_concatenation_equals_full_decode(name):
    hf = hf_tokenizer(name)
    texts = corpus.build([], seed=11, n_random=200, n_mix=200, with_big_word=False)
    ids = [e.ids for e in hf.encode_batch(texts, add_special_tokens=False)]
    pieces = run_jsonl(["detokenize", "--tokenizer", str(TOKENIZERS / name), "--stream"], ids)
    full = run_jsonl(["detokenize", "--tokenizer", str(TOKENIZERS / name)], ids)
    for seq, p, f, text in zip(ids, pieces, full, texts):
        assert len(p) == len(seq) + 1
        assert "".join(p) == f, (text, p)
        for piece in p:  # every emitted piece is whole code points (JSON round trip would have failed otherwise)
            assert "\ufffd" not in piece or "\ufffd" in f


def run(args, stdin=b""):
    return subprocess.run([sanctum_bin()] + args, input=stdin, capture_output=True, timeout=120)


def test_invalid_utf8_is_a_clear_error():
    p = run(["tokenize", "--tokenizer", str(TOKENIZERS / "qwen3")], b"abc\xff\xfe")
    assert p.returncode != 0 and b"not valid UTF-8" in p.stderr and b"offset 3" in p.stderr


def test_lone_surrogate_is_a_clear_error():
    p = run(["tokenize", "--tokenizer", str(TOKENIZERS / "qwen3")], b"a\xed\xa0\x80b")  # U+D800 in UTF-8 form
    assert p.returncode != 0 and b"not valid UTF-8" in p.stderr
    p = run(["tokenize", "--tokenizer", str(TOKENIZERS / "qwen3"), "--jsonl"], b'"ok"\n"\\ud800"\n"fine"\n')
    lines = [json.loads(l) for l in p.stdout.decode().split("\n") if l]
    assert p.returncode == 1 and len(lines) == 3
    assert isinstance(lines[0], list) and "error" in lines[1] and isinstance(lines[2], list)


@pytest.mark.parametrize("damage", ["truncated", "not_json", "no_model", "bad_merge", "bad_type", "empty"])
def test_malformed_tokenizer_json_is_a_clear_error(tmp_path, damage):
    with gzip.open(TOKENIZERS / "qwen3" / "tokenizer.json.gz", "rt", encoding="utf-8") as f:
        text = f.read()
    if damage == "truncated":
        text = text[: len(text) // 2]
    elif damage == "not_json":
        text = "this is not json"
    elif damage == "empty":
        text = ""
    else:
        j = json.loads(text)
        if damage == "no_model":
            del j["model"]
        elif damage == "bad_merge":
            j["model"]["merges"].insert(0, ["nosuchtoken", "another"])
        elif damage == "bad_type":
            j["pre_tokenizer"] = {"type": "NoSuchPreTokenizer"}
        text = json.dumps(j)
    (tmp_path / "tokenizer.json").write_text(text)
    p = run(["tokenize", "--tokenizer", str(tmp_path)], b"hello")
    assert p.returncode != 0
    err = p.stderr.decode()
    assert err.startswith("sanctum tokenize: error: tokenizer.json"), err
    assert len(err.splitlines()) == 1


def test_corrupt_gzip_is_a_clear_error(tmp_path):
    raw = (TOKENIZERS / "qwen3" / "tokenizer.json.gz").read_bytes()
    (tmp_path / "tokenizer.json.gz").write_bytes(raw[: len(raw) // 3])
    p = run(["tokenize", "--tokenizer", str(tmp_path)], b"hello")
    assert p.returncode != 0 and b"error" in p.stderr


def test_missing_tokenizer_dir():
    p = run(["tokenize", "--tokenizer", "/nonexistent/dir"], b"x")
    assert p.returncode != 0 and b"no tokenizer.json" in p.stderr


def test_ids_round_trip_through_cli():
    p = run(["tokenize", "--tokenizer", str(TOKENIZERS / "llama3_1")], "Hello, world! 你好".encode())
    assert p.returncode == 0
    q = run(["detokenize", "--tokenizer", str(TOKENIZERS / "llama3_1"), "--skip-special"], p.stdout)
    assert q.returncode == 0 and q.stdout.decode() == "Hello, world! 你好"
