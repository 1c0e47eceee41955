"""Peer comparison for the grammar engine: llguidance on the same vocabulary and the same walked
token paths that bench/grammar/grammar_bench.cc dumped (--dump DIR).

For each schema it replays our path through llguidance's matcher, times its mask at every step, and
at every 8th step compares masks: tokens we allow that llguidance refuses (our output is meant to be
a subset of the schema's language, so any such token is a finding) and tokens it allows that we do
not (expected: our property order, bounded whitespace and number subsets).

  python -m venv .venv-peers && .venv-peers/bin/pip install -r bench/grammar/requirements-peers.txt
  build/grammar_bench --tokenizer tests/data/tokenizers/qwen3 --schemas tests/data/json_schemas \\
      --vocab-size 248320 --dump /tmp/gdump
  .venv-peers/bin/python bench/grammar/peers.py --dump /tmp/gdump --schemas tests/data/json_schemas
"""
import argparse
import json
import statistics
import struct
import time
from pathlib import Path

import llguidance
from llguidance import LLMatcher, LLTokenizer
from llguidance._tokenizer import TokenizerWrapper


class Vocab:
    """The dumped vocabulary as llguidance's tokenizer wrapper wants it."""

    def __init__(self, dump: Path):
        lines = (dump / "vocab.hex").read_text().splitlines()
        meta = json.loads((dump / "meta.json").read_text())
        self.special_token_ids = [i for i, h in enumerate(lines) if not h]
        self.tokens = [bytes.fromhex(h) if h else f"<|special_{i}|>".encode() for i, h in enumerate(lines)]
        self.eos_token_id = meta["eos_ids"][0]
        self.bos_token_id = None
        self._longest = max(len(t) for t in self.tokens)
        self._index = {}
        for i, t in enumerate(self.tokens):
            if i not in self.special_token_ids:
                self._index.setdefault(t, i)

    def __call__(self, text):
        data = text if isinstance(text, bytes) else text.encode()
        out, i = [], 0
        while i < len(data):
            for n in range(min(self._longest, len(data) - i), 0, -1):
                if data[i:i + n] in self._index:
                    out.append(self._index[data[i:i + n]])
                    i += n
                    break
            else:
                raise ValueError("byte not in vocabulary")
        return out


def words_to_bits(words, n):
    return int.from_bytes(struct.pack(f"<{len(words)}I", *words), "little") & ((1 << n) - 1)


def set_bits(v, limit):
    out, data = [], v.to_bytes((v.bit_length() + 7) // 8, "little")
    for i, byte in enumerate(data):
        for b in range(8):
            if byte >> b & 1:
                out.append(8 * i + b)
                if len(out) == limit:
                    return out
    return out


def summary(xs):
    if not xs:
        return None
    xs = sorted(xs)
    q = lambda p: xs[min(len(xs) - 1, int(p * len(xs)))]
    return {"n": len(xs), "p50": q(0.5), "p90": q(0.9), "p99": q(0.99), "max": xs[-1], "mean": statistics.fmean(xs)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dump", type=Path, required=True)
    ap.add_argument("--schemas", type=Path, required=True)
    ap.add_argument("--limit", type=int, default=10_000)
    args = ap.parse_args()
    vocab = Vocab(args.dump)
    n = len(vocab.tokens)
    t0 = time.perf_counter()
    tok = LLTokenizer(TokenizerWrapper(vocab), n_vocab=n)
    tokenizer_s = time.perf_counter() - t0
    compile_us, mask_us = [], []
    stats = {"schemas": 0, "peer_refused": 0, "diverged": 0, "compared_steps": 0, "steps_we_allow_more": 0,
             "tokens_we_allow_peer_refuses": 0, "steps_peer_allows_more": 0, "steps_with_unexplained_extra": 0}
    findings = []
    rows = [json.loads(l) for l in (args.dump / "paths.jsonl").read_text().splitlines()][: args.limit]
    for row in rows:
        stats["schemas"] += 1
        schema = json.loads((args.schemas / row["file"]).read_text())
        t0 = time.perf_counter()
        try:
            grammar = LLMatcher.grammar_from_json_schema(schema, defaults={"whitespace_flexible": True})
            m = LLMatcher(tok, grammar, log_level=0)
        except Exception:  # noqa: BLE001 - a schema the peer refuses
            stats["peer_refused"] += 1
            continue
        if m.is_error():
            stats["peer_refused"] += 1
            continue
        compile_us.append((time.perf_counter() - t0) * 1e6)
        prefix = ""
        for step, token in enumerate(row["path"]):
            t0 = time.perf_counter()
            theirs_bytes = m.compute_bitmask()
            mask_us.append((time.perf_counter() - t0) * 1e6)
            if str(step) in row["masks"]:
                ours = words_to_bits(row["masks"][str(step)], n)
                theirs = int.from_bytes(theirs_bytes, "little") & ((1 << n) - 1)
                stats["compared_steps"] += 1
                extra = ours & ~theirs
                if extra:
                    stats["steps_we_allow_more"] += 1
                    stats["tokens_we_allow_peer_refuses"] += extra.bit_count()
                    # Known policy differences: we allow raw DEL and the JSON escapes \/ and \uXXXX
                    # (any hex case) in strings, which llguidance does not generate.
                    other = [i for i in set_bits(extra, 1 << 30)
                             if not any(p in vocab.tokens[i] for p in (b"\x7f", b"\\/", b"\\u"))]
                    if other:
                        stats["steps_with_unexplained_extra"] += 1
                        if len(findings) < 20:
                            findings.append({"file": row["file"], "step": step, "prefix": prefix[-60:],
                                             "tokens": [vocab.tokens[i].decode(errors="replace") for i in other[:5]]})
                if theirs & ~ours:
                    stats["steps_peer_allows_more"] += 1
            if not m.consume_token(token):
                stats["diverged"] += 1
                if len(findings) < 20:
                    findings.append({"file": row["file"], "step": step, "prefix": prefix[-60:], "peer_refused_our_token":
                                     vocab.tokens[token].decode(errors="replace")})
                break
            prefix += vocab.tokens[token].decode(errors="replace")
    print(json.dumps({"peer": f"llguidance {llguidance.__version__ if hasattr(llguidance, '__version__') else ''}",
                      "vocab_size": n, "tokenizer_setup_s": tokenizer_s, "compile_us": summary(compile_us),
                      "mask_us": summary(mask_us), **stats, "findings": findings}, indent=2))


if __name__ == "__main__":
    main()
