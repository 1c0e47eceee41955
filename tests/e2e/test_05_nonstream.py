"""Phase non-stream: whole responses with OpenAI's shapes, sampling parameters, stop strings,
n, logprobs and the completions endpoint. What a parameter does is checked against the model's own
logits and a reference tokenizer and template (reference.py), not against an earlier answer."""
import numpy as np
import pytest

import reference as ref
import server_harness as sh
from server_harness import MODEL

MSG = [{"role": "user", "content": "Tell me a story about a fox."}]


def chat(client, **kw):
    args = {"model": MODEL, "messages": MSG, "temperature": 0, "max_tokens": 12}
    args.update(kw)
    return client.chat.completions.create(**args)


def test_chat_completion_shape(client, tiny_vocab):
    r = chat(client)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion"
    assert r.created > 0 and r.model == MODEL and r.system_fingerprint
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.index == 0 and c.message.role == "assistant" and isinstance(c.message.content, str)
    assert c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens == len(tiny_vocab.chat_prompt(MSG))
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_max_tokens_gives_finish_reason_length(client):
    r = chat(client, max_tokens=5, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5


def test_max_completion_tokens_is_honoured(client):
    r = client.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_completion_tokens=4,
                                       extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 4


def test_n_gives_several_choices(client):
    r = chat(client, n=3, temperature=1.0, seed=5, max_tokens=6, logprobs=True, extra_body={"ignore_eos": True})
    assert [c.index for c in r.choices] == [0, 1, 2]
    lengths = [len(c.logprobs.content) for c in r.choices]
    assert lengths == [6, 6, 6] and all(c.finish_reason == "length" for c in r.choices)
    assert r.usage.completion_tokens == sum(lengths)


def test_n_at_temperature_zero_repeats_the_single_answer(client):
    one = chat(client, max_tokens=5, extra_body={"ignore_eos": True})
    three = chat(client, n=3, max_tokens=5, extra_body={"ignore_eos": True})
    assert [c.message.content for c in three.choices] == [one.choices[0].message.content] * 3
    assert three.usage.completion_tokens == 3 * one.usage.completion_tokens == 15
    assert three.usage.prompt_tokens == one.usage.prompt_tokens


def test_logprobs_and_top_logprobs(client, sanctum_bin, tiny_model, tiny_vocab, tmp_path):
    r = chat(client, logprobs=True, top_logprobs=5, max_tokens=6, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == r.usage.completion_tokens == 6
    assert b"".join(bytes(e.bytes) for e in content).decode() == r.choices[0].message.content
    prompt = tiny_vocab.chat_prompt(MSG)
    ids = tiny_vocab.ids_of(content)
    rows = ref.step_logits(sanctum_bin, tiny_model, prompt, ids, tmp_path / "logits.npy")
    for k, (entry, token, row) in enumerate(zip(content, ids, rows)):
        expected = ref.log_softmax(row)
        assert entry.token == tiny_vocab.decode([token])
        assert abs(entry.logprob - expected[token]) < 1e-3, k
        assert token == int(np.argmax(row)), k  # greedy: the most likely token
        top = [(tiny_vocab.id_of(bytes(t.bytes)), t.logprob) for t in entry.top_logprobs]
        assert top[0][0] == token and top[0][1] == entry.logprob
        assert [lp for _, lp in top] == sorted((lp for _, lp in top), reverse=True)
        best = np.sort(expected)[::-1][:5]
        assert np.allclose([lp for _, lp in top], best, atol=1e-3), k
        assert all(abs(lp - expected[i]) < 1e-3 for i, lp in top), k


def test_stop_string_ends_output_and_is_not_emitted(client):
    full = chat(client, max_tokens=24, extra_body={"ignore_eos": True}).choices[0].message.content
    assert len(full) >= 6, full
    stop = full[len(full) // 2:len(full) // 2 + 3]
    r = chat(client, max_tokens=24, stop=[stop], extra_body={"ignore_eos": True})
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert stop not in text
    assert text == full[:full.find(stop)]


def test_harmless_fields_change_nothing(client):
    # Unknown fields are refused by name (test_18_tools.py); harmless ones like `user` are accepted.
    plain = chat(client)
    r = chat(client, extra_body={"user": "u-1", "store": False, "metadata": {"k": "v"}})
    assert r.choices[0].message.content == plain.choices[0].message.content
    assert r.usage == plain.usage


def test_enable_thinking_false_renders_an_empty_think_block(client, tiny_vocab):
    # Qwen3's template appends "<think>\n\n</think>\n\n" to the generation prompt for false only.
    off = chat(client, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    on = chat(client, extra_body={"chat_template_kwargs": {"enable_thinking": True}})
    plain = chat(client)
    assert off.usage.prompt_tokens == len(tiny_vocab.chat_prompt(MSG, enable_thinking=False))
    assert on.usage.prompt_tokens == plain.usage.prompt_tokens == len(tiny_vocab.chat_prompt(MSG))
    assert off.usage.prompt_tokens == plain.usage.prompt_tokens + 4


def test_completions_with_a_text_prompt(client):
    r = client.completions.create(model=MODEL, prompt="Once upon a time", max_tokens=6, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.object == "text_completion" and r.id.startswith("cmpl-")
    assert r.choices[0].finish_reason == "length" and isinstance(r.choices[0].text, str)
    assert r.usage.completion_tokens == 6


def test_completions_with_token_ids(client):
    r = client.completions.create(model=MODEL, prompt=[1, 2, 3, 4], max_tokens=3, temperature=0,
                                  extra_body={"ignore_eos": True})
    assert r.usage.prompt_tokens == 4 and r.usage.completion_tokens == 3


def test_completions_logprobs(client, sanctum_bin, tiny_model, tiny_vocab, tmp_path):
    prompt = tiny_vocab.encode("Once upon a time")
    r = client.completions.create(model=MODEL, prompt=prompt, max_tokens=4, temperature=0, logprobs=2,
                                  extra_body={"ignore_eos": True})
    c, lp = r.choices[0], r.choices[0].logprobs
    assert len(lp.tokens) == len(lp.token_logprobs) == len(lp.top_logprobs) == r.usage.completion_tokens == 4
    assert "".join(lp.tokens) == c.text
    assert lp.text_offset == [len("".join(lp.tokens[:i])) for i in range(4)]
    ids = [tiny_vocab.id_of(t.encode()) for t in lp.tokens]
    rows = ref.step_logits(sanctum_bin, tiny_model, prompt, ids, tmp_path / "logits.npy")
    for k, (token, row) in enumerate(zip(ids, rows)):
        expected = ref.log_softmax(row)
        assert token == int(np.argmax(row)), k
        assert abs(lp.token_logprobs[k] - expected[token]) < 1e-3, k
        best = {tiny_vocab.decode([int(i)]): expected[i] for i in np.argsort(-expected, kind="stable")[:2]}
        assert lp.top_logprobs[k] == pytest.approx(best, abs=1e-3), k


def test_prompt_longer_than_context_is_400(server):
    status, _, body = sh.post_json(server.port, "/v1/completions",
                                   {"model": MODEL, "prompt": list(range(1, 4000)), "max_tokens": 500})
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
