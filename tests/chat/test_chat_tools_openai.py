"""The server's tool-calling request path against transformers, for every template in tests/data/chat_templates.

Each case is an OpenAI chat request as a client sends it (call arguments as JSON strings, content null on a
turn of only calls, role "tool" results, tool_choice). Ours: `sanctum tokenize --chat --openai` runs it through
the server's request parser and renders the prompt. The oracle: transformers' apply_chat_template machinery on the
same conversation shaped as vLLM shapes it (arguments parsed into dicts in the client's key order, null content
of a call-only turn as "", no tools with tool_choice "none"), with add_generation_prompt=True.
"""
import copy
import json
import subprocess

import pytest

import cases as chat_cases
from test_chat_templates import ALL, BOS, EOS, TEMPLATE_PATHS, hf_render, sanctum_bin

WEATHER, SEARCH = chat_cases.WEATHER_TOOL, chat_cases.SEARCH_TOOL
SYS = {"role": "system", "content": "You are a helpful assistant."}
USER = {"role": "user", "content": "Weather in Paris, and any events?"}
# Ids of 9 letters and digits: the only form Mistral templates accept; the others take any string.
CALL = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "abcDEF123", "type": "function",
     "function": {"name": "get_weather", "arguments": "{\"unit\": \"celsius\", \"city\": \"Paris\", \"days\": 2}"}}]}
RESULT = {"role": "tool", "tool_call_id": "abcDEF123", "content": "{\"temperature\": 18}"}
TWO = {"role": "assistant", "content": "Checking both.", "tool_calls": [
    {"id": "abcDEF123", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}},
    {"id": "ghiJKL456", "type": "function", "function": {"name": "search", "arguments": "{\"query\": \"Paris events\"}"}}]}
RESULT_B = {"role": "tool", "tool_call_id": "ghiJKL456", "content": "a concert"}
# Nested values in an order a sorted parser would change: templates tojson them as the client wrote them.
NESTED = {"role": "assistant", "content": "One moment.", "tool_calls": [
    {"id": "abcDEF123", "type": "function", "function": {
        "name": "get_weather", "arguments": "{\"zone\": {\"lon\": 2.35, \"lat\": 48.85}, \"hours\": [9, 12], \"city\": \"Par\u00eds\"}"}}]}
EMPTY_ARGS = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "abcDEF123", "type": "function", "function": {"name": "search", "arguments": ""}}]}


def requests():
    out = []

    def add(name, messages, **fields):
        out.append((name, {"messages": messages, **fields}))

    add("tools_offered", [SYS, USER], tools=[WEATHER, SEARCH])
    add("tools_offered_choice_auto", [USER], tools=[WEATHER], tool_choice="auto", parallel_tool_calls=False)
    add("tool_choice_none_offers_nothing", [SYS, USER], tools=[WEATHER, SEARCH], tool_choice="none")
    add("call_and_result", [USER, CALL, RESULT], tools=[WEATHER])
    add("call_result_answer_next_turn", [SYS, USER, CALL, RESULT, {"role": "assistant", "content": "18 degrees."},
                                         {"role": "user", "content": "Thanks!"}], tools=[WEATHER])
    add("two_calls_two_results", [USER, TWO, RESULT, RESULT_B], tools=[WEATHER, SEARCH])
    add("nested_arguments_keep_their_order", [USER, NESTED, RESULT], tools=[WEATHER])
    add("empty_arguments", [USER, EMPTY_ARGS, {"role": "tool", "tool_call_id": "abcDEF123", "content": "none"}], tools=[SEARCH])
    add("history_calls_without_tools", [USER, CALL, RESULT])
    return out


def vllm_shaped(request):
    """The conversation the template sees, as vLLM hands it to apply_chat_template."""
    messages = copy.deepcopy(request["messages"])
    for m in messages:
        if m["role"] == "assistant" and m.get("tool_calls"):
            if m.get("content") is None:
                m["content"] = ""
            for call in m["tool_calls"]:
                args = call["function"].get("arguments")
                call["function"]["arguments"] = json.loads(args) if args else {}
    tools = None if request.get("tool_choice") == "none" else request.get("tools")
    return {"messages": messages, "tools": tools, "add_generation_prompt": True, "kwargs": {}}


def ours(template_name, reqs):
    lines = [json.dumps({"request": r, "bos_token": BOS, "eos_token": EOS}) for _, r in reqs]
    p = subprocess.run([sanctum_bin(), "tokenize", "--chat", "--openai", "--jsonl", "--template", str(TEMPLATE_PATHS[template_name])],
                       input=("\n".join(lines) + "\n").encode(), capture_output=True, timeout=300)
    out = [json.loads(l) for l in p.stdout.decode().split("\n") if l]
    if p.returncode != 0 and not out:  # the template did not compile: every case is refused
        assert "chat template: line" in p.stderr.decode(), p.stderr.decode(errors="replace")
        return [{"error": p.stderr.decode()}] * len(reqs)
    assert len(out) == len(reqs), p.stderr.decode(errors="replace")
    for o in out:  # our request parser must accept every case: only the template may refuse one
        assert "400 (" not in o.get("error", ""), o
    return [o["text"] if "text" in o else o for o in out]


@pytest.mark.parametrize("name", ALL)
def test_openai_tool_requests_render_as_transformers_does(name):
    template = TEMPLATE_PATHS[name].read_text()
    reqs = requests()
    rendered = ours(name, reqs)
    mismatches, matched = [], 0
    for (case, req), o in zip(reqs, rendered):
        e = hf_render(template, vllm_shaped(req))
        if isinstance(e, dict) and isinstance(o, dict):
            continue  # refused by both (e.g. a template without tool support raising on tool messages)
        if o == e:
            matched += 1
        else:
            mismatches.append((case, o, e))
    for case, o, e in mismatches[:3]:
        print(f"[{case}]\n ours: {str(o)[:800]!r}\n hf:   {str(e)[:800]!r}")
    assert not mismatches
    if name in ("Qwen3.5-4B", "Qwen3-Coder", "Qwen-Qwen2.5-7B-Instruct", "Qwen-Qwen3-0.6B", "unsloth-mistral-Devstral-Small-2507",
                "Mistral-Small-3.2-24B-Instruct-2506"):
        assert matched == len(reqs)  # the served families render every case


def test_tool_choice_none_renders_as_no_tools_and_auto_as_tools():
    reqs = [("auto", {"messages": [USER], "tools": [WEATHER]}), ("none", {"messages": [USER], "tools": [WEATHER], "tool_choice": "none"}),
            ("without", {"messages": [USER]})]
    auto, none, without = ours("Qwen3.5-4B", reqs)
    assert none == without
    assert auto != without and "get_weather" in auto
