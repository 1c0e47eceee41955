"""Phase deep health: a bounded one-token generation through the queue."""
import json

import server_harness as sh
from server_harness import MODEL


def test_deep_health_runs_one_token_per_model(server):
    status, _, body = sh.request(server.port, "GET", "/health/deep", timeout=30)
    assert status == 200
    data = json.loads(body)
    assert data["status"] == "ok"
    assert data["models"][MODEL]["status"] == "ok"


def test_deep_health_is_get_only(server):
    status, headers, body = sh.request(server.port, "POST", "/health/deep", body={})
    assert status == 405
    assert headers["allow"] == "GET"
    assert json.loads(body)["error"]["code"] == "method_not_allowed"
