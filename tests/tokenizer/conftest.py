import gzip
import json
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TOKENIZERS = ROOT / "tests" / "data" / "tokenizers"
NAMES = ["qwen3", "llama3_1", "deepseek_v3", "gemma3", "tekken_nemo_converted"]


def sanctum_bin():
    path = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    if not os.path.exists(path):
        pytest.skip(f"sanctum binary not found at {path} (set SANCTUM_BIN)")
    return path


def hf_tokenizer(name):
    from tokenizers import Tokenizer
    with gzip.open(TOKENIZERS / name / "tokenizer.json.gz", "rt", encoding="utf-8") as f:
        return Tokenizer.from_str(f.read())


def run_jsonl(args, lines, expect_ok=True):
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines).encode()
    p = subprocess.run([sanctum_bin()] + args + ["--jsonl"], input=data, capture_output=True, timeout=600)
    if expect_ok:
        assert p.returncode == 0, p.stderr.decode(errors="replace")
    out = [json.loads(l) for l in p.stdout.decode().split("\n") if l]
    assert len(out) == len(lines)
    return out
