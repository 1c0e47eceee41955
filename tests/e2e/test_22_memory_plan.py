"""The memory plan: each served model's weights, KV bytes per token, recurrent state per sequence, the
bounds on running sequences' state, on the prompt cache and on the grammar cache, and the scratch estimate, logged at startup and
shown on /health and /metrics (computed here from the checkpoint's files and config, not read back from the
server). --memory-limit-mb fits those bounds under a whole-process limit, refuses to start when the weights
alone pass it, and a request that cannot fit what it leaves is a 400."""
import json
import subprocess
import time

import pytest

import server_harness as sh
from server_harness import MODEL

MIB = 1 << 20


def plan_of(server):
    status, _, body = sh.request(server.port, "GET", "/health")
    assert status == 200
    health = json.loads(body)
    return health["memory"], health["memory"]["models"][MODEL]


def expected_kv_per_token(model_dir, dtype="f32"):
    c = json.loads((model_dir / "config.json").read_text())
    d = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
    blocks = -(-d // 32)
    # One head's row per format (src/ops/kv_format.h): q8 a byte per value and a bf16 scale per 32,
    # q4 16 bytes and a bf16 (scale, min) per 32.
    head = {"f32": 4 * d, "bf16": 2 * d, "q8": d + 2 * blocks, "q4": 20 * blocks}
    key, value = {"f32": ("f32", "f32"), "bf16": ("bf16", "bf16"), "q8": ("q8", "q8"), "q4v": ("q8", "q4")}[dtype]
    return c["num_hidden_layers"] * c["num_key_value_heads"] * (head[key] + head[value])  # every layer attends


@pytest.fixture
def serve(sanctum_bin, tiny_model, tmp_path):
    started = []

    def start(*extra):
        s = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], tmp_path / f"s{len(started)}.log", extra=["--threads", "1", *extra])
        started.append(s)
        return s

    yield start
    for s in started:
        s.terminate()


def test_the_plan_is_logged_and_shown_from_the_checkpoint_and_flags(serve, tiny_model):
    s = serve()
    memory, plan = plan_of(s)
    weights = sum(f.stat().st_size for f in tiny_model.glob("*.safetensors"))
    assert plan["weights_mib"] == pytest.approx(weights / MIB)
    assert plan["kv_per_token_kib"] == pytest.approx(expected_kv_per_token(tiny_model) / 1024)
    assert plan["recurrent_per_sequence_mib"] == 0  # qwen2: no GatedDeltaNet layers
    assert plan["prompt_cache_mib"] == 1024 and plan["state_bound_mib"] is None and plan["total_mib"] is None
    assert plan["grammar_cache_mib"] == 256
    assert memory["limit_mib"] is None and memory["resident_mib"] > plan["weights_mib"]
    # The process besides the model (code, libraries, tokenizer) was measured at startup: part of what is resident.
    assert 0 < memory["process_mib"] < memory["resident_mib"]
    logged = [r for r in s.log_records() if r.get("msg") == "memory plan"]
    assert len(logged) == 1 and json.loads(logged[0]["plan"]) == plan
    metrics = sh.request(s.port, "GET", "/metrics")[2].decode()
    assert sh.metric_value(metrics, "sanctum_memory_plan_bytes", {"model": MODEL, "part": "weights"}) == weights
    assert sh.metric_value(metrics, "sanctum_memory_plan_bytes", {"model": MODEL, "part": "grammar_cache"}) == 256 * MIB


@pytest.mark.parametrize("dtype", ["bf16", "q8", "q4v"])
def test_the_plan_counts_the_kv_cache_dtypes_bytes(serve, tiny_model, dtype):
    _, plan = plan_of(serve("--kv-cache-dtype", dtype))
    assert plan["kv_cache_dtype"] == dtype
    assert plan["kv_per_token_kib"] == pytest.approx(expected_kv_per_token(tiny_model, dtype) / 1024)


def limit_leaving(serve, mib):
    """A --memory-limit-mb that leaves about `mib` MiB past the process, the weights and the scratch."""
    probe = serve()
    memory, plan = plan_of(probe)
    probe.terminate()
    return int(memory["process_mib"] + plan["weights_mib"] + plan["scratch_mib"]) + mib


