"""Writes tests/data/tokenizers/tekken_nemo/tekken.json.gz (Mistral tekken format) from the converted
tokenizer.json of the same vocabulary, so the tekken loader can be checked against HF on the converted
file. Ranks: id - num_special; token_bytes: the byte-level alphabet decoded to raw bytes."""
import base64
import gzip
import json
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[2]
SRC = ROOT / "tests/data/tokenizers/tekken_nemo_converted/tokenizer.json.gz"
DST = ROOT / "tests/data/tokenizers/tekken_nemo/tekken.json.gz"


def byte_decoder():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(bs, cs)}


def main():
    with gzip.open(SRC, "rt", encoding="utf-8") as f:
        tj = json.load(f)
    dec = byte_decoder()
    specials = sorted(tj["added_tokens"], key=lambda t: t["id"])
    num_special = len(specials)
    vocab = []
    for token, i in tj["model"]["vocab"].items():
        if i < num_special:
            continue
        vocab.append({"rank": i - num_special, "token_bytes": base64.b64encode(bytes(dec[c] for c in token)).decode()})
    vocab.sort(key=lambda v: v["rank"])
    pattern = tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
    out = {"config": {"pattern": pattern, "num_vocab_tokens": len(vocab), "default_vocab_size": num_special + len(vocab),
                      "default_num_special_tokens": num_special, "version": "v3"},
           "vocab": vocab,
           "special_tokens": [{"rank": t["id"], "token_str": t["content"], "is_control": True} for t in specials]}
    DST.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(DST, "wt", encoding="utf-8") as f:
        json.dump(out, f, separators=(",", ":"))


if __name__ == "__main__":
    main()
