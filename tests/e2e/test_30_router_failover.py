"""`sanctum route` in front of real `sanctum serve` processes and fault-injecting upstreams:
failover on connect error, 5xx and timeout; 4xx relayed without failover; a stream that dies after
the client got bytes ends with an error event and is not spliced onto another upstream; killing the
primary during a load run loses no request that had not started streaming."""
from __future__ import annotations

import json
import signal
import threading
import time

import pytest

import router_harness as rh
import server_harness as sh
from server_harness import MODEL


@pytest.fixture(scope="module")
def seats(sanctum_bin, tiny_model, tmp_path_factory):
    """Two real sanctum serve processes with the tiny model."""
    logs = tmp_path_factory.mktemp("router-seats")
    a = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], logs / "a.log", extra=["--threads", "1"])
    b = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], logs / "b.log", extra=["--threads", "1"])
    yield a, b
    a.terminate()
    b.terminate()


def completions_served(seat: sh.Server) -> int:
    text = sh.request(seat.port, "GET", "/metrics")[2].decode()
    return int(sh.metric_value(text, "sanctum_mlx_http_requests_total", {"route": "/v1/chat/completions"}))


def test_connect_error_fails_over_to_the_fallback_seat(router, seats, faults):
    a, _ = seats
    doomed = faults("ok")
    # Probes are rare here: the primary dies after its first probe and the router learns it from
    # the refused connection (a probe must never be needed for failover).
    r = router({"health": {"interval_s": 60, "timeout_s": 1},
                "backends": [rh.backend("coder", [MODEL], doomed.url, [a.base])]})
    r.wait_metric("sanctum_router_health_checks_total", {"upstream": doomed.url, "result": "ok"}, 1)
    doomed.close()
    status, headers, body = rh.chat(r.port, MODEL, request_id="fo-connect", max_tokens=3)
    assert status == 200, body
    assert body["choices"][0]["message"]["content"]
    assert headers["x-sanctum-upstream"] == "coder#1"
    log = r.access("fo-connect")
    assert log["upstream"] == a.base and log["backend"] == "coder" and log["identity"] == "ip:127.0.0.1"
    assert r.metric("sanctum_router_upstream_attempts_total", {"upstream": doomed.url, "outcome": "connect_error"}) == 1


@pytest.mark.parametrize("stream", [False, True])
def test_5xx_fails_over_and_the_client_never_sees_it(router, seats, faults, stream):
    a, _ = seats
    bad = faults("status")
    bad.set(status=503)
    r = router({"backends": [rh.backend("coder", [MODEL], bad.url, [a.base])]})
    if stream:
        status, headers, events = rh.stream_events(r.port, MODEL, max_tokens=3)
        assert status == 200 and events[-1] == "[DONE]"
        assert not any('"error"' in e for e in events)
    else:
        status, headers, body = rh.chat(r.port, MODEL, max_tokens=3)
        assert status == 200, body
    assert headers["x-sanctum-upstream"] == "coder#1"
    assert bad.completions() == 1
    assert r.metric("sanctum_router_failovers_total", {"upstream": bad.url, "reason": "http_5xx"}) == 1


def test_first_byte_timeout_fails_over(router, seats, faults):
    a, _ = seats
    stuck = faults("hang")
    r = router({"backends": [rh.backend("coder", [MODEL], stuck.url, [a.base], timeouts={"first_byte_s": 0.4})]})
    t0 = time.time()
    status, headers, body = rh.chat(r.port, MODEL, max_tokens=2)
    assert status == 200, body
    assert headers["x-sanctum-upstream"] == "coder#1"
    assert 0.35 < time.time() - t0 < 10
    assert r.metric("sanctum_router_failovers_total", {"upstream": stuck.url, "reason": "timeout"}) == 1


def test_every_upstream_timing_out_is_a_504(router, faults):
    stuck = faults("hang")
    r = router({"backends": [rh.backend("coder", ["m"], stuck.url, timeouts={"first_byte_s": 0.3})]})
    status, _, body = rh.chat(r.port, "m")
    assert status == 504 and body["error"]["code"] == "upstream_timeout"


@pytest.mark.parametrize("code", [400, 422, 429])
def test_4xx_is_relayed_without_failover(router, seats, faults, code):
    a, _ = seats
    picky = faults("status")
    picky.set(status=code)
    r = router({"backends": [rh.backend("coder", [MODEL], picky.url, [a.base])]})
    before = completions_served(a)
    status, _, body = rh.chat(r.port, MODEL, request_id=f"fo-{code}")
    assert status == code
    assert body["error"]["message"] == f"injected {code}"
    assert completions_served(a) == before  # the fallback never saw it
    assert r.access(f"fo-{code}")["failovers"] == "0"
    assert r.metric("sanctum_router_breaker_state", {"upstream": picky.url}) == 0  # a 4xx is not an outage


