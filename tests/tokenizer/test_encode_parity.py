"""Encode parity with HF `tokenizers` on the real tokenizer files, over the corpus in corpus.py."""
import pytest

import corpus
from conftest import NAMES, TOKENIZERS, hf_tokenizer, run_jsonl


def specials_of(hf):
    return [t.content for t in hf.get_added_tokens_decoder().values()]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", ["default", "no_add_special", "no_parse_special"])
def test_encode_matches_hf(name, mode):
    hf = hf_tokenizer(name)
    cases = corpus.build(specials_of(hf), with_big_word=(mode == "default"))
    args = ["tokenize", "--tokenizer", str(TOKENIZERS / name)]
    add_special = mode != "no_add_special"
    if mode == "no_add_special":
        args.append("--no-add-special")
    if mode == "no_parse_special":
        args.append("--no-parse-special")
        hf.encode_special_tokens = True
    ours = run_jsonl(args, cases)
    expected = [e.ids for e in hf.encode_batch(cases, add_special_tokens=add_special)]
    mismatches = [(c, o, e) for c, o, e in zip(cases, ours, expected) if o != e]
    print(f"{name} [{mode}]: {len(cases)} cases, {len(mismatches)} mismatches")
    for c, o, e in mismatches[:5]:
        print(f"  case {c[:80]!r}\n   ours {o[:40]}\n   hf   {e[:40]}")
    assert not mismatches


@pytest.mark.parametrize("mode", ["default", "no_parse_special"])
def test_tekken_json_matches_hf_on_converted_file(mode):
    """tests/data/tokenizers/tekken_nemo holds the same vocabulary in Mistral's tekken.json format
    (written by make_tekken.py); loading it must give HF's ids on the converted tokenizer.json."""
    hf = hf_tokenizer("tekken_nemo_converted")
    cases = corpus.build(specials_of(hf), seed=99, with_big_word=(mode == "default"))
    args = ["tokenize", "--tokenizer", str(TOKENIZERS / "tekken_nemo")]
    if mode == "no_parse_special":
        args.append("--no-parse-special")
        hf.encode_special_tokens = True
    ours = run_jsonl(args, cases)
    expected = [e.ids for e in hf.encode_batch(cases, add_special_tokens=True)]
    mismatches = [(c, o, e) for c, o, e in zip(cases, ours, expected) if o != e]
    print(f"tekken.json [{mode}]: {len(cases)} cases, {len(mismatches)} mismatches")
    assert not mismatches
