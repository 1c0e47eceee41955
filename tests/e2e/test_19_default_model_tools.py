"""The embedded default model calls tools out of the box: offered the calculator or the country lookup it
was trained with, `sanctum serve` answers with a parsed `tool_calls` (both stream modes), and given the
tool's result it answers from it. A model whose template has no tool format refuses `tools` by name."""
import json
import shutil

import openai
import pytest

import server_harness as sh

BATTERY = json.loads((sh.ROOT / "tests" / "data" / "default_model_eval.json").read_text())
# The tool definitions the model was trained with, as the evaluation battery sends them.
TOOLS = {t["function"]["name"]: t for s in BATTERY["smoke"] for t in s.get("tools", [])}
CALCULATOR = TOOLS["calculator"]
LOOKUP = {"type": "function", "function": {
    "name": "lookup_country", "description": "Look up a fact about a country.",
    "parameters": {"type": "object", "properties": {"country": {"type": "string"},
                                                    "fact": {"type": "string", "enum": ["capital", "population"]}},
                   "required": ["country", "fact"]}}}


@pytest.fixture(scope="module")
def client(default_server):
    return openai.OpenAI(base_url=f"http://127.0.0.1:{default_server.port}/v1", api_key="none", max_retries=0)


def ask(client, messages, tools, stream=False):
    kw = dict(model="default", messages=messages, tools=tools, temperature=0, max_tokens=64)
    if not stream:
        choice = client.chat.completions.create(**kw).choices[0]
        calls = [(c.id, c.function.name, json.loads(c.function.arguments)) for c in choice.message.tool_calls or []]
        return choice.message.content, calls, choice.finish_reason
    content, calls, finish = "", {}, None
    for chunk in client.chat.completions.create(stream=True, **kw):
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        for d in delta.tool_calls or []:
            c = calls.setdefault(d.index, {"id": d.id, "name": d.function.name, "arguments": ""})
            c["arguments"] += d.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return content or None, [(c["id"], c["name"], json.loads(c["arguments"])) for c in calls.values()], finish


@pytest.mark.parametrize("stream", [False, True])
def test_the_default_model_calls_the_calculator(client, stream):
    content, calls, finish = ask(client, [{"role": "user", "content": "What is 12 * 7?"}], [CALCULATOR, LOOKUP], stream)
    assert [(name, args) for _, name, args in calls] == [("calculator", {"expression": "12 * 7"})]
    assert calls[0][0].startswith("call_") and finish == "tool_calls" and not content


@pytest.mark.parametrize("stream", [False, True])
def test_the_default_model_calls_the_lookup(client, stream):
    _, calls, finish = ask(client, [{"role": "user", "content": "What is the capital of Peru?"}], [LOOKUP], stream)
    assert [(name, args) for _, name, args in calls] == [("lookup_country", {"country": "Peru", "fact": "capital"})]
    assert finish == "tool_calls"


def test_an_agent_loop_call_result_answer(client):
    user = {"role": "user", "content": "What is 37 + 45?"}
    _, calls, _ = ask(client, [user], [CALCULATOR])
    assert [(name, args) for _, name, args in calls] == [("calculator", {"expression": "37 + 45"})]
    call_id = calls[0][0]
    turn = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call_id, "type": "function", "function": {"name": "calculator", "arguments": json.dumps(calls[0][2])}}]}
    content, calls, finish = ask(client, [user, turn, {"role": "tool", "tool_call_id": call_id, "content": "82"}], [CALCULATOR])
    assert (content, calls, finish) == ("82", [], "stop")


def test_without_a_fitting_tool_it_answers_in_text(client):
    # A weather question with only the calculator offered (a prompt of the battery's tool_unneeded row).
    content, calls, finish = ask(client, [{"role": "user", "content": "Tell me the weather in Beijing."}], [CALCULATOR])
    assert (content, calls, finish) == ("I cannot check the weather without a tool for it.", [], "stop")


def test_a_model_without_a_tool_format_refuses_tools(sanctum_bin, tmp_path):
    model = tmp_path / "no-tools"
    shutil.copytree(sh.DEFAULT_MODEL, model)
    plain = ("{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endfor %}"
             "{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}")
    (model / "chat_template.jinja").write_text(plain)
    config = json.loads((model / "tokenizer_config.json").read_text())
    config["chat_template"] = plain
    (model / "tokenizer_config.json").write_text(json.dumps(config))
    server = sh.Server(sanctum_bin, [f"plain={model}"], tmp_path / "server.log", extra=["--threads", "1"])
    try:
        body = {"model": "plain", "messages": [{"role": "user", "content": "hi"}], "tools": [CALCULATOR]}
        code, _, raw = sh.request(server.port, "POST", "/v1/chat/completions", json.dumps(body).encode())
        assert code == 400, raw
        assert json.loads(raw)["error"]["param"] == "tools"
    finally:
        server.terminate()
