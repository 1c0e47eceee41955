"""Bearer tokens on the plain listener: fail closed with 401, WWW-Authenticate: Bearer and an OpenAI
error body; the right token gets through; loopback clients skip the check only when the operator
says so; GET /health stays open for liveness probes; the token file must be private."""
from __future__ import annotations

import json
import secrets
import subprocess
import time

import pytest

import server_harness as sh
import tls_helpers as th
from server_harness import MODEL

TOKEN = secrets.token_hex(32)


@pytest.fixture(scope="module")
def token_file(tmp_path_factory):
    return th.write_private(tmp_path_factory.mktemp("auth") / "token", TOKEN + "\n")


@pytest.fixture(scope="module")
def guarded(sanctum_bin, tiny_model, token_file, tmp_path_factory):
    s = th.Serve(sanctum_bin, tiny_model, tmp_path_factory.mktemp("auth-logs") / "server.log",
                 ["--auth-token-file", str(token_file)])
    yield s
    s.terminate()


def assert_401(status, headers, body):
    assert status == 401
    assert headers["www-authenticate"].startswith("Bearer")
    err = json.loads(body)["error"]
    assert err["type"] == "invalid_request_error" and err["code"] == "invalid_api_key" and err["message"]


def test_a_missing_token_is_401_with_www_authenticate(guarded):
    assert_401(*sh.request(guarded.port, "GET", "/v1/models"))
    assert_401(*sh.request(guarded.port, "POST", "/v1/chat/completions", sh.chat_body(MODEL)))


def test_a_wrong_token_is_401(guarded):
    for value in ["Bearer " + TOKEN[:-1] + ("0" if TOKEN[-1] != "0" else "1"), "Bearer " + TOKEN + "x", "Bearer x",
                  "Basic " + TOKEN, TOKEN, "Bearer"]:
        status, headers, body = sh.request(guarded.port, "GET", "/v1/models", headers={"Authorization": value})
        assert_401(status, headers, body)
    status, headers, _ = sh.request(guarded.port, "GET", "/v1/models", headers={"Authorization": "Bearer nope"})
    assert 'error="invalid_token"' in headers["www-authenticate"]


def test_the_right_token_is_200_for_every_route(guarded):
    auth = {"Authorization": "Bearer " + TOKEN}
    for path in ["/v1/models", "/metrics", "/health/deep"]:
        status, _, _ = sh.request(guarded.port, "GET", path, headers=auth)
        assert status == 200, path
    status, _, _ = sh.request(guarded.port, "GET", "/v1/models", headers={"Authorization": "bearer  " + TOKEN + " "})
    assert status == 200
    status, _, body = sh.request(guarded.port, "POST", "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=2), headers=auth)
    assert status == 200 and json.loads(body)["choices"]


def test_the_openai_sdk_authenticates_with_its_api_key(guarded):
    from openai import AuthenticationError, OpenAI
    ok = OpenAI(base_url=f"http://127.0.0.1:{guarded.port}/v1", api_key=TOKEN, max_retries=0, timeout=30)
    assert ok.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "hi"}], max_tokens=2).choices
    bad = OpenAI(base_url=f"http://127.0.0.1:{guarded.port}/v1", api_key="wrong", max_retries=0, timeout=30)
    with pytest.raises(AuthenticationError):
        bad.models.list()


def test_health_stays_open_but_deep_health_and_metrics_do_not(guarded):
    status, _, body = sh.request(guarded.port, "GET", "/health")
    assert status == 200 and json.loads(body)["status"] == "ok"
    for path in ["/health/deep", "/metrics"]:
        assert_401(*sh.request(guarded.port, "GET", path))


def test_loopback_is_not_bypassed_without_the_flag(guarded):
    # Every test client here is on loopback: the 401s above are the proof; say it once more explicitly.
    status, _, _ = sh.request(guarded.port, "GET", "/v1/models")
    assert status == 401


def test_a_refusal_is_logged_and_counted(guarded):
    sh.request(guarded.port, "GET", "/v1/models", headers={"X-Request-Id": "auth-denied-1"})
    deadline = time.time() + 5
    while not guarded.access("auth-denied-1") and time.time() < deadline:
        time.sleep(0.05)
    rec = guarded.access("auth-denied-1")
    assert len(rec) == 1 and rec[0]["status"] == "401" and rec[0]["error"] == "missing bearer token"
    auth = {"Authorization": "Bearer " + TOKEN}
    _, _, metrics = sh.request(guarded.port, "GET", "/metrics", headers=auth)
    assert sh.metric_value(metrics.decode(), "sanctum_mlx_http_requests_total", {"route": "unauthorized", "status": "401"}) >= 1


def test_loopback_bypass_only_when_flagged(sanctum_bin, tiny_model, token_file, tmp_path):
    s = th.Serve(sanctum_bin, tiny_model, tmp_path / "bypass.log",
                 ["--auth-token-file", str(token_file), "--auth-loopback-bypass"])
    try:
        status, _, _ = sh.request(s.port, "GET", "/v1/models")
        assert status == 200
    finally:
        s.terminate()


def test_a_group_readable_token_file_is_refused(sanctum_bin, tiny_model, tmp_path):
    loose = th.write_private(tmp_path / "token", TOKEN, mode=0o640)
    port = sh.free_port()
    r = subprocess.run([sanctum_bin, "serve", "--model", str(tiny_model), "--port", str(port), "--auth-token-file",
                        str(loose)], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and "--auth-token-file" in r.stderr and "chmod 600" in r.stderr
    assert th.connect_refused(port)


def test_bypass_without_a_token_file_is_a_usage_error(sanctum_bin, tiny_model):
    r = subprocess.run([sanctum_bin, "serve", "--model", str(tiny_model), "--port", str(sh.free_port()),
                        "--auth-loopback-bypass"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--auth-token-file" in r.stderr
