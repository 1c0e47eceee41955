"""Phase shutdown: SIGTERM drains in-flight requests (new ones get 503), then the process exits 0."""
import json
import signal
import threading
import time

import server_harness as sh
from server_harness import MODEL


def test_sigterm_when_idle_exits_zero(start_server):
    s = start_server()
    t0 = time.time()
    assert s.terminate(signal.SIGTERM) == 0
    assert time.time() - t0 < 5
    assert any(r.get("msg") == "stopped" for r in s.log_records())


def test_sigint_exits_zero(start_server):
    s = start_server()
    assert s.terminate(signal.SIGINT) == 0


def test_sigterm_during_a_stream_lets_it_finish(start_server):
    s = start_server("--drain-timeout", "60")
    stream = sh.SseStream(s.port, "/v1/chat/completions", sh.chat_body(MODEL, stream=True, max_tokens=300, ignore_eos=True))
    events = stream.events()
    next(events), next(events)
    # A second keep-alive client that asks after the signal must be refused with 503.
    import http.client
    other = http.client.HTTPConnection("127.0.0.1", s.port, timeout=10)
    other.request("GET", "/health")
    other.getresponse().read()
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    try:
        other.request("POST", "/v1/chat/completions", body=json.dumps(sh.chat_body(MODEL)),
                      headers={"Content-Type": "application/json"})
        r = other.getresponse()
        refused = r.status
        r.read()
    except (ConnectionError, http.client.HTTPException):
        refused = "closed"
    rest = list(events)
    assert rest[-1] == "[DONE]"
    finishes = [json.loads(e)["choices"][0]["finish_reason"] for e in rest[:-1]]
    assert finishes[-1] == "length"
    assert refused in (503, "closed")
    s.proc.wait(30)
    assert s.proc.returncode == 0


def test_drain_timeout_cuts_a_long_stream_and_still_exits_zero(start_server):
    s = start_server("--drain-timeout", "0.5")
    stream = sh.SseStream(s.port, "/v1/chat/completions", sh.chat_body(MODEL, stream=True, max_tokens=4000, ignore_eos=True))
    events = stream.events()
    next(events), next(events)
    t0 = time.time()
    s.proc.send_signal(signal.SIGTERM)
    s.proc.wait(20)
    assert s.proc.returncode == 0 and time.time() - t0 < 10
    stream.close()
