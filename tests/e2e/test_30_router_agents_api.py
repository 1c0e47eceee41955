"""`sanctum route` relays the agents' API as it relays chat completions: `/v1/messages` (through the official
anthropic SDK, X-Api-Key accepted), `/v1/responses` (openai SDK), `/tokenize` and `/detokenize`, streamed and
whole; answers equal the seat's own; failover when the primary is gone; token budgets charged from each
dialect's usage; errors the router raises itself take the shape the client's SDK reads (Anthropic's for
/v1/messages)."""
from __future__ import annotations

import json
import os

import anthropic
import openai
import pytest

import router_harness as rh
import server_harness as sh
from server_harness import MODEL


@pytest.fixture(scope="module")
def seats(sanctum_bin, tiny_model, tmp_path_factory):
    logs = tmp_path_factory.mktemp("router-agents")
    a = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], logs / "a.log", extra=["--threads", "1"])
    b = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], logs / "b.log", extra=["--threads", "1"])
    yield a, b
    a.terminate()
    b.terminate()


def token_file(path, token: str) -> str:
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return str(path)


def claude(base: str, key: str = "unused") -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=base, api_key=key, max_retries=0, timeout=60)


def gpt(base: str, key: str = "unused") -> openai.OpenAI:
    return openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=60)


def ask_claude(client: anthropic.Anthropic, stream: bool, request_id: str | None = None):
    kw = dict(model=MODEL, max_tokens=8, messages=[{"role": "user", "content": "Hello there"}])
    if request_id:
        kw["extra_headers"] = {"X-Request-Id": request_id}
    if not stream:
        return client.messages.create(**kw)
    with client.messages.stream(**kw) as s:
        return s.get_final_message()


def test_messages_through_the_router_equal_the_seat(router, seats):
    a, b = seats
    r = router({"backends": [rh.backend("coder", [MODEL], a.base, [b.base])]})
    direct = ask_claude(claude(a.base), stream=False)
    for stream in (False, True):
        via = ask_claude(claude(r.base), stream=stream)
        assert [c.model_dump() for c in via.content] == [c.model_dump() for c in direct.content]
        assert via.usage.input_tokens == direct.usage.input_tokens and via.usage.output_tokens == direct.usage.output_tokens
        assert via.stop_reason == direct.stop_reason
    prompt = [{"role": "user", "content": "Hello there"}]
    counted = claude(r.base).messages.count_tokens(model=MODEL, messages=prompt)
    assert counted.input_tokens == claude(a.base).messages.count_tokens(model=MODEL, messages=prompt).input_tokens == direct.usage.input_tokens
    with pytest.raises(anthropic.NotFoundError) as e:  # the router's own 404, in Anthropic's shape
        claude(r.base).messages.count_tokens(model="nope", messages=prompt)
    assert e.value.body["error"]["type"] == "not_found_error"


def test_responses_and_tokenize_through_the_router_equal_the_seat(router, seats):
    a, b = seats
    r = router({"backends": [rh.backend("coder", [MODEL], a.base, [b.base])]})
    direct = gpt(a.base).responses.create(model=MODEL, input="Hello there", max_output_tokens=8)
    via = gpt(r.base).responses.create(model=MODEL, input="Hello there", max_output_tokens=8)
    assert via.output_text == direct.output_text and via.usage.total_tokens == direct.usage.total_tokens
    events = list(gpt(r.base).responses.create(model=MODEL, input="Hello there", max_output_tokens=8, stream=True))
    assert "".join(e.delta for e in events if e.type == "response.output_text.delta") == direct.output_text
    assert events[-1].type == f"response.{direct.status}"  # completed, or incomplete at max_output_tokens
    body = {"model": MODEL, "prompt": "Hello there"}
    status, _, seat_tokens = sh.request(a.port, "POST", "/tokenize", body)
    assert status == 200
    status, headers, routed = sh.request(r.port, "POST", "/tokenize", body)
    assert status == 200 and json.loads(routed) == json.loads(seat_tokens)
    assert headers.get("x-sanctum-backend") == "coder"
    tokens = json.loads(routed)["tokens"]
    status, _, text = sh.request(r.port, "POST", "/detokenize", {"model": MODEL, "tokens": tokens})
    assert status == 200 and json.loads(text)["prompt"] == "Hello there"


def test_a_dead_primary_fails_over_for_every_dialect(router, seats):
    _, b = seats
    r = router({"backends": [rh.backend("coder", [MODEL], rh.dead_url(), [b.base], timeouts={"connect_s": 1})]})
    direct = ask_claude(claude(b.base), stream=True)
    assert ask_claude(claude(r.base), stream=True).content[0].text == direct.content[0].text
    assert gpt(r.base).responses.create(model=MODEL, input="Hi", max_output_tokens=4).output_text
    assert r.metric("sanctum_router_requests_total", {"upstream": b.base}) >= 2


def test_router_errors_on_messages_take_anthropic_shape_and_x_api_key_is_a_token(router, seats, tmp_path):
    a, _ = seats
    r = router({"listen": {"auth": {"tokens": [{"name": "agent", "file": token_file(tmp_path / "agent", "tok-agent")}]}},
                "budgets": {"client": {"requests": 2, "window_s": 30}},
                "backends": [rh.backend("coder", [MODEL], a.base)]})
    with pytest.raises(anthropic.AuthenticationError) as e:
        ask_claude(claude(r.base, "wrong"), stream=False)
    assert e.value.body["error"]["type"] == "authentication_error"
    assert ask_claude(claude(r.base, "tok-agent"), stream=False, request_id="claude-1").content
    assert r.access("claude-1")["identity"] == "agent"  # X-Api-Key carried the router's token
    ask_claude(claude(r.base, "tok-agent"), stream=True)
    with pytest.raises(anthropic.RateLimitError) as e:
        ask_claude(claude(r.base, "tok-agent"), stream=False)
    assert e.value.body["error"]["type"] == "rate_limit_error" and "Budget exceeded" in e.value.body["error"]["message"]
    # An unknown model: the router's own 404, still in Anthropic's shape.
    status, _, body = sh.request(r.port, "POST", "/v1/messages", {"model": "nope", "max_tokens": 4, "messages": []},
                                 headers={"X-Api-Key": "tok-agent"})
    assert status == 404 and json.loads(body)["type"] == "error" and json.loads(body)["error"]["type"] == "not_found_error"


def test_token_budgets_count_each_dialects_usage(router, seats):
    a, _ = seats
    first = ask_claude(claude(a.base), stream=False)
    per_request = first.usage.input_tokens + first.usage.output_tokens
    r = router({"budgets": {"client": {"tokens": 2 * per_request + 1, "window_s": 30}},
                "backends": [rh.backend("coder", [MODEL], a.base)]})
    ask_claude(claude(r.base), stream=True)   # usage from message_start + message_delta
    ask_claude(claude(r.base), stream=False)  # usage from the body
    assert r.metric("sanctum_router_tokens_total", {"backend": "coder"}) == 2 * per_request
    ask_claude(claude(r.base), stream=False)  # still under: 2n < 2n+1
    with pytest.raises(anthropic.RateLimitError):
        ask_claude(claude(r.base), stream=False)
