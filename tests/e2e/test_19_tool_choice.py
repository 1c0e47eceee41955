"""tool_choice "required", a named function and strict tools through a live server, for each tool-call format: Qwen
XML (Qwen3.5's template), Hermes JSON (Qwen2.5's), Mistral's JSON array (Mistral NeMo's) and NAME[ARGS] (Mistral Small
3.2's, whose tokenizer has [ARGS]). The models have random weights over a small vocabulary (small_vocab_model.py) and
the server detects the format from the template, so a call comes only from the grammar; its arguments must validate
with `jsonschema` against the tool's parameters, through the official openai client, streamed or not.
"""
import json

import jsonschema
import openai
import pytest

import server_harness as sh
import small_vocab_model

WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {
        "city": {"type": "string", "maxLength": 16},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        "days": {"type": "integer", "minimum": 1, "maximum": 10}}, "required": ["city"]}}}
SEARCH = {"type": "function", "function": {
    "name": "search", "description": "Search the web.",
    "parameters": {"type": "object", "properties": {
        "query": {"type": "string", "maxLength": 24},
        "filters": {"type": "object", "properties": {"lang": {"enum": ["en", "fr"]}, "year": {"type": "integer", "minimum": 1990,
                                                                                                "maximum": 2030}},
                    "required": ["lang"], "additionalProperties": False},
        "sites": {"type": "array", "items": {"type": "string", "maxLength": 12}, "maxItems": 2},
        "safe": {"type": "boolean"}}, "required": ["query", "filters"], "additionalProperties": False}}}
TOOLS = [WEATHER, SEARCH]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
USER = {"role": "user", "content": "Weather in Paris, and any events?"}
# Qwen3.5's template opens a reasoning block unless told not to; the other templates read no such variable.
NO_THINKING = {"chat_template_kwargs": {"enable_thinking": False}}
FAMILIES = ["qwen_xml", "hermes", "mistral", "mistral_args"]


@pytest.fixture(scope="module", params=FAMILIES)
def family(request, sanctum_bin, tmp_path_factory):
    name = request.param
    model = small_vocab_model.make_model(tmp_path_factory.mktemp(f"tools-{name}") / name, name)
    server = sh.Server(sanctum_bin, [f"small={model}"], tmp_path_factory.mktemp(f"tools-{name}-logs") / "server.log",
                       extra=["--threads", "1"])
    client = openai.OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)
    yield name, client, model
    server.terminate()


def ask(client, seed, **kw):
    kw.setdefault("tools", TOOLS)
    return client.chat.completions.create(model="small", messages=[USER], max_tokens=1500, temperature=1.0, seed=seed,
                                          extra_body=NO_THINKING, **kw).choices[0]


def check_calls(choice, names=SCHEMAS):
    """The calls of a finished answer: each names an offered tool and its arguments validate."""
    assert choice.finish_reason == "tool_calls", choice
    assert choice.message.tool_calls
    for call in choice.message.tool_calls:
        assert call.function.name in names, call
        jsonschema.validate(json.loads(call.function.arguments), SCHEMAS[call.function.name])
    return choice.message.tool_calls


def test_required_answers_are_calls_whose_arguments_validate(family):
    name, client, _ = family
    finished, several, called = 0, 0, set()
    for seed in range(8):
        c = ask(client, seed, tool_choice="required")
        if c.finish_reason == "length":
            continue
        calls = check_calls(c)
        finished += 1
        several += len(calls) > 1
        called |= {call.function.name for call in calls}
        assert not (c.message.content or "").strip(), c.message.content  # nothing but calls
    assert finished >= 6, name
    assert called == set(SCHEMAS), name  # either tool may be called


def test_a_named_function_is_the_only_one_called(family):
    name, client, _ = family
    finished = 0
    for seed in range(6):
        c = ask(client, seed, tool_choice={"type": "function", "function": {"name": "search"}})
        if c.finish_reason == "length":
            continue
        finished += 1
        check_calls(c, names={"search"})
    assert finished >= 4, name


def test_parallel_tool_calls_false_gives_exactly_one_call(family):
    name, client, _ = family
    finished = 0
    for seed in range(6):
        c = ask(client, seed, tool_choice="required", parallel_tool_calls=False)
        if c.finish_reason == "length":
            continue
        finished += 1
        assert len(check_calls(c)) == 1
    assert finished >= 4, name


def test_a_streamed_required_call_is_the_same_call(family):
    name, client, _ = family
    kw = dict(model="small", messages=[USER], tools=TOOLS, tool_choice="required", max_tokens=1500, temperature=1.0, seed=5,
              extra_body=NO_THINKING)
    whole = client.chat.completions.create(**kw).choices[0]
    calls, finish = {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        for d in chunk.choices[0].delta.tool_calls or []:
            c = calls.setdefault(d.index, {"name": "", "arguments": ""})
            c["name"] += d.function.name or ""
            c["arguments"] += d.function.arguments or ""
    assert finish == whole.finish_reason
    if whole.finish_reason == "tool_calls":
        assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == \
            [(t.function.name, json.loads(t.function.arguments)) for t in whole.message.tool_calls]


def test_strict_tools_under_auto_are_enforced_once_the_model_opens_a_call(family):
    name, client, model = family
    strict = [{"type": "function", "function": {**t["function"], "strict": True}} for t in TOOLS]
    # A push to open a call (the tag is one token): the text before it is free, the call after it is not. One call,
    # since the push would open more.
    tag = small_vocab_model.token_id(model, "[TOOL_CALLS]" if name.startswith("mistral") else "<tool_call>")
    finished = 0
    for seed in range(6):
        c = ask(client, seed, tools=strict, tool_choice="auto", logit_bias={str(tag): 100}, parallel_tool_calls=False)
        if c.finish_reason == "length":
            continue
        finished += 1
        assert len(check_calls(c)) == 1
    assert finished >= 4, name


def test_unenforceable_tool_schemas_are_400s_naming_the_tool(family):
    _, client, _ = family
    bad = {"type": "function", "function": {"name": "f", "parameters": {
        "type": "object", "properties": {"a": {"type": "integer", "not": {"const": 3}}}}}}
    with pytest.raises(openai.BadRequestError) as e:
        ask(client, 0, tools=[WEATHER, bad], tool_choice="required")
    assert e.value.body["param"] == "tools[1].function.parameters"
    assert "unsupported: not" in e.value.body["message"]


ANSWER = {"type": "object", "properties": {"answer": {"type": "string", "maxLength": 20}, "sure": {"type": "boolean"}},
          "required": ["answer", "sure"], "additionalProperties": False}


def test_with_a_response_format_an_auto_answer_is_calls_or_the_format(family):
    name, client, _ = family
    rf = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}
    finished = 0
    for seed in range(8):
        c = ask(client, seed, tool_choice="auto", response_format=rf)
        if c.finish_reason == "length":
            continue
        finished += 1
        if c.finish_reason == "tool_calls":  # tools without strict: any JSON object as arguments
            assert all(t.function.name in SCHEMAS and isinstance(json.loads(t.function.arguments), dict) for t in c.message.tool_calls)
        else:
            jsonschema.validate(json.loads(c.message.content), ANSWER)
    assert finished >= 6, name
    with pytest.raises(openai.BadRequestError) as e:  # a forced call has no room for the format
        ask(client, 0, tool_choice="required", response_format=rf)
    assert e.value.body["param"] == "response_format"
