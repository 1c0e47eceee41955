"""`sanctum serve --lora`: adapters beside an unmodified base, chosen per request as MODEL:NAME.
Requests with different adapters and none, run concurrently in one batch, each answer what they
answer alone; /v1/models lists the adapters; an unknown adapter is a 404 naming it; `--admin` hot
swaps adapters under a loop of streaming requests with no failure (each answer is the old adapter's or
the new one's, and the new one's once the swap has returned); bad admin requests are clear 4xx errors
and leave the old set serving; SIGHUP re-reads --lora-list."""
import json
import os
import signal
import subprocess
import threading
import time

import pytest

import mlx_adapters
import server_harness as sh

MODEL = sh.MODEL
KEYS = ["self_attn.q_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]
TOKEN = "lora-admin-token-0123456789"
PROMPTS = ["Tell me about the sea", "Name three colours", "What is two plus two"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("lora-serve")
    model = sh.make_tiny_chat_model(root / "tiny")
    a = mlx_adapters.train_adapter(model, root / "a", steps=3, seed=3, keys=KEYS)
    b = mlx_adapters.train_adapter(model, root / "b", steps=3, seed=4, keys=KEYS)
    other = sh.make_tiny_chat_model(root / "other", hidden=32)  # an adapter for another shape
    bad = mlx_adapters.train_adapter(other, root / "bad", steps=1, seed=5, keys=KEYS)
    dora = mlx_adapters.train_adapter(model, root / "dora", steps=1, seed=6, keys=KEYS, dora=True)
    token = root / "token"
    token.write_text(TOKEN)
    os.chmod(token, 0o600)
    return {"root": root, "model": model, "a": a, "b": b, "bad": bad, "dora": dora, "token": token}


def server(sanctum_bin, setup, log, *extra):
    return sh.Server(sanctum_bin, [f"{MODEL}={setup['model']}"], log, list(extra))


def stream_text(port, model, prompt, max_tokens=12):
    s = sh.SseStream(port, "/v1/chat/completions", sh.chat_body(model, prompt, max_tokens=max_tokens, stream=True, ignore_eos=True))
    assert s.status == 200, s.status
    text = ""
    for data in s.events():
        if data == "[DONE]":
            break
        for choice in json.loads(data)["choices"]:
            text += choice["delta"].get("content") or ""
    s.close()
    return text


def admin(port, body=None, token=TOKEN):
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    method = "GET" if body is None else "POST"
    status, _, payload = sh.request(port, method, "/admin/adapters", body, headers=headers)
    return status, json.loads(payload) if payload else None


def test_requests_pick_adapters_and_mixed_batches_equal_solo_runs(sanctum_bin, setup, tmp_path):
    s = server(sanctum_bin, setup, tmp_path / "server.log", "--lora", f"a={setup['a']}", "--lora", f"b={setup['b']}", "--max-seqs", "8")
    try:
        names = [MODEL, f"{MODEL}:a", f"{MODEL}:b"]
        jobs = [(name, prompt) for prompt in PROMPTS[:2] for name in names]
        solo = {job: stream_text(s.port, *job) for job in jobs}
        for prompt in PROMPTS[:2]:
            answers = {solo[(name, prompt)] for name in names}
            assert len(answers) == 3, f"the adapters change nothing for {prompt!r}: the check would show nothing"
        got = {}
        threads = [threading.Thread(target=lambda j=job: got.__setitem__(j, stream_text(s.port, *j))) for job in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert got == solo
        metrics = sh.request(s.port, "GET", "/metrics")[2].decode()
        batched = sh.metric_value(metrics, "sanctum_engine_batch_sequences_count") - sh.metric_value(
            metrics, "sanctum_engine_batch_sequences_bucket", {"le": "1"})
        assert batched > 0, "no step ran more than one sequence"
        assert sh.metric_value(metrics, "sanctum_lora_adapters_loaded", {"model": MODEL}) == 2
        assert sh.metric_value(metrics, "sanctum_lora_requests_total", {"model": MODEL, "adapter": "a"}) == 4

        status, _, body = sh.request(s.port, "GET", "/v1/models")
        cards = {c["id"]: c for c in json.loads(body)["data"]}
        assert set(cards) == {MODEL, f"{MODEL}:a", f"{MODEL}:b"}
        assert cards[f"{MODEL}:a"]["parent"] == MODEL and cards[f"{MODEL}:a"]["root"] == str(setup["a"])
        status, _, body = sh.request(s.port, "GET", f"/v1/models/{MODEL}:b")
        assert status == 200 and json.loads(body)["id"] == f"{MODEL}:b" and json.loads(body)["parent"] == MODEL
        assert sh.request(s.port, "GET", f"/v1/models/{MODEL}:zzz")[0] == 404
        status, _, body = sh.request(s.port, "POST", "/v1/chat/completions", sh.chat_body(f"{MODEL}:zzz", "hi", max_tokens=2))
        assert status == 404 and json.loads(body)["error"]["code"] == "model_not_found" and f"{MODEL}:zzz" in body.decode()
        status, _, body = sh.request(s.port, "POST", "/v1/completions",
                                     {"model": f"{MODEL}:a", "prompt": "Hi", "max_tokens": 3, "temperature": 0})
        assert status == 200 and json.loads(body)["model"] == f"{MODEL}:a"
        assert sh.request(s.port, "GET", "/admin/adapters")[0] == 404, "the admin endpoints exist only with --admin"
        # The base after the adapters ran on the same prompt: no adapter's prefix came back from the prompt cache.
        assert stream_text(s.port, MODEL, PROMPTS[0]) == solo[(MODEL, PROMPTS[0])]
    finally:
        s.terminate()
    # Without a prompt cache, the adapters answer what they answered after the base had cached the prompt.
    s = server(sanctum_bin, setup, tmp_path / "nocache.log", "--lora", f"a={setup['a']}", "--lora", f"b={setup['b']}", "--prompt-cache-mb",
               "0")
    try:
        for name in names[1:]:
            assert stream_text(s.port, name, PROMPTS[0]) == solo[(name, PROMPTS[0])]
    finally:
        s.terminate()


def test_hot_swap_under_load_fails_nothing(sanctum_bin, setup, tmp_path):
    s = server(sanctum_bin, setup, tmp_path / "server.log", "--lora", f"a={setup['a']}", "--lora", f"b={setup['b']}", "--admin",
               "--auth-token-file", str(setup["token"]), "--auth-loopback-bypass", "--max-seqs", "8")
    try:
        prompt = PROMPTS[2]
        old, new = stream_text(s.port, f"{MODEL}:a", prompt), stream_text(s.port, f"{MODEL}:b", prompt)
        assert old != new
        results, failures, swapped_at = [], [], []
        stop = threading.Event()

        def loop():
            while not stop.is_set():
                started = time.monotonic()
                try:
                    results.append((started, stream_text(s.port, f"{MODEL}:a", prompt)))
                except Exception as e:  # noqa: BLE001 - any failure is what the test counts
                    failures.append(repr(e))

        threads = [threading.Thread(target=loop) for _ in range(3)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        status, body = admin(s.port, {"action": "replace", "name": "a", "path": str(setup["b"])})
        swapped_at.append(time.monotonic())
        assert status == 200, body
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join(120)
        assert not failures, failures
        assert all(text in (old, new) for _, text in results), "an answer is neither adapter's"
        before = [text for started, text in results if started < swapped_at[0]]
        after = [text for started, text in results if started > swapped_at[0]]
        assert before and old in before, "no request ran on the old adapter before the swap"
        assert after and all(text == new for text in after), "a request that started after the swap ran on the old adapter"
    finally:
        s.terminate()


def test_bad_admin_requests_are_clear_and_keep_the_old_set(sanctum_bin, setup, tmp_path):
    s = server(sanctum_bin, setup, tmp_path / "server.log", "--lora", f"a={setup['a']}", "--admin", "--auth-token-file",
               str(setup["token"]), "--auth-loopback-bypass", "--max-loras", "2")
    try:
        before = stream_text(s.port, f"{MODEL}:a", PROMPTS[0])
        cases = [
            ({"action": "load", "name": "x", "path": str(setup["b"])}, None, 401, "auth-token-file"),
            ({"action": "load", "name": "x", "path": str(setup["b"])}, "wrong-token", 401, "auth-token-file"),
            ({"action": "fuse", "name": "a", "path": str(setup["b"])}, TOKEN, 400, "'action'"),
            ({"action": "load", "name": "x"}, TOKEN, 400, "'path' is required"),
            ({"action": "replace", "name": "a", "path": str(setup["bad"])}, TOKEN, 400, "another model"),
            ({"action": "replace", "name": "a", "path": str(setup["dora"])}, TOKEN, 400, "--adapter"),
            ({"action": "load", "name": "x", "path": str(setup["root"] / "missing")}, TOKEN, 400, "missing"),
            ({"action": "load", "name": "a", "path": str(setup["b"])}, TOKEN, 400, "already loaded"),
            ({"action": "unload", "name": "zzz"}, TOKEN, 404, "zzz"),
            ({"action": "load", "name": "bad:name", "path": str(setup["b"])}, TOKEN, 400, "':'"),
        ]
        for body, token, status, text in cases:
            got, answer = admin(s.port, body, token)
            assert got == status and text in answer["error"]["message"], (body, got, answer)
        assert admin(s.port, {"action": "load", "name": "b", "path": str(setup["b"])})[0] == 200
        got, answer = admin(s.port, {"action": "load", "name": "c", "path": str(setup["b"])})
        assert got == 400 and "--max-loras" in answer["error"]["message"], answer
        status, listing = admin(s.port)
        assert status == 200 and [e["name"] for e in listing["models"][MODEL]] == ["a", "b"]
        assert stream_text(s.port, f"{MODEL}:a", PROMPTS[0]) == before, "a refused request changed the adapter that serves"
        assert admin(s.port, {"action": "unload", "name": "b"})[0] == 200
        status, _, _ = sh.request(s.port, "POST", "/v1/chat/completions", sh.chat_body(f"{MODEL}:b", "hi", max_tokens=2))
        assert status == 404
    finally:
        s.terminate()


def test_sighup_rereads_the_lora_list(sanctum_bin, setup, tmp_path):
    listing = tmp_path / "loras.txt"
    listing.write_text(f"# adapters\na={setup['a']}\n")
    s = server(sanctum_bin, setup, tmp_path / "server.log", "--lora-list", str(listing))
    try:
        ids = lambda: {c["id"] for c in json.loads(sh.request(s.port, "GET", "/v1/models")[2])["data"]}  # noqa: E731
        assert ids() == {MODEL, f"{MODEL}:a"}
        listing.write_text(f"b={setup['b']}\n")
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 30
        while ids() != {MODEL, f"{MODEL}:b"} and time.time() < deadline:
            time.sleep(0.1)
        assert ids() == {MODEL, f"{MODEL}:b"}
        listing.write_text(f"b={setup['b']}\nc={setup['bad']}\n")  # one bad adapter: the whole change is refused
        s.proc.send_signal(signal.SIGHUP)
        deadline = time.time() + 30
        while "adapter list refused" not in s.logs() and time.time() < deadline:
            time.sleep(0.1)
        assert "adapter list refused" in s.logs()
        assert ids() == {MODEL, f"{MODEL}:b"}
    finally:
        s.terminate()


@pytest.mark.parametrize("flags,message", [
    (["--lora", "d={dora}"], "--adapter"),
    (["--lora", "a={a}", "--lora", "b={b}", "--max-loras", "1"], "--max-loras 1"),
    (["--lora", "other:a={a}"], "no --model is named 'other'"),
    (["--lora", "a={bad}"], "another model"),
    (["--lora", "a={a}", "--max-lora-rank", "2"], "--max-lora-rank"),
])
def test_lora_flag_mistakes_stop_start_up(sanctum_bin, setup, flags, message):
    flags = [f.format(dora=setup["dora"], a=setup["a"], b=setup["b"], bad=setup["bad"]) for f in flags]
    r = subprocess.run([sanctum_bin, "serve", "--model", f"{MODEL}={setup['model']}", "--port", str(sh.free_port()), *flags],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "listening" not in r.stderr
    assert message in r.stderr, r.stderr


def test_lora_manifest_refuses_a_tampered_adapter_and_keeps_serving(sanctum_bin, setup, tmp_path):
    import shutil
    dirs = {}
    for name in ("a", "b"):
        dirs[name] = tmp_path / name
        shutil.copytree(setup[name], dirs[name])
        r = subprocess.run([sanctum_bin, "manifest", "generate", str(dirs[name]), "--out", str(dirs[name] / "adapter.sha256")],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
    unlisted = tmp_path / "unlisted"
    shutil.copytree(setup["b"], unlisted)  # no adapter.sha256 at all
    data = bytearray((dirs["b"] / "adapters.safetensors").read_bytes())
    data[-1] ^= 1
    (dirs["b"] / "adapters.safetensors").write_bytes(bytes(data))
    s = server(sanctum_bin, setup, tmp_path / "server.log", "--lora", f"a={dirs['a']}", "--lora-manifest", "--admin", "--auth-token-file",
               str(setup["token"]), "--auth-loopback-bypass")
    try:
        before = stream_text(s.port, f"{MODEL}:a", PROMPTS[1])
        for path, text in ((dirs["b"], "adapters.safetensors"), (unlisted, "adapter.sha256")):
            status, answer = admin(s.port, {"action": "replace", "name": "a", "path": str(path)})
            assert status == 400 and text in answer["error"]["message"], answer
        assert stream_text(s.port, f"{MODEL}:a", PROMPTS[1]) == before
    finally:
        s.terminate()
