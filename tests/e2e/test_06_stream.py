"""Phase stream: SSE chunk order, streamed == non-streamed, usage, stop strings across flushes,
and a client that leaves mid-stream frees its slot."""
import json
import time

import server_harness as sh
from server_harness import MODEL

MSG = [{"role": "user", "content": "Write a poem about the sea."}]


def stream_text(client, **kw):
    args = {"model": MODEL, "messages": MSG, "temperature": 0, "max_tokens": 20, "stream": True}
    args.update(kw)
    pieces, finish = [], None
    for chunk in client.chat.completions.create(**args):
        for c in chunk.choices:
            if c.delta.content:
                pieces.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    return "".join(pieces), finish


def test_sse_chunk_sequence(server):
    s = sh.SseStream(server.port, "/v1/chat/completions", sh.chat_body(MODEL, stream=True, max_tokens=5, ignore_eos=True))
    assert s.status == 200 and s.headers["content-type"] == "text/event-stream"
    assert s.headers.get("transfer-encoding") == "chunked"
    events = list(s.events())
    s.close()
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"]["role"] == "assistant"
    assert all(c["object"] == "chat.completion.chunk" and c["id"] == chunks[0]["id"] for c in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks[:-1])


def test_streamed_equals_non_streamed_at_temperature_zero(client):
    whole = client.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_tokens=20)
    text, finish = stream_text(client)
    assert text == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason


def test_stream_include_usage(client):
    chunks = list(client.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_tokens=6, stream=True,
                                                 stream_options={"include_usage": True},
                                                 extra_body={"ignore_eos": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage.completion_tokens == 6
    assert last.usage.total_tokens == last.usage.prompt_tokens + 6


def test_stop_string_split_across_flushes_still_stops(client, server):
    # One token per flush (the default), and a stop string that spans two tokens' text.
    tokens = client.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_tokens=16, logprobs=True,
                                            extra_body={"ignore_eos": True}).choices[0].logprobs.content
    texts = [t.token for t in tokens]
    k = next(i for i in range(2, len(texts) - 1) if len(texts[i]) >= 2 and len(texts[i + 1]) >= 1)
    stop = texts[k][-2:] + texts[k + 1][:1]
    full = "".join(texts)
    text, finish = stream_text(client, max_tokens=16, stop=stop, extra_body={"ignore_eos": True})
    assert finish == "stop"
    assert stop not in text
    assert text == full[:full.find(stop)]


def test_stream_completions_endpoint(client, tiny_vocab):
    # This prompt's answer has characters of several bytes: text_offset counts characters.
    args = {"model": MODEL, "prompt": tiny_vocab.encode("Once upon a time"), "max_tokens": 5, "temperature": 0,
            "logprobs": 1, "extra_body": {"ignore_eos": True}}
    chunks = [c.choices[0] for c in client.completions.create(stream=True, **args) if c.choices]
    whole = client.completions.create(**args).choices[0]
    assert "".join(c.text for c in chunks) == whole.text
    assert [o for c in chunks if c.logprobs for o in c.logprobs.text_offset] == whole.logprobs.text_offset
    assert whole.logprobs.text_offset == [len("".join(whole.logprobs.tokens[:i])) for i in range(5)]
    assert len(whole.text) < len(whole.text.encode())


def test_stream_n_two_has_both_indexes(server):
    s = sh.SseStream(server.port, "/v1/chat/completions",
                     sh.chat_body(MODEL, stream=True, n=2, max_tokens=3, temperature=0.8, seed=3, ignore_eos=True,
                                  logprobs=True, stream_options={"include_usage": True}))
    chunks = [json.loads(e) for e in s.events() if e != "[DONE]"]
    s.close()
    finished = {c["choices"][0]["index"] for c in chunks if c["choices"] and c["choices"][0]["finish_reason"]}
    assert finished == {0, 1}
    tokens = {0: 0, 1: 0}
    for c in chunks:
        if c["choices"] and c["choices"][0]["logprobs"]:
            tokens[c["choices"][0]["index"]] += len(c["choices"][0]["logprobs"]["content"])
    assert tokens == {0: 3, 1: 3}
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6


def test_disconnect_mid_stream_frees_the_slot(server):
    def cancelled():
        _, _, m = sh.request(server.port, "GET", "/metrics")
        return sh.metric_value(m.decode(), "sanctum_mlx_inference_requests_total", {"stop_reason": "cancelled"})

    before = cancelled()
    s = sh.SseStream(server.port, "/v1/chat/completions", sh.chat_body(MODEL, stream=True, max_tokens=4000,
                                                                        ignore_eos=True))
    ev = s.events()
    next(ev), next(ev), next(ev)
    s.close()
    t0 = time.time()
    status, _, body = sh.post_json(server.port, "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=2), timeout=30)
    assert status == 200, body
    assert time.time() - t0 < 3  # the abandoned 4000-token generation would hold the worker for seconds
    deadline = time.time() + 5
    while cancelled() <= before and time.time() < deadline:
        time.sleep(0.05)
    assert cancelled() == before + 1


def test_stop_string_with_batched_flushes(start_server):
    # Three tokens per SSE write: the stop string can start in one write and end in the next.
    s = start_server("--stream-flush-tokens", "3")
    from openai import OpenAI
    c = OpenAI(base_url=s.base + "/v1", api_key="unused", max_retries=0)
    tokens = c.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_tokens=16, logprobs=True,
                                       extra_body={"ignore_eos": True}).choices[0].logprobs.content
    texts = [t.token for t in tokens]
    full = "".join(texts)
    boundary = len("".join(texts[:5]))  # between the 5th and 6th token: a flush boundary is at 3 and 6
    stop = full[boundary - 2:boundary + 2]
    streamed = []
    chunks = 0
    for chunk in c.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_tokens=16, stop=stop,
                                           stream=True, extra_body={"ignore_eos": True}):
        chunks += 1
        if chunk.choices and chunk.choices[0].delta.content:
            streamed.append(chunk.choices[0].delta.content)
    whole = c.chat.completions.create(model=MODEL, messages=MSG, temperature=0, max_tokens=16, stop=stop,
                                      extra_body={"ignore_eos": True}).choices[0].message.content
    assert "".join(streamed) == whole == full[:full.find(stop)]
    assert stop not in "".join(streamed)


def test_http_1_0_stream_ends_with_the_connection(server):
    import socket
    body = json.dumps(sh.chat_body(MODEL, stream=True, max_tokens=3, ignore_eos=True)).encode()
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"POST /v1/chat/completions HTTP/1.0\r\nContent-Type: application/json\r\nContent-Length: " +
                     str(len(body)).encode() + b"\r\n\r\n" + body)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.0 200") and b"chunked" not in head.lower()
    assert rest.rstrip().endswith(b"data: [DONE]")
