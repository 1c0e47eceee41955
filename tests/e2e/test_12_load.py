"""A short version of bench/server/load_test.py: concurrent streams for a few seconds while
/health is probed every 10 ms. p99 must stay under 25 ms, with no 5xx and no crash."""
import sys
from pathlib import Path

import server_harness as sh

sys.path.insert(0, str(sh.ROOT / "bench" / "server"))
from load_test import run_load  # noqa: E402


def test_health_p99_under_load_and_no_5xx(start_server):
    s = start_server("--max-queue", "16")
    result = run_load("127.0.0.1", s.port, "tiny", seconds=6, concurrency=4, max_tokens=32)
    assert result["5xx"] == 0, result
    assert not result["client_errors"], result
    assert result["requests"] > 0 and result["health_probes"] > 100, result
    assert result["health_p99_ms"] < 25, result
    assert sh.request(s.port, "GET", "/health")[0] == 200
    assert s.terminate() == 0
