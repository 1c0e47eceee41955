"""A Python mirror of chat_template.jinja, so that training text equals what the served template
produces (check_data.py compares the two through transformers' apply_chat_template)."""
from __future__ import annotations

import json

TOOLS_HEADER = "# Tools\n\nYou have access to the following functions:\n\n<tools>"
TOOLS_FOOTER = ("\n</tools>\n\nTo call a function, reply only in this format:\n\n<tool_call>\n"
                "<function=example_function_name>\n<parameter=example_parameter>\nvalue\n</parameter>\n"
                "</function>\n</tool_call>")


def tojson(value) -> str:
    """transformers' tojson filter: json.dumps with its default separators, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False)


def render_tool_call(call: dict) -> str:
    """One call as the template renders it: strings raw, objects and lists as JSON, the rest as str()."""
    f = call.get("function", call)
    out = "<tool_call>\n<function=" + f["name"] + ">\n"
    for name, value in (f.get("arguments") or {}).items():
        shown = tojson(value) if isinstance(value, (dict, list)) else str(value)
        out += "<parameter=" + name + ">\n" + shown + "\n</parameter>\n"
    return out + "</function>\n</tool_call>"


def render_prompt(messages: list, add_generation_prompt: bool = True, enable_thinking: bool | None = None,
                  tools: list | None = None) -> str:
    last_query = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
    out = []
    if tools:
        out.append("<|im_start|>system\n" + TOOLS_HEADER + "".join("\n" + tojson(t) for t in tools) + TOOLS_FOOTER)
        first = messages[0] if messages else None
        if first and first["role"] == "system" and isinstance(first.get("content"), str) and first["content"].strip():
            out.append("\n\n" + first["content"].strip())
        out.append("<|im_end|>\n")
    for i, m in enumerate(messages):
        content = m["content"].strip() if isinstance(m.get("content"), str) else ""
        role = m["role"]
        if role == "system":
            assert i == 0
            if not tools:
                out.append("<|im_start|>system\n" + content + "<|im_end|>\n")
        elif role == "user":
            out.append("<|im_start|>user\n" + content + "<|im_end|>\n")
        elif role == "assistant":
            reasoning = ""
            if "</think>" in content:
                reasoning = content.split("</think>")[0].split("<think>")[-1]
                content = content.split("</think>")[-1]
            reasoning, content = reasoning.strip(), content.strip()
            if i > last_query and reasoning:
                out.append("<|im_start|>assistant\n<think>\n" + reasoning + "\n</think>\n\n" + content)
            else:
                out.append("<|im_start|>assistant\n" + content)
            for k, call in enumerate(m.get("tool_calls") or []):
                if k > 0:
                    out.append("\n")
                elif content:
                    out.append("\n\n")
                out.append(render_tool_call(call))
            out.append("<|im_end|>\n")
        elif role == "tool":
            if i == 0 or messages[i - 1]["role"] != "tool":
                out.append("<|im_start|>user")
            out.append("\n<tool_response>\n" + content + "\n</tool_response>")
            if i == len(messages) - 1 or messages[i + 1]["role"] != "tool":
                out.append("<|im_end|>\n")
        else:
            raise ValueError(role)
    if add_generation_prompt:
        out.append("<|im_start|>assistant\n")
        if enable_thinking is False:
            out.append("<think>\n\n</think>\n\n")
        elif enable_thinking:
            out.append("<think>\n")
    return "".join(out)
