"""Sampling parameters and logprobs through the server, on the embedded default model, checked
against the model's raw logits at every answer step (`sanctum logits`, the model alone, fed the
prompt and the answer so far) and the parameters' formulas applied to them in numpy (reference.py):
logprobs are each step's log-softmax, also for tokens that prompt lookup drafted; temperature 0
picks the argmax; penalties pick what their formula picks and change how much an answer repeats;
top-k, min-p and top-p keep what they allow; a seed gives one sample; n gives samples of their own."""
import numpy as np
import pytest

import reference as ref
import server_harness as sh

NAME = "default"
REPEAT = [{"role": "user", "content": "Repeat the word cabin 8 times."}]  # prompt lookup drafts the repeats
STORY = [{"role": "user", "content": "Tell me a story about a fox."}]  # beyond what it knows: many likely tokens
TOKENS = 24
# The server picks from one-token steps and from prompt-lookup verification batches: their logits
# and those of `sanctum logits` may differ in the last bits.
TIE = 1e-3


def ask(server, vocab, messages, **body):
    """The whole response of a TOKENS-token answer with logprobs (ignore_eos keeps every token visible)."""
    status, _, r = sh.post_json(server.port, "/v1/chat/completions",
                                {"model": NAME, "messages": messages, "temperature": 0, "max_tokens": TOKENS,
                                 "logprobs": True, "ignore_eos": True, **body})
    assert status == 200, r
    assert r["usage"]["prompt_tokens"] == len(vocab.chat_prompt(messages))
    return r


def answer_ids(vocab, choice):
    return [vocab.id_of(bytes(e["bytes"])) for e in choice["logprobs"]["content"]]


def rows_of(sanctum_bin, tmp_path, vocab, messages, ids):
    return ref.step_logits(sanctum_bin, sh.DEFAULT_MODEL, vocab.chat_prompt(messages), ids, tmp_path / "logits.npy")


def accepted_drafts(server):
    _, _, body = sh.request(server.port, "GET", "/metrics")
    return sh.metric_value(body.decode(), "sanctum_mlx_pld_accepted_tokens_total")


def test_logprobs_are_each_steps_own_also_for_drafted_tokens(default_server, default_vocab, sanctum_bin, tmp_path):
    before = accepted_drafts(default_server)
    r = ask(default_server, default_vocab, REPEAT, top_logprobs=5)
    assert accepted_drafts(default_server) > before  # prompt lookup drafted some of the repeats
    content = r["choices"][0]["logprobs"]["content"]
    ids = answer_ids(default_vocab, r["choices"][0])
    assert len(ids) == r["usage"]["completion_tokens"] == TOKENS
    rows = rows_of(sanctum_bin, tmp_path, default_vocab, REPEAT, ids)
    for k, (entry, token, row) in enumerate(zip(content, ids, rows)):
        expected = ref.log_softmax(row)
        assert token == int(np.argmax(row)), k
        assert abs(entry["logprob"] - expected[token]) < TIE, (k, entry["logprob"], expected[token])
        top = [(default_vocab.id_of(bytes(t["bytes"])), t["logprob"]) for t in entry["top_logprobs"]]
        assert top[0] == (token, entry["logprob"]), k
        assert np.allclose([lp for _, lp in top], np.sort(expected)[::-1][:5], atol=TIE), k
        assert all(abs(lp - expected[i]) < TIE for i, lp in top), k


def test_temperature_zero_picks_the_argmax_at_every_step(default_server, default_vocab, sanctum_bin, tmp_path):
    ids = answer_ids(default_vocab, ask(default_server, default_vocab, STORY)["choices"][0])
    for k, (row, token) in enumerate(zip(rows_of(sanctum_bin, tmp_path, default_vocab, STORY, ids), ids)):
        assert row[token] >= row.max() - TIE, f"step {k}: picked {default_vocab.decode([token])!r}"


def check_greedy_picks(vocab, rows, prompt, ids, **formula):
    """Each token is the argmax after the penalty; returns the steps where it is not the raw argmax."""
    moved = 0
    for k, (row, token) in enumerate(zip(rows, ids)):
        scores = ref.penalized(row, prompt + ids[:k], **formula)
        best = int(np.argmax(scores))
        assert scores[token] >= scores[best] - TIE, \
            f"step {k}: picked {vocab.decode([token])!r}, the formula picks {vocab.decode([best])!r} ({formula})"
        moved += token != int(np.argmax(row))
    return moved


