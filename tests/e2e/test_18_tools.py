"""Phase tools: tool definitions, calls and results reach the prompt exactly as transformers renders them
(proved by usage.prompt_tokens), constrained choices answer with a call, unsupported fields are 400s that name the field, and
every request field of the OpenAI chat-completions and completions APIs is either honoured or refused by name.

The tiny model serves the real Qwen3 tokenizer and chat template (Hermes-style <tool_call>); its random weights
emit no calls, so the parsing of calls is shown below HTTP in tests/unit/server_tool_sink_test.cc.
"""
import copy
import json

import openai
import pytest

import server_harness as sh
from server_harness import MODEL

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"]}, "city": {"type": "string"}},
                   "required": ["city"]}}}
USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": "{\"unit\": \"c\", \"city\": \"Paris\"}"}}]}
RESULT = {"role": "tool", "tool_call_id": "call_abc", "content": "18 degrees"}


def hf_prompt_tokens(vocab, messages, tools):
    """Tokens of transformers' rendering (add_generation_prompt=True) of the conversation as vLLM shapes it."""
    from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template
    messages = copy.deepcopy(messages)
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            m["content"] = m.get("content") or ""
            for c in m["tool_calls"]:
                c["function"]["arguments"] = json.loads(c["function"]["arguments"] or "{}")
    out, _ = render_jinja_template(conversations=[_normalize_chat_messages(messages)], tools=tools, chat_template=vocab.template,
                                   add_generation_prompt=True)
    return len(vocab.encode(out[0]))


def create(client, **kw):
    kw.setdefault("model", MODEL)
    kw.setdefault("max_tokens", 1)
    kw.setdefault("temperature", 0)
    return client.chat.completions.create(**kw)


def test_tools_reach_the_prompt_as_transformers_renders_them(client, tiny_vocab):
    r = create(client, messages=[USER], tools=[WEATHER])
    assert r.usage.prompt_tokens == hf_prompt_tokens(tiny_vocab, [USER], [WEATHER])
    assert r.usage.prompt_tokens > create(client, messages=[USER]).usage.prompt_tokens


def test_a_call_and_its_result_reach_the_prompt_with_arguments_as_a_mapping(client, tiny_vocab):
    messages = [USER, CALL, RESULT]
    r = create(client, messages=messages, tools=[WEATHER])
    assert r.usage.prompt_tokens == hf_prompt_tokens(tiny_vocab, messages, [WEATHER])


def test_tool_choice_none_offers_no_tools(client, tiny_vocab):
    r = create(client, messages=[USER], tools=[WEATHER], tool_choice="none")
    assert r.usage.prompt_tokens == hf_prompt_tokens(tiny_vocab, [USER], None)
    assert r.choices[0].message.tool_calls is None


def test_auto_and_parallel_tool_calls_are_accepted_in_both_stream_modes(client):
    r = create(client, messages=[USER], tools=[WEATHER], tool_choice="auto", parallel_tool_calls=False, max_tokens=8)
    assert r.choices[0].finish_reason in ("stop", "length")  # random weights: no call is expected
    chunks = list(create(client, messages=[USER], tools=[WEATHER], max_tokens=8, stream=True))
    assert chunks[-1].choices[0].finish_reason in ("stop", "length")


@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
def test_constrained_tool_choice_answers_with_a_call(client, choice):
    # The grammar (tests/e2e/test_19_tool_choice.py covers every format) makes even random weights call the tool.
    r = create(client, messages=[USER], tools=[WEATHER], tool_choice=choice, max_tokens=200, temperature=1.0, seed=1,
               extra_body={"chat_template_kwargs": {"enable_thinking": False}})
    if r.choices[0].finish_reason != "length":
        assert r.choices[0].finish_reason == "tool_calls"
        assert r.choices[0].message.tool_calls[0].function.name == "get_weather"


def test_malformed_tools_and_calls_are_400s_naming_the_path(client):
    with pytest.raises(openai.BadRequestError) as e:
        create(client, messages=[USER], tools=[{"type": "function", "function": {"name": "get weather"}}])
    assert e.value.body["param"] == "tools[0].function.name"
    bad = copy.deepcopy(CALL)
    bad["tool_calls"][0]["function"]["arguments"] = "{not json"
    with pytest.raises(openai.BadRequestError) as e:
        create(client, messages=[USER, bad, RESULT], tools=[WEATHER])
    assert e.value.body["param"] == "messages[1].tool_calls[0].function.arguments"


