"""Constrained output through a live server: response_format json_object and json_schema through the official openai
client (parse() with a pydantic model too, and streamed), a grammar and a json_schema on /v1/completions, logit_bias
on both endpoints, where a reasoning model's constraint starts, and 400s that name what cannot be enforced.

The models have random weights over a small vocabulary (small_vocab_model.py): left alone they write no JSON, so a
finished answer is valid only because of the constraint. A random model may wander inside a string until max_tokens,
so tests require most answers to finish and every finished one to be valid.
"""
import json
import re
from typing import Literal

import jsonschema
import openai
import pytest
from pydantic import BaseModel, Field

import server_harness as sh
import small_vocab_model

USER = {"role": "user", "content": "Fill in the form."}


@pytest.fixture(scope="module")
def small(sanctum_bin, tmp_path_factory):
    model = small_vocab_model.make_model(tmp_path_factory.mktemp("grammar-model") / "chatml", "chatml")
    server = sh.Server(sanctum_bin, [f"small={model}"], tmp_path_factory.mktemp("grammar-logs") / "server.log", extra=["--threads", "1"])
    yield server, model
    server.terminate()


@pytest.fixture(scope="module")
def client(small):
    return openai.OpenAI(base_url=small[0].base + "/v1", api_key="unused", max_retries=0, timeout=120)


def post(server, path, body):
    status, _, raw = sh.request(server.port, "POST", path, json.dumps(body).encode(), timeout=120)
    return status, json.loads(raw)


def test_json_object_answers_are_json_objects(client):
    finished = 0
    for seed in range(8):
        r = client.chat.completions.create(model="small", messages=[USER], response_format={"type": "json_object"}, max_tokens=300,
                                           temperature=1.0, seed=seed)
        c = r.choices[0]
        if c.finish_reason == "stop":
            finished += 1
            assert isinstance(json.loads(c.message.content), dict), c.message.content
    assert finished >= 6


class Person(BaseModel):
    name: str = Field(max_length=12)
    age: int = Field(ge=0, le=130)
    role: Literal["admin", "user"]
    tags: list[str] = Field(max_length=3)


def test_parse_with_a_pydantic_model_through_the_openai_client(client):
    parsed = 0
    for seed in range(8):
        try:
            r = client.chat.completions.parse(model="small", messages=[USER], response_format=Person, max_tokens=400, temperature=1.0,
                                              seed=seed)
        except openai.LengthFinishReasonError:
            continue  # wandered in a string until max_tokens
        person = r.choices[0].message.parsed
        assert isinstance(person, Person)
        Person.model_validate(person.model_dump())
        parsed += 1
    assert parsed >= 6


SCHEMA = {"type": "object", "properties": {"id": {"type": "integer", "minimum": 1, "maximum": 999},
                                           "kind": {"enum": ["a", "b", "c"]},
                                           "point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}},
                                                     "required": ["x", "y"], "additionalProperties": False},
                                           "note": {"type": ["string", "null"], "maxLength": 20}},
          "required": ["id", "kind", "point"], "additionalProperties": False}
RF = {"type": "json_schema", "json_schema": {"name": "thing", "schema": SCHEMA, "strict": True}}


def test_json_schema_answers_validate_and_keep_the_schema_key_order(client):
    finished = 0
    for seed in range(8):
        c = client.chat.completions.create(model="small", messages=[USER], response_format=RF, max_tokens=300, temperature=1.0,
                                           seed=seed).choices[0]
        if c.finish_reason != "stop":
            continue
        finished += 1
        value = json.loads(c.message.content)
        jsonschema.validate(value, SCHEMA)
        assert [k for k in SCHEMA["properties"] if k in value] == list(value)  # properties come in schema order
    assert finished >= 6


def test_a_streamed_constrained_answer_is_the_same_answer(client):
    kw = dict(model="small", messages=[USER], response_format=RF, max_tokens=300, temperature=1.0, seed=3)
    whole = client.chat.completions.create(**kw).choices[0]
    pieces = [ch.choices[0].delta.content or "" for ch in client.chat.completions.create(stream=True, **kw) if ch.choices]
    assert "".join(pieces) == whole.message.content


def test_a_grammar_and_a_json_schema_on_completions(small):
    server, _ = small
    grammar = 'root ::= ("yes" | "no") ", " [0-9]{1,3} "!"   # an answer and a count'
    for seed in range(6):
        status, body = post(server, "/v1/completions",
                            {"model": "small", "prompt": "Answer:", "grammar": grammar, "max_tokens": 20, "temperature": 1.0, "seed": seed})
        assert status == 200, body
        c = body["choices"][0]
        assert c["finish_reason"] == "stop"
        assert re.fullmatch(r"(yes|no), [0-9]{1,3}!", c["text"]), c["text"]
        status, body = post(server, "/v1/completions", {"model": "small", "prompt": "N:", "json_schema": {"type": "integer", "minimum": 5,
                                                                                                         "maximum": 9},
                                                          "max_tokens": 20, "temperature": 1.0, "seed": seed})
        assert status == 200 and body["choices"][0]["finish_reason"] == "stop", body
        assert 5 <= int(body["choices"][0]["text"]) <= 9


