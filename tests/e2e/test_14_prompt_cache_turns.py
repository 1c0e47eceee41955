"""Multi-turn chat through the server on the embedded default model (a GatedDeltaNet hybrid) and its
chat template: the rendered prompt of turn N+1 extends turn N's prompt + answer, so the
end-of-generation snapshot the worker builds while idle is the turn boundary, and turn N+1 is
served from the cache up to the last aligned position of turn N's prompt + answer. The answers are
the same as those of a server without the prompt cache."""
import time

from server_harness import ROOT, metric_value, request

DEFAULT_MODEL = ROOT / "models" / "default" / "mlx-4bit"
NAME = "default"
WORDS = ("cattle ladder awake coconut lagoon bubble silver kettle radar brave cabin angle hammer fox camel aspen spoon "
         "block cedar bounce canoe").split()


def copy_task(turn):
    """A copy request whose answer (some 40 tokens) makes most turns cross a 64-token boundary."""
    phrases = [" ".join(WORDS[(turn * 5 + i * 3 + j) % len(WORDS)] for j in range(3)) for i in range(9)]
    return "Copy the following text exactly:\n" + ", ".join(phrases)


USER_TURNS = [copy_task(t) for t in range(7)] + ["Please repeat: Hammer canoe bounce hammer fox camel on block in cabin!"]


def aligned_point(n):
    return max(0, n - 2) // 64 * 64


def reused_total(server):
    _, _, body = request(server.port, "GET", "/metrics")
    return metric_value(body.decode(), "sanctum_mlx_prompt_cache_tokens_total")


def converse(server):
    """(prompt_tokens, completion_tokens, reused prompt tokens, answer) per turn."""
    from openai import OpenAI
    client = OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=120)
    history = [{"role": "system", "content": "Answer the user's question."}]
    turns = []
    for text in USER_TURNS:
        history.append({"role": "user", "content": text})
        before = reused_total(server)
        r = client.chat.completions.create(model=NAME, messages=history, temperature=0, max_tokens=200)
        answer = r.choices[0].message.content or ""
        turns.append((r.usage.prompt_tokens, r.usage.completion_tokens, reused_total(server) - before, answer))
        history.append({"role": "assistant", "content": answer})
        time.sleep(0.5)  # the client reads the answer; the worker builds the turn-boundary snapshot meanwhile
    return turns


def test_next_turn_is_served_past_the_previous_answer(start_server):
    cached = converse(start_server(models=[f"{NAME}={DEFAULT_MODEL}"]))
    plain = converse(start_server("--prompt-cache-mb", "0", models=[f"{NAME}={DEFAULT_MODEL}"]))
    assert [t[3] for t in cached] == [t[3] for t in plain]
    assert all(t[2] == 0 for t in plain)
    print("turns (prompt, completion, reused):", [t[:3] for t in cached])
    past_previous_prompt = 0
    for (prompt, completion, _, _), (next_prompt, _, reused, _) in zip(cached, cached[1:]):
        assert next_prompt > prompt + completion
        # Everything up to the last aligned position of the previous prompt + answer (its stop token
        # included when usage leaves it out) comes from the cache; past the previous prompt whenever
        # that position is (a prompt's own snapshot never is).
        assert reused >= aligned_point(prompt + completion), (prompt, completion, reused)
        past_previous_prompt += reused > prompt
    assert past_previous_prompt >= 3


def test_idle_snapshot_work_is_reported(start_server):
    server = start_server(models=[f"{NAME}={DEFAULT_MODEL}"])
    converse(server)
    deadline = time.monotonic() + 30
    while True:  # the last turn's work runs once the worker is idle
        _, _, body = request(server.port, "GET", "/metrics")
        text = body.decode()
        if metric_value(text, "sanctum_prompt_cache_tail_snapshots_pending") == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    built = metric_value(text, "sanctum_prompt_cache_tail_snapshots_total")
    tokens = metric_value(text, "sanctum_prompt_cache_tail_snapshot_tokens_total")
    assert metric_value(text, "sanctum_prompt_cache_tail_snapshots_pending") == 0
    assert built >= 3, text
    assert tokens >= 64 * built