@pytest.mark.parametrize("penalties,repeats", [
    ({"presence_penalty": 1.5}, "fewer"),
    ({"frequency_penalty": 1.0}, "fewer"),
    ({"repetition_penalty": 1.8}, "fewer"),
    ({"presence_penalty": 0.4, "frequency_penalty": 0.3, "repetition_penalty": 1.2}, "fewer"),
    ({"frequency_penalty": -1.0}, "more"),
], ids=["presence", "frequency", "repetition", "all-three", "negative-frequency"])
def test_each_token_is_the_argmax_after_the_penalty(default_server, default_vocab, sanctum_bin, tmp_path, penalties,
                                                    repeats):
    # The plain greedy answer to STORY repeats many of its tokens, and its runner-up tokens are often
    # close enough for a penalty of 1 or 2 to overtake.
    plain = answer_ids(default_vocab, ask(default_server, default_vocab, STORY)["choices"][0])
    ids = answer_ids(default_vocab, ask(default_server, default_vocab, STORY, **penalties)["choices"][0])
    assert len(ids) == TOKENS
    rows = rows_of(sanctum_bin, tmp_path, default_vocab, STORY, ids)
    moved = check_greedy_picks(default_vocab, rows, default_vocab.chat_prompt(STORY), ids,
                               presence=penalties.get("presence_penalty", 0.0),
                               frequency=penalties.get("frequency_penalty", 0.0),
                               repetition=penalties.get("repetition_penalty", 1.0))
    assert moved > 0  # the penalty overruled the raw argmax somewhere: the check saw it act
    assert ids != plain
    shown = (default_vocab.decode(ids), default_vocab.decode(plain))
    if repeats == "fewer":
        assert ref.repeats(ids) < ref.repeats(plain), shown
    else:
        assert ref.repeats(ids) > ref.repeats(plain), shown


@pytest.mark.parametrize("filters", [
    {"top_k": 4},
    {"min_p": 0.2},
    {"top_p": 0.6},
    {"top_k": 8, "min_p": 0.05, "top_p": 0.8},
], ids=["top_k", "min_p", "top_p", "all-three"])
def test_sampled_tokens_lie_in_what_the_filters_keep(default_server, default_vocab, sanctum_bin, tmp_path, filters):
    temperature = 1.5
    r = ask(default_server, default_vocab, STORY, temperature=temperature, seed=7, **filters)
    ids = answer_ids(default_vocab, r["choices"][0])
    removed = 0.0  # probability the filters took away, summed over the steps
    for k, (row, token) in enumerate(zip(rows_of(sanctum_bin, tmp_path, default_vocab, STORY, ids), ids)):
        kept = ref.sampling_filter(row, temperature, filters.get("top_k", 0), filters.get("top_p", 1.0),
                                   filters.get("min_p", 0.0))
        assert token in kept, \
            f"step {k}: sampled {default_vocab.decode([token])!r}, outside {default_vocab.decode(sorted(kept))!r}"
        removed += 1.0 - np.exp(ref.log_softmax(row / temperature))[sorted(kept)].sum()
    assert removed >= 1.0, removed  # unfiltered, about one token or more would have come from outside


def test_a_seed_gives_one_sample_and_another_seed_another(default_server, default_vocab):
    a, b, c = (ask(default_server, default_vocab, STORY, temperature=1.0, seed=seed, top_k=50,
                   top_p=0.9)["choices"][0]["message"]["content"] for seed in (1234, 1234, 4321))
    assert a == b
    assert a != c


def test_n_choices_are_samples_of_their_own(default_server, default_vocab):
    r = ask(default_server, default_vocab, STORY, n=3, temperature=1.0, seed=5)
    assert [c["index"] for c in r["choices"]] == [0, 1, 2]
    lengths = [len(c["logprobs"]["content"]) for c in r["choices"]]
    assert lengths == [TOKENS] * 3 and r["usage"]["completion_tokens"] == 3 * TOKENS
    assert len({c["message"]["content"] for c in r["choices"]}) == 3
