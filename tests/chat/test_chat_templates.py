"""Chat-template rendering parity with transformers' apply_chat_template machinery (render_jinja_template,
the same sandboxed Jinja environment, message normalisation and reasoning aliasing)."""
import json
import os
import pathlib
import subprocess

import pytest

import cases as chat_cases

ROOT = pathlib.Path(__file__).resolve().parents[2]
TEMPLATES = ROOT / "tests" / "data" / "chat_templates"
BOS, EOS = "<s>", "</s>"
# Templates that matter most for the engine: must match on every case.
KEY = ["sanctum-default", "Qwen-Qwen3-0.6B", "Qwen3.5-4B", "Qwen-Qwen2.5-7B-Instruct", "Qwen3-Coder", "Qwen-QwQ-32B",
       "mistralai-Mistral-Nemo-Instruct-2407", "Mistral-Small-3.2-24B-Instruct-2506", "unsloth-mistral-Devstral-Small-2507",
       "meta-llama-Llama-3.1-8B-Instruct", "meta-llama-Llama-3.2-3B-Instruct", "meta-llama-Llama-3.3-70B-Instruct"]
# Real templates by name, plus the embedded default model's own (written here, with tools).
TEMPLATE_PATHS = {p.stem: p for p in TEMPLATES.glob("*.jinja")}
TEMPLATE_PATHS["sanctum-default"] = ROOT / "models" / "default" / "hf-bf16" / "chat_template.jinja"
ALL = sorted(TEMPLATE_PATHS)


def sanctum_bin():
    path = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    if not os.path.exists(path):
        pytest.skip(f"sanctum binary not found at {path} (set SANCTUM_BIN)")
    return path


def hf_render(template, case):
    from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template
    try:
        out, _ = render_jinja_template(conversations=[_normalize_chat_messages(case["messages"])], tools=case["tools"],
                                       chat_template=template, add_generation_prompt=case["add_generation_prompt"],
                                       bos_token=BOS, eos_token=EOS, **case["kwargs"])
        return out[0]
    except Exception as e:  # the template refused the input (raise_exception) or failed
        return {"error": f"{type(e).__name__}: {e}"}


def ours_render(template_path, all_cases):
    lines = []
    for case in all_cases:
        req = {"messages": case["messages"], "add_generation_prompt": case["add_generation_prompt"],
               "bos_token": BOS, "eos_token": EOS, **case["kwargs"]}
        if case["tools"] is not None:
            req["tools"] = case["tools"]
        lines.append(json.dumps(req, ensure_ascii=False))
    p = subprocess.run([sanctum_bin(), "tokenize", "--chat", "--jsonl", "--template", str(template_path)],
                       input=("\n".join(lines) + "\n").encode(), capture_output=True, timeout=300)
    out = [json.loads(l) for l in p.stdout.decode().split("\n") if l]
    if p.returncode != 0 and not out:  # the template itself did not compile: every case is an error
        assert "chat template: line" in p.stderr.decode(), p.stderr.decode(errors="replace")
        return [{"error": p.stderr.decode()}] * len(all_cases)
    assert len(out) == len(all_cases), p.stderr.decode(errors="replace")
    return [o["text"] if "text" in o else o for o in out]


def compare(name):
    template = TEMPLATE_PATHS[name].read_text()
    all_cases = chat_cases.cases()
    ours = ours_render(TEMPLATE_PATHS[name], all_cases)
    matched = both_error = 0
    mismatches = []
    for case, o in zip(all_cases, ours):
        e = hf_render(template, case)
        if isinstance(e, dict) and isinstance(o, dict):
            both_error += 1
        elif o == e:
            matched += 1
        else:
            mismatches.append((case["name"], o, e))
    print(f"{name}: {len(all_cases)} cases, {matched} identical, {both_error} refused by both, {len(mismatches)} mismatches")
    for n, o, e in mismatches[:3]:
        print(f"  [{n}]\n   ours: {str(o)[:600]!r}\n   hf:   {str(e)[:600]!r}")
    return matched, mismatches


@pytest.mark.parametrize("name", KEY)
def test_key_template_matches_transformers(name):
    matched, mismatches = compare(name)
    assert matched >= 10
    assert not mismatches


@pytest.mark.parametrize("name", [n for n in ALL if n not in KEY])
def test_other_template_matches_transformers(name):
    _, mismatches = compare(name)
    assert not mismatches
