"""Canary against a real seat: the default model answers the 2+2 question with "4"; a wrong
expectation alerts on the second consecutive miss, stays quiet during the cooldown, alerts again
after it, and a correct answer afterwards sends one recovery notice. It has no way to restart."""
from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from deploy_harness import run_script


def canary(url, state, alerts, *extra):
    return run_script("sanctum-canary", "--url", url, "--state-dir", str(state), "--alert-cmd", f"cat >> {alerts}",
                      *extra)


def alert_summaries(path) -> list[str]:
    return [json.loads(line)["summary"] for line in path.read_text().splitlines()] if path.exists() else []


def test_default_model_answers_the_canary(seat, tmp_path):
    rc, out, _ = canary(seat.url, tmp_path / "c", tmp_path / "alerts")
    assert rc == 0, out
    assert out[0]["outcome"] == "ok" and out[0]["answer"].strip() == "4"
    assert out[0]["question"] == "What is 2+2? Respond with only the number."


def test_two_misses_alert_once_then_cooldown(seat, tmp_path):
    state, alerts = tmp_path / "c", tmp_path / "alerts"
    wrong = ("--expect", "5", "--cooldown", "2")
    rc, out, _ = canary(seat.url, state, alerts, *wrong)
    assert rc == 1 and out[0]["outcome"] == "miss" and alert_summaries(alerts) == []
    rc, out, _ = canary(seat.url, state, alerts, *wrong)
    assert out[0]["outcome"] == "alerted" and out[0]["consecutive_misses"] == 2
    assert len(alert_summaries(alerts)) == 1 and "missed 2 times" in alert_summaries(alerts)[0]
    rc, out, _ = canary(seat.url, state, alerts, *wrong)
    assert out[0]["outcome"] == "miss_in_cooldown" and 0 < out[0]["cooldown_left_s"] <= 2
    assert len(alert_summaries(alerts)) == 1

    time.sleep(2.1)
    rc, out, _ = canary(seat.url, state, alerts, *wrong)
    assert out[0]["outcome"] == "alerted" and out[0]["consecutive_misses"] == 4
    assert len(alert_summaries(alerts)) == 2

    rc, out, _ = canary(seat.url, state, alerts)  # right expectation again
    assert rc == 0 and out[0]["previous_misses"] == 4
    assert alert_summaries(alerts)[-1] == "canary recovered"
    rc, out, _ = canary(seat.url, state, alerts)
    assert rc == 0 and len(alert_summaries(alerts)) == 3  # recovery is announced once


def test_default_cooldown_is_thirty_minutes(seat, tmp_path):
    state, alerts = tmp_path / "c", tmp_path / "alerts"
    for _ in range(2):
        canary(seat.url, state, alerts, "--expect", "5")
    rc, out, _ = canary(seat.url, state, alerts, "--expect", "5")
    assert out[0]["outcome"] == "miss_in_cooldown" and 1790 < out[0]["cooldown_left_s"] <= 1800


def test_unreachable_seat_counts_as_a_miss_and_webhook_failure_is_logged(tmp_path):
    url = "http://127.0.0.1:9"
    run_script("sanctum-canary", "--url", url, "--state-dir", str(tmp_path), "--timeout", "1")
    rc, out, _ = run_script("sanctum-canary", "--url", url, "--state-dir", str(tmp_path), "--timeout", "1",
                            "--alert-webhook", "http://127.0.0.1:9/hook")
    assert rc == 1 and out[0]["outcome"] == "alerted"
    assert "webhook_error" in out[0]["alert"]


def test_canary_cannot_restart_anything():
    rc, _, err = run_script("sanctum-canary", "--restart-cmd", "true")
    assert rc == 2 and "unrecognized arguments: --restart-cmd" in err


def test_question_and_answer_are_configurable(seat, tmp_path):
    rc, out, _ = canary(seat.url, tmp_path / "c", tmp_path / "alerts", "--question", "What is the capital of France?",
                        "--expect", "Paris")
    assert rc == 0 and "Paris" in out[0]["answer"]


def test_alert_reaches_a_webhook(seat, tmp_path):
    received = []

    class Hook(BaseHTTPRequestHandler):
        def do_POST(self):
            received.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        hook = f"http://127.0.0.1:{server.server_address[1]}/notify"
        for _ in range(2):
            rc, out, _ = run_script("sanctum-canary", "--url", seat.url, "--state-dir", str(tmp_path), "--expect", "5",
                                    "--alert-webhook", hook)
    finally:
        server.shutdown()
    assert out[0]["alert"] == {"webhook_status": 204}
    assert len(received) == 1 and received[0]["watcher"] == "canary" and received[0]["answer"].strip() == "4"
