"""Build identity on a live server: the sanctum_build_info gauge on /metrics and the version, commit
and device in /health all match `sanctum --version`; the router's /metrics carries the same gauge."""
import json
import re
import subprocess

from prometheus_client.parser import text_string_to_metric_families

import router_harness as rh
import server_harness as sh


def cli_identity(sanctum_bin):
    out = subprocess.run([sanctum_bin, "--version"], capture_output=True, text=True, check=True, timeout=60).stdout
    first, cuda = out.splitlines()[:2]
    m = re.match(r"^sanctum (\S+) \((\S+)\)$", first)
    assert m, first
    return {"version": m.group(1), "commit": m.group(2), "cuda": cuda.split()[1]}


def build_info(text):
    samples = [s for fam in text_string_to_metric_families(text) for s in fam.samples if s.name == "sanctum_build_info"]
    assert len(samples) == 1, samples
    return samples[0]


def test_build_info_gauge_matches_the_cli(server, sanctum_bin):
    status, _, body = sh.request(server.port, "GET", "/metrics")
    assert status == 200
    sample = build_info(body.decode())
    assert sample.value == 1
    assert sample.labels == cli_identity(sanctum_bin)


def test_health_reports_version_commit_and_device(server, sanctum_bin):
    status, _, body = sh.request(server.port, "GET", "/health")
    assert status == 200
    health = json.loads(body)
    ident = cli_identity(sanctum_bin)
    health.pop("memory")  # test_22_memory_plan checks it
    assert health == {"status": "ok", "version": ident["version"], "commit": ident["commit"], "device": "cpu"}


def test_explicit_device_cpu_serves_and_is_reported(start_server):
    s = start_server("--device", "cpu")
    health = json.loads(sh.request(s.port, "GET", "/health")[2])
    assert health["device"] == "cpu"
    status, _, body = sh.post_json(s.port, "/v1/chat/completions", sh.chat_body(sh.MODEL, max_tokens=2))
    assert status == 200, body
    starting = [r for r in s.log_records() if r.get("msg") == "starting"]
    assert len(starting) == 1 and starting[0]["device"] == "cpu" and starting[0]["version"] == health["version"]
    assert starting[0]["tuning"] == "defaults"


def test_knobs_turned_off_are_logged_at_start(start_server):
    s = start_server("--tune", "fuse_norm=off,cuda_graphs=0")
    status, _, body = sh.post_json(s.port, "/v1/chat/completions", sh.chat_body(sh.MODEL, max_tokens=2))
    assert status == 200, body
    starting = [r for r in s.log_records() if r.get("msg") == "starting"]
    assert len(starting) == 1 and starting[0]["tuning"] == "cuda_graphs=0,fuse_norm=0", starting


def test_router_metrics_carry_build_info(sanctum_bin, tmp_path):
    upstream = rh.Fault("ok")
    r = rh.Router(sanctum_bin, {"backends": [rh.backend("b", [sh.MODEL], upstream.url, [])]}, tmp_path)
    try:
        sample = build_info(r.metrics())
        assert sample.value == 1 and sample.labels == cli_identity(sanctum_bin)
    finally:
        r.terminate()
        upstream.close()
