"""Phase non-stream: whole responses with OpenAI's shapes, sampling parameters, stop strings,
n, logprobs and the completions endpoint."""
import server_harness as sh
from server_harness import MODEL

MSG = [{"role": "user", "content": "Tell me a story about a fox."}]


def chat(client, **kw):
    args = {"model": MODEL, "messages": MSG, "temperature": 0, "max_tokens": 12}
    args.update(kw)
    return client.chat.completions.create(**args)


def test_chat_completion_shape(client):
    r = chat(client)
    assert r.id.startswith("chatcmpl-") and r.object == "chat.completion"
    assert r.created > 0 and r.model == MODEL and r.system_fingerprint
    assert len(r.choices) == 1
    c = r.choices[0]
    assert c.index == 0 and c.message.role == "assistant" and isinstance(c.message.content, str)
    assert c.finish_reason in ("stop", "length")
    assert r.usage.prompt_tokens > 0
    assert r.usage.total_tokens == r.usage.prompt_tokens + r.usage.completion_tokens


def test_max_tokens_gives_finish_reason_length(client):
    r = chat(client, max_tokens=5, extra_body={"ignore_eos": True})
    assert r.choices[0].finish_reason == "length"
    assert r.usage.completion_tokens == 5


def test_max_completion_tokens_is_honoured(client):
    r = client.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_completion_tokens=4,
                                       extra_body={"ignore_eos": True})
    assert r.usage.completion_tokens == 4


def test_temperature_zero_is_deterministic(client):
    assert chat(client).choices[0].message.content == chat(client).choices[0].message.content


def test_seeded_sampling_is_reproducible(client):
    a = chat(client, temperature=1.0, top_p=0.9, seed=1234, max_tokens=16, extra_body={"top_k": 50})
    b = chat(client, temperature=1.0, top_p=0.9, seed=1234, max_tokens=16, extra_body={"top_k": 50})
    assert a.choices[0].message.content == b.choices[0].message.content


def test_all_sampling_parameters_are_accepted(client):
    r = chat(client, temperature=0.7, top_p=0.8, seed=7, presence_penalty=0.5, frequency_penalty=0.3,
             extra_body={"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1})
    assert r.choices[0].finish_reason in ("stop", "length")


def test_n_gives_several_choices(client):
    r = chat(client, n=3, temperature=1.0, seed=5, max_tokens=6)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert r.usage.completion_tokens == sum(1 for _ in r.choices) * 6 or r.usage.completion_tokens <= 18


def test_logprobs_and_top_logprobs(client):
    r = chat(client, logprobs=True, top_logprobs=3, max_tokens=4, extra_body={"ignore_eos": True})
    content = r.choices[0].logprobs.content
    assert len(content) == 4
    for entry in content:
        assert entry.logprob <= 0.0 and len(entry.top_logprobs) == 3
        # Greedy: the chosen token is the most likely one.
        assert abs(entry.top_logprobs[0].logprob - entry.logprob) < 1e-4
        assert "".join(chr(b) for b in entry.bytes) is not None


def test_stop_string_ends_output_and_is_not_emitted(client):
    full = chat(client, max_tokens=24, extra_body={"ignore_eos": True}).choices[0].message.content
    assert len(full) >= 6, full
    stop = full[len(full) // 2:len(full) // 2 + 3]
    r = chat(client, max_tokens=24, stop=[stop], extra_body={"ignore_eos": True})
    text = r.choices[0].message.content
    assert r.choices[0].finish_reason == "stop"
    assert stop not in text
    assert text == full[:full.find(stop)]


def test_unknown_fields_are_ignored(client):
    r = chat(client, extra_body={"some_future_field": {"x": 1}, "user": "u-1"})
    assert r.choices[0].message.content is not None


def test_enable_thinking_kwarg_is_accepted(client):
    r = chat(client, extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    assert r.choices[0].finish_reason in ("stop", "length")


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


def test_completions_logprobs(client):
    r = client.completions.create(model=MODEL, prompt="Hello", max_tokens=3, temperature=0, logprobs=2,
                                  extra_body={"ignore_eos": True})
    lp = r.choices[0].logprobs
    assert len(lp.tokens) == 3 and len(lp.token_logprobs) == 3 and len(lp.top_logprobs[0]) == 2


def test_prompt_longer_than_context_is_400(server):
    status, _, body = sh.post_json(server.port, "/v1/completions",
                                   {"model": MODEL, "prompt": list(range(1, 4000)), "max_tokens": 500})
    assert status == 400 and body["error"]["code"] == "context_length_exceeded"