def test_a_memory_limit_shares_what_the_weights_leave(serve):
    limit = limit_leaving(serve, 30)
    s = serve("--memory-limit-mb", str(limit))
    memory, plan = plan_of(s)
    assert memory["limit_mib"] == limit
    # The limit holds the model's plan and the process's own memory, counted once.
    assert plan["total_mib"] + memory["process_mib"] == pytest.approx(limit, abs=1 / 1024)
    left = limit - memory["process_mib"] - plan["weights_mib"] - plan["scratch_mib"]
    grammar = left / 8  # under 256 MiB here
    assert plan["grammar_cache_mib"] == pytest.approx(grammar, abs=1 / 1024)
    assert plan["prompt_cache_mib"] == pytest.approx((left - grammar) / 4, abs=1 / 1024)
    assert plan["state_bound_mib"] == pytest.approx((left - grammar) * 3 / 4, abs=1 / 1024)
    # A request larger than that bound, even alone, is refused with the numbers.
    choices = int(plan["state_bound_mib"] * 1024 / (plan["kv_per_token_kib"] * 4096)) + 1  # each holds 4,096 tokens at its longest
    status, _, body = sh.post_json(s.port, "/v1/completions", {"model": MODEL, "prompt": [5] * 10, "max_tokens": 4000, "n": choices})
    assert status == 400 and body["error"]["code"] == "context_length_exceeded" and "--memory-limit-mb" in body["error"]["message"]
    # Given bounds stay; the prompt cache takes the rest.
    s2 = serve("--memory-limit-mb", str(limit), "--kv-cache-mb", "8")
    memory2, plan2 = plan_of(s2)
    assert plan2["state_bound_mib"] == 8
    grammar2 = plan2["grammar_cache_mib"]
    fixed2 = 8 + grammar2 + memory2["process_mib"] + plan2["weights_mib"] + plan2["scratch_mib"]
    assert plan2["prompt_cache_mib"] == pytest.approx(limit - fixed2, abs=1 / 1024)
    # A given grammar cache bound is kept as given, without a limit and under one.
    _, plan3 = plan_of(serve("--grammar-cache-mb", "3"))
    assert plan3["grammar_cache_mib"] == 3
    memory4, plan4 = plan_of(serve("--memory-limit-mb", str(limit), "--grammar-cache-mb", "2"))
    left4 = limit - 2 - memory4["process_mib"] - plan4["weights_mib"] - plan4["scratch_mib"]
    assert plan4["grammar_cache_mib"] == 2 and plan4["prompt_cache_mib"] == pytest.approx(left4 / 4, abs=1 / 1024)


@pytest.mark.parametrize("flags,words", [
    (["--memory-limit-mb", "1"], ["--memory-limit-mb 1 MiB", "alone need"]),
    (["--memory-limit-mb", "1000", "--kv-cache-mb", "1000"], ["the given bounds", "--kv-cache-mb"]),
    (["--memory-limit-mb", "1000", "--grammar-cache-mb", "1000"], ["the given bounds", "--grammar-cache-mb"]),
    (["--grammar-cache-mb", "-1"], ["--grammar-cache-mb must be >= 0"]),
])
def test_a_limit_the_weights_or_given_bounds_pass_stops_startup(sanctum_bin, tiny_model, flags, words):
    run = subprocess.run([sanctum_bin, "serve", "--model", f"{MODEL}={tiny_model}", "--port", str(sh.free_port()), *flags],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode != 0
    for w in words:
        assert w in run.stderr, run.stderr


def test_the_prompt_cache_gives_its_share_back_before_a_request_waits(serve):
    """Under --memory-limit-mb (neither bound given) the running sequences may take the prompt cache's
    quarter as well: two requests whose state at its longest passes the state bound together, but not
    the bound and the cache's share, run at once, and the cache evicts entries to make that room."""
    limit = limit_leaving(serve, 30)  # each choice then stays inside the 4,096-token context
    s = serve("--memory-limit-mb", str(limit))
    _, plan = plan_of(s)
    assert plan["cache_yields_to_state"] is True
    kv = plan["kv_per_token_kib"] * 1024
    bound, cache = plan["state_bound_mib"] * MIB, plan["prompt_cache_mib"] * MIB
    metrics = lambda: sh.request(s.port, "GET", "/metrics")[2].decode()  # noqa: E731
    # Fill the prompt cache with finished sequences.
    for i in range(40):
        status, _, _ = sh.post_json(s.port, "/v1/completions", {"model": MODEL, "prompt": [100 + i] * 1000, "max_tokens": 2})
        assert status == 200
        if sh.metric_value(metrics(), "sanctum_mlx_prompt_cache_bytes") > 0.8 * cache:
            break
    assert sh.metric_value(metrics(), "sanctum_mlx_prompt_cache_bytes") > 0.8 * cache
    # Each request: 8 choices whose state at its longest is half the bound plus a quarter of the cache.
    choices, prompt = 8, 10
    per_choice = int((bound / 2 + cache / 4) / (choices * kv))
    together = 2 * choices * per_choice * kv
    assert bound < together <= bound + cache
    body = {"model": MODEL, "prompt": [7] * prompt, "max_tokens": per_choice - prompt, "n": choices, "stream": True,
            "ignore_eos": True, "temperature": 1.0, "seed": 1}
    first = sh.SseStream(s.port, "/v1/completions", body, timeout=120)
    second = None
    try:
        assert first.status == 200, first.resp.read()
        next(first.events())  # the first request runs (for minutes: it is cancelled below)
        second = sh.SseStream(s.port, "/v1/completions", body, timeout=120)
        assert second.status == 200
        next(second.events())
        text = metrics()
    finally:
        first.close()
        if second:
            second.close()
    # A step ran more sequences than one request has: the second was admitted beside the first.
    steps = sh.metric_value(text, "sanctum_engine_batch_sequences_count")
    at_most_one_request = sh.metric_value(text, "sanctum_engine_batch_sequences_bucket", {"le": str(choices)})
    assert steps > at_most_one_request, f"{steps} steps, {at_most_one_request} of them with at most {choices} sequences"
    held = sh.metric_value(text, "sanctum_mlx_prompt_cache_bytes")
    assert held <= cache - (together - bound), f"the cache still held {held} bytes while both ran"
