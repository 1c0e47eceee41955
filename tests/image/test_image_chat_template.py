"""Conversations with images render through the Qwen3.5 chat template as transformers renders them:
the server turns every image part into a {"type": "image"} content item (tests/image/
image_request_test.cc pins that form) and the template writes one <|vision_start|><|image_pad|>
<|vision_end|> per image, which the server then expands to the image's token count."""
import json
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TEMPLATES = [ROOT / "tests" / "data" / "chat_templates" / "Qwen3.5-4B.jinja"]
URL = "data:image/png;base64,iVBORw0KGgo="


def as_server_sends(messages):
    """The content the server hands the template: text parts kept, each image part as {"type": "image"}."""
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            c = [{"type": "image"} if p["type"] == "image" else {"type": "text", "text": p["text"]} for p in c]
        out.append({**m, "content": c})
    return out


def as_transformers_gets(messages):
    """What a transformers user passes to apply_chat_template: image items carrying their image."""
    out = []
    for m in messages:
        c = m["content"]
        if isinstance(c, list):
            c = [{"type": "image", "url": URL} if p["type"] == "image" else p for p in c]
        out.append({**m, "content": c})
    return out


def image():
    return {"type": "image"}


def text(t):
    return {"type": "text", "text": t}


CASES = {
    "image_then_text": [{"role": "user", "content": [image(), text("What is in this picture?")]}],
    "text_then_image": [{"role": "user", "content": [text("Describe:"), image()]}],
    "two_images_one_message": [{"role": "user", "content": [text("Compare"), image(), text("with"), image()]}],
    "image_text_image_across_turns": [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": [image(), text("What colour?")]},
        {"role": "assistant", "content": "Red."},
        {"role": "user", "content": [text("And this one?"), image()]},
    ],
    "image_only": [{"role": "user", "content": [image()]}],
}


def ours(sanctum_bin, template, cases):
    lines = [json.dumps({"messages": as_server_sends(m), "add_generation_prompt": True}) for m in cases.values()]
    p = subprocess.run([sanctum_bin, "tokenize", "--chat", "--jsonl", "--template", str(template)],
                       input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    return [json.loads(line)["text"] for line in p.stdout.splitlines() if line]


def theirs(template, messages):
    from transformers.utils.chat_template_utils import _normalize_chat_messages, render_jinja_template

    out, _ = render_jinja_template(conversations=[_normalize_chat_messages(as_transformers_gets(messages))], tools=None,
                                   chat_template=template.read_text(), add_generation_prompt=True)
    return out[0]


@pytest.mark.parametrize("template", TEMPLATES, ids=lambda p: p.stem)
def test_image_conversations_render_as_transformers(sanctum_bin, template):
    rendered = ours(sanctum_bin, template, CASES)
    for (name, messages), got in zip(CASES.items(), rendered):
        want = theirs(template, messages)
        assert got == want, name
        n_images = sum(1 for m in messages if isinstance(m["content"], list) for p in m["content"] if p["type"] == "image")
        assert got.count("<|vision_start|><|image_pad|><|vision_end|>") == n_images, name
