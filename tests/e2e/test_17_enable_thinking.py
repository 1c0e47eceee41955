"""chat_template_kwargs.enable_thinking on the embedded default model, whose template opens a think
block for true, writes an empty one for false and neither when it is not given: the prompt the
server counts is the evaluation set's rendering of it (tests/data/default_model_eval.json, made
apart from the server), and the answer lands in reasoning_content and content accordingly."""
import json

import pytest

import server_harness as sh

NAME = "default"
CASES = json.loads((sh.ROOT / "tests" / "data" / "default_model_eval.json").read_text())["cases"]
THINKING_ON = [c for c in CASES if c["task"] == "thinking_on"][:3]
THINKING_OFF = [c for c in CASES if c["task"] == "thinking_off"][:3]


def ask(server, messages, **kwargs):
    body = {"model": NAME, "messages": messages, "temperature": 0, "max_tokens": 64}
    if kwargs:
        body["chat_template_kwargs"] = kwargs
    status, _, r = sh.post_json(server.port, "/v1/chat/completions", body)
    assert status == 200, r
    return r["usage"]["prompt_tokens"], r["choices"][0]["message"]


@pytest.mark.parametrize("case", THINKING_ON, ids=[c["id"] for c in THINKING_ON])
def test_true_opens_a_think_block_and_the_answer_follows_it(default_server, default_vocab, case):
    assert case["prompt"].endswith("<|im_start|>assistant\n<think>\n")
    prompt_tokens, message = ask(default_server, case["messages"], enable_thinking=True)
    assert prompt_tokens == len(default_vocab.encode(case["prompt"]))
    assert message.get("reasoning_content", "").strip(), message
    assert message["content"].strip() == case["expected"], message


@pytest.mark.parametrize("case", THINKING_OFF, ids=[c["id"] for c in THINKING_OFF])
def test_false_writes_an_empty_think_block_and_answers_directly(default_server, default_vocab, case):
    assert case["prompt"].endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n")
    prompt_tokens, message = ask(default_server, case["messages"], enable_thinking=False)
    assert prompt_tokens == len(default_vocab.encode(case["prompt"]))
    assert "reasoning_content" not in message, message
    assert message["content"].strip() == case["expected"], message


def test_not_given_adds_no_think_block(default_server, default_vocab):
    messages = THINKING_ON[0]["messages"]
    prompt_tokens, message = ask(default_server, messages)
    assert prompt_tokens == len(default_vocab.chat_prompt(messages))
    assert prompt_tokens == len(default_vocab.encode(THINKING_ON[0]["prompt"])) - 2  # without "<think>", "\n"
    assert "reasoning_content" not in message, message
