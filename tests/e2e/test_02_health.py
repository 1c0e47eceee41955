"""Phase health: liveness, model list and metrics answer at once, even with a long generation in
flight (the guardian lesson: a probe must never queue behind inference)."""
import json
import time

import server_harness as sh
from server_harness import MODEL


def test_health_is_ok_json(server):
    status, headers, body = sh.request(server.port, "GET", "/health")
    assert status == 200
    health = json.loads(body)
    assert health["status"] == "ok"
    assert set(health) == {"status", "version", "commit", "device", "memory"}  # test_13_version and test_22_memory_plan check the values
    assert headers["content-type"] == "application/json"


def test_every_response_carries_a_request_id_and_keeps_a_plain_one(server):
    _, headers, _ = sh.request(server.port, "GET", "/health")
    assert headers["x-request-id"].startswith("req-")
    _, headers, _ = sh.request(server.port, "GET", "/health", headers={"X-Request-Id": "probe-42"})
    assert headers["x-request-id"] == "probe-42"


def test_keep_alive_serves_several_requests_on_one_connection(server):
    import http.client
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for _ in range(3):
        conn.request("GET", "/health")
        r = conn.getresponse()
        assert r.status == 200 and r.getheader("Connection") == "keep-alive"
        r.read()
    conn.close()


def _start_long_stream(server):
    stream = sh.SseStream(server.port, "/v1/chat/completions",
                          sh.chat_body(MODEL, stream=True, max_tokens=4000, ignore_eos=True))
    events = stream.events()
    next(events)  # role chunk
    next(events)  # first token: the worker is busy now
    return stream


def test_health_models_and_metrics_do_not_wait_on_a_running_generation(server):
    stream = _start_long_stream(server)
    try:
        for path in ["/health", "/v1/models", "/metrics"]:
            t0 = time.perf_counter()
            status, _, _ = sh.request(server.port, "GET", path, timeout=5)
            elapsed = time.perf_counter() - t0
            assert status == 200, path
            assert elapsed < 0.25, f"{path} took {elapsed * 1000:.0f} ms with a generation in flight"
    finally:
        stream.close()


def test_access_log_has_one_json_line_per_request(server):
    sh.request(server.port, "GET", "/health", headers={"X-Request-Id": "log-check-1"})
    time.sleep(0.1)
    lines = [r for r in server.log_records() if r.get("msg") == "access" and r.get("request_id") == "log-check-1"]
    assert len(lines) == 1
    rec = lines[0]
    assert rec["route"] == "/health" and rec["status"] == "200" and rec["client"].startswith("127.0.0.1:")
    assert "duration_ms" in rec and "completion_tokens" in rec
