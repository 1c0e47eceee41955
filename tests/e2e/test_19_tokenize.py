"""POST /tokenize and /detokenize: the ids are those of transformers' tokenizer for the same model folder
(an implementation apart from the server's) for a prompt, for llama.cpp's `content`, and for a conversation
as apply_chat_template renders it (tools, calls and results, with and without the generation prompt);
/detokenize gives the text back; bad ids and unknown fields are 400s that name them."""
import copy
import json

import pytest

import server_harness as sh
from server_harness import MODEL

TEXTS = ["Hello world", "naïve café — 東京 🚀", "<|im_start|>user\nhi<|im_end|>\n", "  spaces\n\ttabs  ", "x"]
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather in a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}
USER = {"role": "user", "content": "Weather in Paris?"}
CALL = {"role": "assistant", "content": "", "tool_calls": [
    {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]}
RESULT = {"role": "tool", "tool_call_id": "call_1", "content": "18 degrees"}


@pytest.fixture(scope="module")
def hf(tiny_model):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(str(tiny_model))


def hf_chat_ids(hf, messages, tools=None, **kwargs):
    """apply_chat_template's ids, with call arguments as mappings (as the server and vLLM pass them)."""
    messages = copy.deepcopy(messages)
    for m in messages:
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = json.loads(c["function"]["arguments"])
    return hf.apply_chat_template(messages, tools=tools, tokenize=True, return_dict=False, **kwargs)


def post(server, path, body):
    status, _, out = sh.post_json(server.port, path, body)
    return status, out


def tokenize(server, **body):
    status, out = post(server, "/tokenize", body)
    assert status == 200, out
    return out


def test_a_prompt_is_tokenized_as_the_hf_tokenizer_does(server, hf):
    _, _, card = sh.request(server.port, "GET", f"/v1/models/{MODEL}")
    for text in TEXTS:
        out = tokenize(server, model=MODEL, prompt=text)
        assert out["tokens"] == hf(text)["input_ids"], text
        assert out["count"] == len(out["tokens"])
        assert out["max_model_len"] == json.loads(card)["max_model_len"]
        assert tokenize(server, content=text)["tokens"] == out["tokens"]  # llama.cpp's name for it


def test_token_strs_are_the_vocabulary_pieces(server, hf):
    out = tokenize(server, prompt=TEXTS[1], return_token_strs=True)
    assert out["token_strs"] == hf.convert_ids_to_tokens(out["tokens"])


@pytest.mark.parametrize("generation_prompt", [True, False])
@pytest.mark.parametrize("conversation", ["user", "tool_loop"])
def test_a_conversation_is_tokenized_as_apply_chat_template_renders_it(server, hf, conversation, generation_prompt):
    messages, tools = ([USER], None) if conversation == "user" else ([USER, CALL, RESULT], [WEATHER])
    body = {"messages": messages, "add_generation_prompt": generation_prompt}
    if tools:
        body["tools"] = tools
    assert tokenize(server, **body)["tokens"] == hf_chat_ids(hf, messages, tools, add_generation_prompt=generation_prompt)


def test_chat_template_kwargs_reach_the_template(server, hf):
    out = tokenize(server, messages=[USER], chat_template_kwargs={"enable_thinking": False})
    assert out["tokens"] == hf_chat_ids(hf, [USER], add_generation_prompt=True, enable_thinking=False)
    assert out["count"] > tokenize(server, messages=[USER])["count"]


def test_detokenize_gives_the_text_back(server, hf):
    for text in TEXTS:
        ids = tokenize(server, prompt=text)["tokens"]
        status, out = post(server, "/detokenize", {"model": MODEL, "tokens": ids})
        assert status == 200, out
        assert out["prompt"] == text == hf.decode(ids)
        assert out["content"] == text  # llama.cpp's name for it


@pytest.mark.parametrize("tokens", [[-1], [151669], [10 ** 12], ["7"], [1.5]])
def test_ids_outside_the_tokenizer_are_400s_naming_tokens(server, tokens):
    status, out = post(server, "/detokenize", {"tokens": [14990] + tokens})
    assert status == 400, out
    assert out["error"]["param"] == "tokens"
    assert "tokens[1]" in out["error"]["message"]


@pytest.mark.parametrize("path,body,param", [
    ("/tokenize", {"prompt": "x", "mm_processor_kwargs": {}}, "mm_processor_kwargs"),
    ("/tokenize", {"prompt": "x", "messages": [USER]}, "prompt"),
    ("/tokenize", {}, "prompt"),
    ("/tokenize", {"prompt": "x", "add_generation_prompt": True}, "add_generation_prompt"),
    ("/tokenize", {"messages": [{"role": "wizard", "content": "x"}]}, "messages[0].role"),
    ("/tokenize", {"prompt": 3}, "prompt"),
    ("/detokenize", {"tokens": [1], "skip_special_tokens": True}, "skip_special_tokens"),
    ("/detokenize", {"tokens": "1 2"}, "tokens"),
])
def test_bad_requests_are_400s_naming_the_field(server, path, body, param):
    status, out = post(server, path, body)
    assert status == 400, out
    assert out["error"]["param"] == param


def test_an_unknown_model_is_404(server):
    for path, body in [("/tokenize", {"model": "nope", "prompt": "x"}), ("/detokenize", {"model": "nope", "tokens": [1]})]:
        status, out = post(server, path, body)
        assert status == 404 and out["error"]["code"] == "model_not_found", out
