"""`sanctum route` defences against fault-injecting upstreams: the circuit breaker opens and later
closes; budgets answer 429 with Retry-After per client identity and per backend; degenerate,
bad-UTF-8 and empty answers are refused and their upstream skipped; a canary-failing upstream is
skipped until it recovers; bearer tokens name the client; the config check; metrics and models."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

import pytest

import router_harness as rh
import server_harness as sh


def test_breaker_opens_after_consecutive_failures_and_closes_after_a_good_probe(router, faults):
    sick, spare = faults("status"), faults("ok", answer="from the spare")
    r = router({"backends": [rh.backend("b", ["m"], sick.url, [spare.url], breaker={"failures": 2, "cooldown_s": 1.0})]})
    for _ in range(2):
        status, headers, _ = rh.chat(r.port, "m")
        assert status == 200 and headers["x-sanctum-upstream"] == "b#1"
    assert sick.completions() == 2
    assert r.metric("sanctum_router_breaker_state", {"upstream": sick.url}) == 2  # open
    # While open the sick upstream is not even tried.
    for _ in range(3):
        assert rh.chat(r.port, "m")[0] == 200
    assert sick.completions() == 2
    sick.set(mode="ok", answer="healed")
    time.sleep(1.1)
    status, headers, body = rh.chat(r.port, "m")  # the half-open probe
    assert status == 200 and headers["x-sanctum-upstream"] == "b#0"
    assert body["choices"][0]["message"]["content"] == "healed"
    assert r.metric("sanctum_router_breaker_state", {"upstream": sick.url}) == 0
    assert r.metric("sanctum_router_breaker_transitions_total", {"upstream": sick.url, "state": "open"}) == 1
    assert r.metric("sanctum_router_breaker_transitions_total", {"upstream": sick.url, "state": "half_open"}) == 1
    assert r.metric("sanctum_router_breaker_transitions_total", {"upstream": sick.url, "state": "closed"}) == 1
    assert any(rec.get("state") == "open" for rec in r.records("circuit breaker"))


def test_a_failed_half_open_probe_reopens_the_breaker(router, faults):
    sick, spare = faults("status"), faults("ok")
    r = router({"backends": [rh.backend("b", ["m"], sick.url, [spare.url], breaker={"failures": 1, "cooldown_s": 0.5})]})
    assert rh.chat(r.port, "m")[0] == 200
    time.sleep(0.6)
    assert rh.chat(r.port, "m")[0] == 200  # probe failed, spare answered
    assert sick.completions() == 2
    assert r.metric("sanctum_router_breaker_state", {"upstream": sick.url}) == 2
    assert r.metric("sanctum_router_breaker_transitions_total", {"upstream": sick.url, "state": "open"}) == 2


def write_token(path, token: str) -> str:
    path.write_text(token + "\n")
    os.chmod(path, 0o600)
    return str(path)


def test_client_budget_is_per_identity_with_retry_after(router, faults, tmp_path):
    up = faults("ok")
    r = router({"listen": {"auth": {"tokens": [{"name": "alice", "file": write_token(tmp_path / "alice", "tok-alice")},
                                               {"name": "bob", "file": write_token(tmp_path / "bob", "tok-bob")}]}},
                "budgets": {"client": {"requests": 2, "window_s": 30}, "clients": {"bob": {"requests": 3}}},
                "backends": [rh.backend("b", ["m"], up.url)]})
    alice = {"Authorization": "Bearer tok-alice"}
    bob = {"Authorization": "Bearer tok-bob"}
    r.admin_headers = bob
    assert [rh.chat(r.port, "m", headers=alice)[0] for _ in range(2)] == [200, 200]
    status, headers, body = rh.chat(r.port, "m", headers=alice, request_id="alice-3")
    assert status == 429 and body["error"]["code"] == "budget_exceeded"
    assert 1 <= int(headers["retry-after"]) <= 30
    assert r.access("alice-3")["identity"] == "alice"
    assert [rh.chat(r.port, "m", headers=bob)[0] for _ in range(4)] == [200, 200, 200, 429]  # bob's own, larger budget
    assert up.completions() == 5  # refused requests never reached the upstream
    assert r.metric("sanctum_router_budget_rejections_total", {"scope": "client"}) == 2
    assert sh.request(r.port, "GET", "/metrics")[0] == 401  # the traffic picture needs a token too
    # No token / a wrong token: 401, and that does not spend anyone's budget.
    assert rh.chat(r.port, "m")[0] == 401
    status, headers, _ = rh.chat(r.port, "m", headers={"Authorization": "Bearer nope"})
    assert status == 401 and "invalid_token" in headers["www-authenticate"]
    assert sh.request(r.port, "GET", "/health")[0] == 200  # liveness stays open


def test_token_budget_counts_usage_and_backend_budget_protects_the_backend(router, faults):
    up = faults("ok")  # every answer reports usage.total_tokens = 12
    r = router({"budgets": {"client": {"tokens": 20, "window_s": 30}},
                "backends": [rh.backend("b", ["m"], up.url)]})
    assert [rh.chat(r.port, "m")[0] for _ in range(3)] == [200, 200, 429]  # 12, 24 >= 20, refused
    capped = faults("ok")
    r2 = router({"backends": [rh.backend("cloud", ["c"], capped.url, budget={"requests": 1, "window_s": 30})]})
    assert rh.chat(r2.port, "c")[0] == 200
    status, headers, body = rh.chat(r2.port, "c")
    assert status == 429 and int(headers["retry-after"]) >= 1 and "every backend" in body["error"]["message"]
    assert r2.metric("sanctum_router_budget_rejections_total", {"scope": "backend", "backend": "cloud"}) == 1


@pytest.mark.parametrize("mode,detector", [("repeat", "repetition"), ("bad_utf8", "utf8"), ("empty", "empty")])
def test_garbage_is_refused_and_the_upstream_skipped(router, faults, mode, detector):
    bad, good = faults(mode), faults("ok", answer="a sane answer")
    r = router({"backends": [rh.backend("b", ["m"], bad.url, [good.url], quality={"recovery_s": 30})]})
    status, headers, body = rh.chat(r.port, "m")
    assert status == 200 and body["choices"][0]["message"]["content"] == "a sane answer"
    assert headers["x-sanctum-upstream"] == "b#1"
    assert r.metric("sanctum_router_quality_flags_total", {"upstream": bad.url, "detector": detector}) == 1
    assert r.metric("sanctum_router_upstream_degraded", {"upstream": bad.url}) == 1
    for _ in range(3):
        assert rh.chat(r.port, "m")[0] == 200
    assert bad.completions() == 1  # skipped while degraded
    assert any(rec.get("detector") == detector for rec in r.records("upstream degraded: response failed a quality check"))


def test_a_degenerate_stream_is_cut_with_an_error_event(router, faults):
    bad, good = faults("repeat"), faults("ok")
    r = router({"backends": [rh.backend("b", ["m"], bad.url, [good.url])]})
    status, _, events = rh.stream_events(r.port, "m")
    assert status == 200
    assert json.loads(events[-1])["error"]["code"] == "degenerate_output_repetition"
    content = "".join(json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1])
    assert content.count("190/ / ") < 12  # cut as soon as the loop was certain, not relayed to the end
    status, headers, events = rh.stream_events(r.port, "m")  # the next one avoids it
    assert status == 200 and headers["x-sanctum-upstream"] == "b#1" and events[-1] == "[DONE]"


def test_a_quality_degraded_upstream_comes_back_after_recovery(router, faults):
    bad, good = faults("empty"), faults("ok")
    r = router({"backends": [rh.backend("b", ["m"], bad.url, [good.url], quality={"recovery_s": 0.5})]})
    assert rh.chat(r.port, "m")[2]["choices"][0]["message"]["content"] == "The answer is 4."
    bad.set(mode="ok", answer="recovered")
    time.sleep(0.6)
    status, headers, body = rh.chat(r.port, "m")
    assert headers["x-sanctum-upstream"] == "b#0" and body["choices"][0]["message"]["content"] == "recovered"


def test_canary_failing_upstream_is_skipped_until_its_canary_passes(router, faults):
    liar, honest = faults("ok", answer="from the liar", canary_answer="5"), faults("ok", answer="from the honest one")
    r = router({"backends": [rh.backend("b", ["m"], liar.url, [honest.url],
                                        canary={"interval_s": 0.2, "prompt": "What is 2+2?", "expect": "4"})]})
    r.wait_metric("sanctum_router_upstream_degraded", {"upstream": liar.url}, 1)
    served_before = liar.completions()
    for _ in range(3):
        status, headers, body = rh.chat(r.port, "m")
        assert status == 200 and headers["x-sanctum-upstream"] == "b#1"
    assert liar.completions() == served_before
    assert r.metric("sanctum_router_canary_checks_total", {"upstream": liar.url, "result": "fail"}) >= 1
    assert liar.stats().get("canary /v1/chat/completions", 0) >= 1
    liar.set(canary_answer="It is 4.")
    r.wait_metric("sanctum_router_upstream_degraded", {"upstream": liar.url}, 0)
    status, headers, body = rh.chat(r.port, "m")
    assert headers["x-sanctum-upstream"] == "b#0" and body["choices"][0]["message"]["content"] == "from the liar"


def test_nothing_eligible_is_a_503_and_unknown_models_a_404(router, faults):
    bad = faults("empty")
    r = router({"aliases": {"smart": "m"}, "backends": [rh.backend("b", ["m"], bad.url)]})
    assert rh.chat(r.port, "m")[0] == 502        # its only upstream answered garbage
    status, _, body = rh.chat(r.port, "m")       # ... and is now skipped
    assert status == 503 and body["error"]["code"] == "no_upstream"
    status, _, body = rh.chat(r.port, "other")
    assert status == 404 and body["error"]["code"] == "model_not_found"
    status, _, body = sh.request(r.port, "POST", "/v1/chat/completions", b"{not json")[0:3]
    assert status == 400


def test_unknown_routes_are_404_and_wrong_methods_405(router, faults):
    r = router({"backends": [rh.backend("b", ["m"], faults("ok").url)]})
    status, _, raw = sh.request(r.port, "GET", "/v2/nothing")
    assert status == 404 and json.loads(raw)["error"]["type"] == "invalid_request_error"
    status, headers, _ = sh.request(r.port, "GET", "/v1/chat/completions")
    assert status == 405 and headers["allow"] == "POST"
    status, headers, _ = sh.request(r.port, "POST", "/health")
    assert status == 405 and headers["allow"] == "GET"


def test_aliases_rewrite_the_model_and_models_are_listed(router, faults):
    up = faults("ok")
    r = router({"aliases": {"gpt-4o": "m"}, "backends": [rh.backend("b", ["m"], up.url, tier="council-secure")]})
    status, _, body = rh.chat(r.port, "gpt-4o")
    assert status == 200 and body["model"] == "m"  # the upstream saw the served name
    status, _, payload = sh.request(r.port, "GET", "/v1/models")
    ids = {m["id"]: m for m in json.loads(payload)["data"]}
    assert set(ids) == {"m", "gpt-4o"} and ids["gpt-4o"]["alias_of"] == "m"
    assert sh.request(r.port, "GET", "/v1/models/gpt-4o")[0] == 200
    assert sh.request(r.port, "GET", "/v1/models/none")[0] == 404
    status, _, payload = sh.request(r.port, "GET", "/health/upstreams")
    b = json.loads(payload)["backends"][0]
    assert b["tier"] == "council-secure" and b["upstreams"][0]["breaker"] == "closed"


def test_latency_ema_prefers_the_faster_equivalent_and_flags_the_slow_one(router, faults):
    slow, fast = faults("ok", answer="slow"), faults("ok", answer="fast")
    slow.set(delay=0.15)
    r = router({"backends": [rh.backend("east", ["m"], slow.url, latency={"slow_factor": 3}),
                             rh.backend("west", ["m"], fast.url, latency={"slow_factor": 3})]})
    answers = [rh.chat(r.port, "m")[2]["choices"][0]["message"]["content"] for _ in range(6)]
    assert answers[-3:] == ["fast", "fast", "fast"]  # once both are measured the faster one leads
    assert r.metric("sanctum_router_upstream_ema_seconds", {"upstream": slow.url, "kind": "ttft"}) > 0.1
    assert r.metric("sanctum_router_upstream_slow", {"upstream": slow.url}) == 1
    assert r.metric("sanctum_router_upstream_slow", {"upstream": fast.url}) == 0


def test_health_probes_mark_a_dead_upstream_and_metrics_show_it(router, faults):
    up = faults("ok")
    r = router({"backends": [rh.backend("b", ["m"], up.url, [rh.dead_url()])]})
    r.wait_metric("sanctum_router_backend_healthy", {"backend": "b"}, 1)
    text = r.metrics()
    assert sh.metric_value(text, "sanctum_router_upstream_healthy", {"upstream": up.url}) == 1
    dead = [u for u in r.config_dict()["backends"][0]["fallback_urls"]][0]
    r.wait_metric("sanctum_router_upstream_healthy", {"upstream": dead}, 0)
    up.close()
    r.wait_metric("sanctum_router_backend_healthy", {"backend": "b"}, 0)


def test_check_validates_without_starting(sanctum_bin, tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text("backends:\n  - name: coder\n    tier: coder\n    models: [qwen]\n    url: http://127.0.0.1:9\n")
    r = subprocess.run([sanctum_bin, "route", "--check", str(good)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "OK" in r.stdout and "coder (tier coder)" in r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("backends:\n  - name: coder\n    models: [qwen]\n    url: http://127.0.0.1:9\n    timeouts: {conect_s: 1}\n")
    r = subprocess.run([sanctum_bin, "route", "--check", str(bad)], capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "backends[0].timeouts.conect_s: unknown key" in r.stderr
    r = subprocess.run([sanctum_bin, "route", "--config", str(tmp_path / "missing.yaml")], capture_output=True, text=True, timeout=30)
    assert r.returncode != 0 and "missing.yaml" in r.stderr


def test_the_documented_example_config_is_valid(sanctum_bin):
    example = rh.sh.ROOT / "docs" / "router.example.yaml"
    env = {**os.environ, "COUNCIL_ROUTER_KEY": "k1", "CLOUD_API_KEY": "k2"}
    r = subprocess.run([sanctum_bin, "route", "--check", str(example)], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 0, r.stderr
    assert "5 backends, 6 upstream URLs, 2 aliases" in r.stdout
    env.pop("CLOUD_API_KEY")
    r = subprocess.run([sanctum_bin, "route", "--check", str(example)], capture_output=True, text=True, timeout=30, env=env)
    assert r.returncode == 2 and "CLOUD_API_KEY is not set" in r.stderr


def test_sigterm_lets_an_in_flight_request_finish_then_exits_zero(router, faults):
    slow = faults("ok", answer="worth the wait")
    slow.set(delay=1.0)
    r = router({"backends": [rh.backend("b", ["m"], slow.url)]})
    result = {}

    def call():
        result["reply"] = rh.chat(r.port, "m")

    t = threading.Thread(target=call)
    t.start()
    time.sleep(0.4)
    r.proc.send_signal(signal.SIGTERM)
    t.join(10)
    status, _, body = result["reply"]
    assert status == 200 and body["choices"][0]["message"]["content"] == "worth the wait"
    assert r.proc.wait(10) == 0
    assert r.records("stopped")