# Every request field of the installed SDK's chat-completions API: a value and whether it is honoured
# (200) or refused (400 naming it). Fields the SDK adds later fail the coverage test until decided here.
CHAT_FIELDS = {
    "messages": ([USER], 200), "model": (MODEL, 200), "frequency_penalty": (0.5, 200), "presence_penalty": (0.5, 200),
    "logprobs": (True, 200), "top_logprobs": (2, 200), "max_tokens": (1, 200), "max_completion_tokens": (1, 200), "n": (2, 200),
    "seed": (3, 200), "stop": (["zz"], 200), "stream_options": (None, 200), "temperature": (0.5, 200), "top_p": (0.9, 200),
    "tools": ([WEATHER], 200), "tool_choice": ("auto", 200), "parallel_tool_calls": (True, 200),
    "reasoning_effort": ("low", 400),  # Qwen3's template reads no reasoning_effort: refused, not dropped
    "response_format": ({"type": "text"}, 200), "user": ("u-1", 200), "safety_identifier": ("s-1", 200),
    "metadata": ({"k": "v"}, 200), "store": (False, 200), "service_tier": ("auto", 200), "prompt_cache_key": ("k", 200),
    "prompt_cache_retention": ("in_memory", 200), "prompt_cache_options": ({"ttl": "30m"}, 200), "modalities": (["text"], 200),
    "logit_bias": ({"42": 5}, 200), "audio": ({"voice": "alloy", "format": "wav"}, 400), "function_call": ("auto", 400),
    "functions": ([{"name": "f"}], 400), "prediction": ({"type": "content", "content": "x"}, 400), "verbosity": ("low", 400),
    "web_search_options": ({}, 400), "moderation": ({}, 400),
}
# Values that the same fields refuse: features a harmless field does not have here.
# Fields that only work beside another.
CHAT_COMPANIONS = {"top_logprobs": {"logprobs": True}, "tool_choice": {"tools": [WEATHER]}, "parallel_tool_calls": {"tools": [WEATHER]}}
CHAT_REFUSED_VALUES = {"store": True, "modalities": ["text", "audio"], "service_tier": "flex",
                       "response_format": "json", "tool_choice": "sometimes", "logit_bias": {"not-an-id": 1}}
COMPLETION_FIELDS = {
    "prompt": ("hi", 200), "model": (MODEL, 200), "frequency_penalty": (0.5, 200), "presence_penalty": (0.5, 200), "logprobs": (1, 200),
    "max_tokens": (1, 200), "n": (1, 200), "seed": (1, 200), "stop": ("zz", 200), "stream_options": (None, 200),
    "temperature": (0.5, 200), "top_p": (0.9, 200), "user": ("u", 200), "echo": (False, 200), "best_of": (1, 200),
    "suffix": ("tail", 400), "logit_bias": ({"42": 5}, 200),
}


def sdk_fields(module):
    return set(module.CompletionCreateParamsBase.__annotations__)


def test_every_sdk_request_field_is_decided():
    from openai.types import completion_create_params
    from openai.types.chat import completion_create_params as chat_params
    assert sdk_fields(chat_params) <= set(CHAT_FIELDS), sdk_fields(chat_params) - set(CHAT_FIELDS)
    assert sdk_fields(completion_create_params) <= set(COMPLETION_FIELDS), sdk_fields(completion_create_params) - set(COMPLETION_FIELDS)


def post(server, path, body):
    code, _, raw = sh.request(server.port, "POST", path, json.dumps(body).encode())
    return code, json.loads(raw)


@pytest.mark.parametrize("field", sorted(CHAT_FIELDS))
def test_chat_field_is_honoured_or_refused_by_name(server, field):
    value, status = CHAT_FIELDS[field]
    body = {"model": MODEL, "messages": [USER], "max_tokens": 1, **CHAT_COMPANIONS.get(field, {}), field: value}
    code, out = post(server, "/v1/chat/completions", body)
    assert code == status, out
    if status == 400:
        assert out["error"]["param"] == field
    if field in CHAT_REFUSED_VALUES:
        body[field] = CHAT_REFUSED_VALUES[field]
        code, out = post(server, "/v1/chat/completions", body)
        assert code == 400 and out["error"]["param"] == field, out


@pytest.mark.parametrize("field", sorted(COMPLETION_FIELDS))
def test_completion_field_is_honoured_or_refused_by_name(server, field):
    value, status = COMPLETION_FIELDS[field]
    code, out = post(server, "/v1/completions", {"model": MODEL, "prompt": "hi", "max_tokens": 1, field: value})
    assert code == status, out
    if status == 400:
        assert out["error"]["param"] == field


def test_unknown_fields_are_refused_by_name(client):
    for endpoint in ("chat", "completions"):
        with pytest.raises(openai.BadRequestError) as e:
            if endpoint == "chat":
                create(client, messages=[USER], extra_body={"some_future_field": 1})
            else:
                client.completions.create(model=MODEL, prompt="hi", max_tokens=1, extra_body={"some_future_field": 1})
        assert e.value.body["param"] == "some_future_field"
