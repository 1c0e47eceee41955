"""Phase errors: OpenAI error objects with the right status and `param`; the server never falls over."""
import json
import socket
import time

import openai
import pytest

import server_harness as sh
from server_harness import MODEL


def err(server, path, body, status):
    code, headers, raw = sh.request(server.port, "POST", path, body)
    assert code == status, raw
    e = json.loads(raw)["error"]
    assert set(e) == {"message", "type", "param", "code"}
    return e, headers


def test_malformed_json_is_400(server):
    e, _ = err(server, "/v1/chat/completions", b'{"model": "tiny", "messages": [', 400)
    assert e["type"] == "invalid_request_error" and e["code"] == "invalid_json"


def test_invalid_utf8_is_400(server):
    body = b'{"model":"tiny","messages":[{"role":"user","content":"\xff\xfe bad"}]}'
    e, _ = err(server, "/v1/chat/completions", body, 400)
    assert e["code"] == "invalid_utf8"


def test_non_object_body_is_400(server):
    err(server, "/v1/chat/completions", b'[1, 2, 3]', 400)


@pytest.mark.parametrize("field,value", [
    ("temperature", "hot"), ("temperature", 5), ("top_p", 0), ("max_tokens", 2.5), ("max_tokens", 0),
    ("n", "two"), ("stream", "yes"), ("stop", 42), ("seed", 1.5), ("presence_penalty", 3),
    ("top_logprobs", 50), ("chat_template_kwargs", "x"), ("messages", "hello"),
])
def test_wrong_types_and_ranges_name_the_param(server, field, value):
    body = sh.chat_body(MODEL)
    body[field] = value
    if field == "top_logprobs":
        body["logprobs"] = True
    e, _ = err(server, "/v1/chat/completions", body, 400)
    assert e["param"] == field


def test_missing_messages_is_400(server):
    e, _ = err(server, "/v1/chat/completions", {"model": MODEL}, 400)
    assert e["param"] == "messages"


def test_bad_role_names_the_message(server):
    e, _ = err(server, "/v1/chat/completions", {"model": MODEL, "messages": [{"role": "wizard", "content": "x"}]}, 400)
    assert e["param"] == "messages[0].role"


def test_sdk_raises_bad_request_with_param(client):
    with pytest.raises(openai.BadRequestError) as e:
        client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "x"}], temperature=9)
    assert e.value.status_code == 400 and e.value.body["param"] == "temperature"


def test_unknown_model_is_404(server):
    e, _ = err(server, "/v1/chat/completions", sh.chat_body("not-a-model"), 404)
    assert e["code"] == "model_not_found" and e["param"] == "model"


def test_unknown_route_is_404(server):
    code, _, raw = sh.request(server.port, "GET", "/v2/nothing")
    assert code == 404 and json.loads(raw)["error"]["type"] == "invalid_request_error"


def test_wrong_method_is_405(server):
    code, headers, _ = sh.request(server.port, "GET", "/v1/chat/completions")
    assert code == 405 and headers["allow"] == "POST"


def test_oversized_body_is_413(server):
    body = b'{"model":"tiny","messages":[{"role":"user","content":"' + b"a" * (9 << 20) + b'"}]}'
    code, _, raw = sh.request(server.port, "POST", "/v1/chat/completions", body, timeout=30)
    assert code == 413 and json.loads(raw)["error"]["code"] == "request_too_large"


def test_deeply_nested_json_is_400(server):
    err(server, "/v1/chat/completions", b"[" * 10000 + b"]" * 10000, 400)


def test_garbage_bytes_do_not_hurt_the_server(server):
    for junk in [b"\x00\x01\x02garbage\r\n\r\n", b"GET / HTTP/9.9\r\nHost\r\n\r\n", b"POST /v1/completions HTTP/1.1\r\n"
                 b"Content-Length: 99999999999999999999\r\n\r\n"]:
        with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
            s.sendall(junk)
            try:
                s.recv(4096)
            except OSError:
                pass
    assert sh.request(server.port, "GET", "/health")[0] == 200


def test_image_parts_are_a_clear_400(server):
    body = sh.chat_body(MODEL)
    body["messages"] = [{"role": "user", "content": [{"type": "text", "text": "what is this"},
                                                      {"type": "image_url", "image_url": {"url": "data:,"}}]}]
    e, _ = err(server, "/v1/chat/completions", body, 400)
    assert e["param"] == "messages[0].content[1]" and "image" in e["message"]


def test_full_queue_is_429_with_retry_after(start_server):
    s = start_server("--max-queue", "1", "--max-seqs", "1")
    long = sh.chat_body(MODEL, stream=True, max_tokens=4000, ignore_eos=True)
    running = sh.SseStream(s.port, "/v1/chat/completions", long)
    ev = running.events()
    next(ev), next(ev)  # the one-sequence batch is full with this one
    queued = sh.SseStream(s.port, "/v1/chat/completions", long)  # waits in the queue (depth 1)
    time.sleep(0.2)
    code, headers, raw = sh.request(s.port, "POST", "/v1/chat/completions", sh.chat_body(MODEL))
    assert code == 429 and headers["retry-after"] == "1"
    assert json.loads(raw)["error"]["code"] == "queue_full"
    running.close()
    queued.close()
    # Both slots free up: the next request is served.
    deadline = time.time() + 20
    while time.time() < deadline:
        code, _, _ = sh.request(s.port, "POST", "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=2))
        if code == 200:
            break
        time.sleep(0.1)
    assert code == 200
