"""Guardian against a real seat: a busy seat (long generations in flight) never trips it, a stopped
seat trips it after exactly three failed probes and the restart command runs once."""
from __future__ import annotations

import json
import threading
import urllib.request

import pytest
from deploy_harness import Seat, run_script


@pytest.fixture
def full_seat(sanctum_bin, tmp_path):
    """A seat whose running batch holds three sequences: three long generations fill it."""
    s = Seat(sanctum_bin, tmp_path / "full_seat.log", extra=["--max-queue", "16", "--max-seqs", "3"])
    yield s
    s.stop()


def guardian(seat_url: str, state, restarts, alerts, *extra: str):
    return run_script("sanctum-guardian", "--url", seat_url, "--state-dir", str(state),
                      "--restart-cmd", f"echo restart >> {restarts}", "--alert-cmd", f"cat >> {alerts}", *extra)


def lines(path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def long_generation(url: str, done: list) -> None:
    body = json.dumps({"prompt": "Count", "max_tokens": 4000, "temperature": 0, "ignore_eos": True}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        done.append(json.loads(r.read())["usage"]["completion_tokens"])


def test_busy_seat_does_not_trip_the_guardian(full_seat, tmp_path):
    seat = full_seat
    done: list = []
    load = [threading.Thread(target=long_generation, args=(seat.url, done)) for _ in range(3)]
    for t in load:
        t.start()
    try:
        # The load is real: a chat request (what a naive health probe would send) cannot get
        # through within 1 s, because the running batch is full and it waits in the queue.
        rc, out, _ = run_script("sanctum-canary", "--url", seat.url, "--state-dir", str(tmp_path / "canary"),
                                "--timeout", "1")
        assert rc == 1 and "timed out" in out[0]["error"], out
        latencies = []
        for _ in range(4):
            rc, out, err = guardian(seat.url, tmp_path / "g", tmp_path / "restarts", tmp_path / "alerts", "--timeout", "2")
            assert rc == 0, (out, err)
            assert out[0]["outcome"] == "ok" and out[0]["latency_ms"] < 2000
            latencies.append(out[0]["latency_ms"])
        print(f"\nguardian GET /v1/models under 3 in-flight 4000-token generations: {latencies} ms")
        assert len(done) < len(load), "every generation finished before the probes ran: the seat was not busy"
    finally:
        for t in load:
            t.join()
    assert done == [4000, 4000, 4000]
    assert lines(tmp_path / "restarts") == []
    assert json.loads((tmp_path / "g/guardian.json").read_text())["consecutive_failures"] == 0


def test_stopped_seat_trips_after_exactly_three_failures(seat, tmp_path):
    restarts, alerts, state = tmp_path / "restarts", tmp_path / "alerts", tmp_path / "g"
    rc, out, _ = guardian(seat.url, state, restarts, alerts)
    assert rc == 0 and out[0]["outcome"] == "ok"
    seat.stop()

    outcomes = []
    for n in range(1, 4):
        rc, out, _ = guardian(seat.url, state, restarts, alerts, "--timeout", "1")
        assert rc == 1
        outcomes.append(out[0]["outcome"])
        assert len(lines(restarts)) == (1 if n == 3 else 0), f"after failure {n}"
    assert outcomes == ["probe_failed", "probe_failed", "restarted"]
    assert out[0]["restart_rc"] == 0 and out[0]["level"] == "error"
    assert len(lines(alerts)) == 1 and "restarted" in json.loads(lines(alerts)[0])["summary"]

    # The count starts afresh after a restart: the next failure is number one, not a second restart.
    rc, out, _ = guardian(seat.url, state, restarts, alerts, "--timeout", "1")
    assert out[0]["outcome"] == "probe_failed" and out[0]["consecutive_failures"] == 1
    assert len(lines(restarts)) == 1


def test_recovery_resets_the_count(seat, tmp_path):
    state = tmp_path / "g"
    (state).mkdir()
    (state / "guardian.json").write_text(json.dumps({"consecutive_failures": 2}))
    rc, out, _ = guardian(seat.url, state, tmp_path / "r", tmp_path / "a")
    assert rc == 0 and out[0]["recovered_after_failures"] == 2
    assert json.loads((state / "guardian.json").read_text())["consecutive_failures"] == 0


def test_failed_restart_command_is_reported(tmp_path):
    url = "http://127.0.0.1:9"  # discard port: nothing listens
    for _ in range(3):
        rc, out, _ = run_script("sanctum-guardian", "--url", url, "--state-dir", str(tmp_path / "g"), "--timeout", "1",
                                "--fails-before-restart", "3", "--restart-cmd", "exit 7",
                                "--alert-cmd", f"cat >> {tmp_path / 'alerts'}")
    assert out[0]["outcome"] == "restart_failed" and out[0]["restart_rc"] == 7
    assert "failed (rc 7)" in json.loads(lines(tmp_path / "alerts")[0])["summary"]


def test_missing_state_dir_is_a_configuration_error():
    rc, out, _ = run_script("sanctum-guardian", "--url", "http://127.0.0.1:9")
    assert rc == 2 and out[0]["outcome"] == "config_error" and "state directory" in out[0]["error"]