def test_a_real_seat_4xx_passes_through(router, seats):
    a, b = seats
    r = router({"backends": [rh.backend("coder", [MODEL], a.base, [b.base])]})
    before = completions_served(b)
    status, _, body = rh.chat(r.port, MODEL, temperature=-3)  # the seat rejects it
    assert status == 400 and body["error"]["type"] == "invalid_request_error"
    assert completions_served(b) == before


@pytest.mark.parametrize("mode", ["die", "stall"])
def test_a_stream_broken_after_the_first_byte_ends_with_an_error_event_not_a_splice(router, seats, faults, mode):
    a, _ = seats
    flaky = faults(mode)
    flaky.set(events=3)
    r = router({"backends": [rh.backend("coder", [MODEL], flaky.url, [a.base], timeouts={"idle_s": 0.5})]})
    before = completions_served(a)
    status, headers, events = rh.stream_events(r.port, MODEL, request_id=f"mid-{mode}")
    assert status == 200 and headers["x-sanctum-upstream"] == "coder#0"
    texts = [json.loads(e)["choices"][0]["delta"].get("content", "") for e in events[:-1]]
    assert "".join(texts) == "part0 part1 part2 "  # what the upstream sent, then nothing from anyone else
    last = json.loads(events[-1])
    assert last["error"]["code"] == "upstream_stream_broken"
    assert "[DONE]" not in events
    assert completions_served(a) == before  # never spliced onto the fallback
    assert r.metric("sanctum_router_upstream_attempts_total", {"upstream": flaky.url, "outcome": "stream_broken"}) == 1


def test_a_stall_before_any_event_still_fails_over(router, seats, faults):
    a, _ = seats
    flaky = faults("stall")
    flaky.set(events=0)
    # Chat streams start with a role event; completions streams have none, so nothing reaches the client.
    r = router({"backends": [rh.backend("coder", [MODEL], flaky.url, [a.base], timeouts={"idle_s": 0.4})]})
    status, _, payload = sh.request(r.port, "POST", "/v1/completions",
                                    {"model": MODEL, "prompt": "Hi", "max_tokens": 2, "stream": True, "temperature": 0})
    events = [l[6:] for l in payload.decode().split("\n") if l.startswith("data: ")]
    assert status == 200 and events[-1] == "[DONE]"
    assert not any('"error"' in e for e in events)


def test_killing_the_primary_during_load_loses_no_request_that_had_not_started_streaming(router, sanctum_bin, tiny_model, seats, tmp_path):
    _, b = seats
    primary = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], tmp_path / "primary.log", extra=["--threads", "1"])
    try:
        r = router({"backends": [rh.backend("coder", [MODEL], primary.base, [b.base], timeouts={"connect_s": 1, "idle_s": 5})]})
        results: list[tuple[str, object]] = []
        lock = threading.Lock()
        stop = time.time() + 3.0

        def worker(i: int) -> None:
            n = 0
            while time.time() < stop:
                n += 1
                if (i + n) % 2:
                    status, _, body = rh.chat(r.port, MODEL, f"load {i} {n}", max_tokens=4)
                    with lock:
                        results.append(("plain", status))
                else:
                    status, _, events = rh.stream_events(r.port, MODEL, f"load {i} {n}", max_tokens=4)
                    ok = status == 200 and events and events[-1] == "[DONE]"
                    broken = status == 200 and events and '"upstream_stream_broken"' in events[-1]
                    with lock:
                        results.append(("stream", "ok" if ok else "broken" if broken else f"bad {status} {events[-1:]}"))

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        primary.proc.send_signal(signal.SIGKILL)
        for t in threads:
            t.join(60)
        plain = [s for k, s in results if k == "plain"]
        streams = [s for k, s in results if k == "stream"]
        assert len(plain) >= 4 and len(streams) >= 4, results
        assert all(s == 200 for s in plain), results           # none lost: not streaming, so failed over
        assert all(s in ("ok", "broken") for s in streams), results  # broken only if it had started
        assert r.metric("sanctum_router_requests_total", {"upstream": b.base}) >= 1  # the fallback took over
    finally:
        primary.terminate()
