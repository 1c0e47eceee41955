"""Concurrent requests share forwards: streams that overlap come out exactly as they do one at a
time (temperature 0), the engine's metrics show batches of several sequences, a client that leaves
frees its sequence within a step, and n > 1 choices come back together."""
import json
import threading
import time

import server_harness as sh

MODEL = sh.MODEL
PROMPTS = [f"Tell me about the number {i} and why it matters" for i in range(6)]


def stream_text(port, body):
    s = sh.SseStream(port, "/v1/chat/completions", body)
    assert s.status == 200
    text = ""
    for data in s.events():
        if data == "[DONE]":
            break
        for choice in json.loads(data)["choices"]:
            text += choice["delta"].get("content") or ""
    s.close()
    return text


def batched_steps(port):
    text = sh.request(port, "GET", "/metrics")[2].decode()
    count = sh.metric_value(text, "sanctum_engine_batch_sequences_count")
    alone = sum(sh.metric_value(text, "sanctum_engine_batch_sequences_bucket", {"le": le}) for le in ("1", "1.0"))
    return count - alone


def test_overlapping_streams_equal_their_solo_runs(start_server):
    s = start_server("--max-seqs", "8")
    bodies = [sh.chat_body(MODEL, p, max_tokens=24, stream=True, ignore_eos=True) for p in PROMPTS]
    solo = [stream_text(s.port, b) for b in bodies]
    assert batched_steps(s.port) == 0
    got = [None] * len(bodies)

    def one(i):
        got[i] = stream_text(s.port, bodies[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(bodies))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert got == solo
    assert batched_steps(s.port) > 0, "no step ran more than one sequence"


def test_a_client_that_leaves_frees_its_sequence(start_server):
    s = start_server()
    stream = sh.SseStream(s.port, "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=400, stream=True, ignore_eos=True))
    assert stream.status == 200
    events = stream.events()
    for _ in range(3):
        next(events)
    stream.close()
    deadline = time.time() + 10
    running = None
    while time.time() < deadline:
        text = sh.request(s.port, "GET", "/metrics")[2].decode()
        running = sh.metric_value(text, "sanctum_engine_running_sequences", {"model": MODEL})
        if running == 0:
            break
        time.sleep(0.05)
    assert running == 0
    assert sh.request(s.port, "GET", "/health")[0] == 200


def test_n_choices_come_back_together(server, client):
    r = client.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Hi"}], n=3, max_tokens=8, temperature=0)
    assert [c.index for c in r.choices] == [0, 1, 2]
    assert len({c.message.content for c in r.choices}) == 1  # greedy: one answer, three times


def test_new_sequences_wait_while_the_state_bound_is_full(start_server):
    # Each of these streams holds 640 KiB of KV at its longest (5 blocks of 256 tokens x 512 bytes):
    # with --kv-cache-mb 1 the second waits in the queue until the first is gone, though --max-seqs
    # has room.
    s = start_server("--kv-cache-mb", "1", "--max-seqs", "8")
    long = sh.chat_body(MODEL, stream=True, max_tokens=1200, ignore_eos=True)
    first = sh.SseStream(s.port, "/v1/chat/completions", long)
    ev = first.events()
    next(ev)
    second = sh.SseStream(s.port, "/v1/chat/completions", long)
    time.sleep(0.5)
    text = sh.request(s.port, "GET", "/metrics")[2].decode()
    assert sh.metric_value(text, "sanctum_engine_running_sequences", {"model": MODEL}) == 1
    assert sh.metric_value(text, "sanctum_mlx_inference_queue_depth", {"model": MODEL}) == 1
    first.close()
    assert next(second.events())  # admitted once the first has left
    second.close()


def test_a_request_that_cannot_fit_the_state_bound_alone_is_a_400(start_server):
    s = start_server("--kv-cache-mb", "1", "--default-max-tokens", "4000")
    status, _, body = sh.post_json(s.port, "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=4000))
    assert status == 400 and body["error"]["code"] == "context_length_exceeded" and body["error"]["param"] == "max_tokens"
    assert "needs 2 MiB" in body["error"]["message"] and "state at 1 MiB (--kv-cache-mb" in body["error"]["message"]
    # Left to the server, max_tokens shrinks to what fits: 8 blocks of 256 tokens, the prompt included.
    status, _, body = sh.post_json(s.port, "/v1/completions", {"model": MODEL, "prompt": [5] * 100, "ignore_eos": True})
    assert status == 200 and body["usage"]["completion_tokens"] == 2048 - 100


def test_n_choices_hold_the_prompt_once(start_server):
    # A 1,500-token prompt, four choices of 100 tokens, 512 bytes of KV a token. Copied per choice
    # that is 4 x 1,792 rows = 3.5 MiB; with the prompt's pages shared, its 5 whole blocks (1,280
    # rows) once and the other 512 rows a choice = 1.625 MiB. --kv-cache-mb 2 admits the request
    # only where the pages are shared.
    body = {"model": MODEL, "prompt": [5] * 1500, "n": 4, "max_tokens": 100, "temperature": 0, "ignore_eos": True, "stream": True}
    s = start_server("--kv-cache-mb", "2")
    stream = sh.SseStream(s.port, "/v1/completions", body)
    assert stream.status == 200
    texts = ["", "", "", ""]
    shared = 0.0
    for data in stream.events():
        if data == "[DONE]":
            break
        for choice in json.loads(data)["choices"]:
            texts[choice["index"]] += choice.get("text") or ""
        if not shared:  # the choices run: three of them map the first one's prompt pages
            shared = sh.metric_value(sh.request(s.port, "GET", "/metrics")[2].decode(), "sanctum_kv_cache_shared_page_bytes")
    stream.close()
    assert shared >= 3 * 1500 * 512 * 0.9
    assert texts[0] and texts.count(texts[0]) == 4  # greedy: each choice reads the same prompt rows
    copied = start_server("--kv-cache-mb", "2", "--tune", "kv_shared_pages=0")
    status, _, err = sh.post_json(copied.port, "/v1/completions", {**body, "stream": False})
    assert status == 400 and "--kv-cache-mb" in err["error"]["message"]