@pytest.mark.parametrize("schema,feature", [
    ({"type": "object", "not": {"required": ["a"]}}, "not"),
    ({"type": "string", "format": "color"}, "format"),
    ({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, "uniqueItems"),
    ({"type": "object", "patternProperties": {"^x": {"type": "string"}}}, "patternProperties"),
])
def test_unenforceable_schemas_are_400s_naming_the_feature(client, schema, feature):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model="small", messages=[USER], max_tokens=5,
                                       response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}})
    assert e.value.body["param"] == "response_format"
    assert f"unsupported: {feature}" in e.value.body["message"]


def test_malformed_formats_and_grammars_are_400s_naming_the_field(small):
    server, _ = small
    status, body = post(server, "/v1/chat/completions", {"model": "small", "messages": [USER],
                                                         "response_format": {"type": "json_schema", "json_schema": {"name": "x"}}})
    assert status == 400 and body["error"]["param"] == "response_format.json_schema.schema", body
    status, body = post(server, "/v1/completions", {"model": "small", "prompt": "x", "grammar": 'root ::= "a'})
    assert status == 400 and body["error"]["param"] == "grammar", body
    assert "line 1" in body["error"]["message"]


def test_logit_bias_forces_and_forbids_tokens_on_both_endpoints(small, client):
    server, model = small
    x, y = small_vocab_model.token_id(model, "x"), small_vocab_model.token_id(model, "y")
    for bias, expected in [({x: 100}, "x"), ({x: -100, y: 100}, "y"), ({x: 100, y: -100}, "x")]:
        lb = {str(k): v for k, v in bias.items()}
        status, body = post(server, "/v1/completions",
                            {"model": "small", "prompt": "a", "max_tokens": 6, "temperature": 1.0, "seed": 1, "logit_bias": lb})
        assert status == 200 and body["choices"][0]["text"] == expected * 6, body
        r = client.chat.completions.create(model="small", messages=[USER], max_tokens=6, temperature=1.0, seed=1, logit_bias=lb)
        assert r.choices[0].message.content == expected * 6
    for bad in [{"abc": 1}, {"5000": 1}, {str(x): 150}]:  # not an id, outside the vocabulary, out of range
        status, body = post(server, "/v1/completions", {"model": "small", "prompt": "a", "max_tokens": 1, "logit_bias": bad})
        assert status == 400 and body["error"]["param"] == "logit_bias", body


def test_logit_bias_cannot_push_a_token_past_the_grammar(client, small):
    _, model = small
    x = small_vocab_model.token_id(model, "x")
    c = client.chat.completions.create(model="small", messages=[USER], response_format=RF, max_tokens=300, temperature=1.0, seed=2,
                                       logit_bias={str(x): 100}).choices[0]
    if c.finish_reason == "stop":
        jsonschema.validate(json.loads(c.message.content), SCHEMA)
    assert not c.message.content.lstrip().startswith("x")


@pytest.fixture(scope="module")
def thinking(sanctum_bin, tmp_path_factory):
    """A model whose chat template (Qwen3.5's) opens a <think> block in the prompt."""
    model = small_vocab_model.make_model(tmp_path_factory.mktemp("thinking-model") / "qwen_xml", "qwen_xml")
    server = sh.Server(sanctum_bin, [f"small={model}"], tmp_path_factory.mktemp("thinking-logs") / "server.log", extra=["--threads", "1"])
    yield server, model
    server.terminate()


def test_a_reasoning_model_thinks_freely_and_the_constraint_starts_after_its_reasoning(thinking):
    server, model = thinking
    # A nudge towards </think> so that a random model ends its reasoning within a few tokens.
    end = small_vocab_model.token_id(model, "</think>")
    reasoned, finished = 0, 0
    for seed in range(8):
        status, body = post(server, "/v1/chat/completions",
                            {"model": "small", "messages": [USER], "response_format": {"type": "json_object"}, "max_tokens": 1500,
                             "temperature": 1.0, "seed": seed, "logit_bias": {str(end): 3}})
        assert status == 200, body
        c = body["choices"][0]
        if c["finish_reason"] != "stop":
            continue
        finished += 1
        assert isinstance(json.loads(c["message"]["content"]), dict), c["message"]
        reasoning = c["message"].get("reasoning_content", "")
        # Reasoning is free text: it holds what JSON could not start with.
        reasoned += bool(reasoning.strip()) and not reasoning.lstrip().startswith("{")
    assert finished >= 6
    assert reasoned >= 4


def test_without_thinking_the_constraint_starts_at_the_first_token(thinking):
    server, _ = thinking
    finished = 0
    for seed in range(6):
        status, body = post(server, "/v1/chat/completions",
                            {"model": "small", "messages": [USER], "response_format": {"type": "json_object"}, "max_tokens": 1500,
                             "temperature": 1.0, "seed": seed, "chat_template_kwargs": {"enable_thinking": False}})
        assert status == 200, body
        c = body["choices"][0]
        if c["finish_reason"] == "stop":
            finished += 1
            assert isinstance(json.loads(c["message"]["content"]), dict)
            assert not c["message"].get("reasoning_content")
    assert finished >= 4
