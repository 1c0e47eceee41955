"""/metrics: the exact series dashboards query, parsed by prometheus_client, moving as requests run."""
from prometheus_client.parser import text_string_to_metric_families

import server_harness as sh
from server_harness import MODEL

SERIES = [
    "sanctum_mlx_http_requests_total", "sanctum_mlx_http_duration_seconds_bucket", "sanctum_mlx_http_inflight_requests",
    "sanctum_mlx_inference_requests_total", "sanctum_mlx_inference_completion_tokens_total",
    "sanctum_mlx_inference_prompt_tokens_total", "sanctum_mlx_inference_duration_seconds_bucket",
    "sanctum_mlx_inference_tokens_per_sec_bucket", "sanctum_mlx_inference_completion_tokens_bucket",
    "sanctum_mlx_startup_seconds_bucket", "sanctum_mlx_model_loaded", "sanctum_mlx_inference_queue_depth",
    "sanctum_mlx_inference_time_to_first_token_seconds_bucket",
]


def scrape(server) -> str:
    status, headers, body = sh.request(server.port, "GET", "/metrics")
    assert status == 200 and headers["content-type"].startswith("text/plain; version=0.0.4")
    return body.decode()


def test_metrics_parse_and_have_every_series(server):
    sh.post_json(server.port, "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=2))
    text = scrape(server)
    names = {s.name for fam in text_string_to_metric_families(text) for s in fam.samples}
    missing = [n for n in SERIES if n not in names]
    assert not missing, missing
    assert sh.metric_value(text, "sanctum_mlx_model_loaded") == 1
    assert sh.metric_value(text, "sanctum_mlx_startup_seconds_count", {"phase": "model_load"}) == 1


def test_counters_move(server):
    before = scrape(server)
    sh.post_json(server.port, "/v1/chat/completions", sh.chat_body(MODEL, max_tokens=3, ignore_eos=True))
    after = scrape(server)
    labels = {"route": "/v1/chat/completions", "method": "POST", "status": "200"}
    assert sh.metric_value(after, "sanctum_mlx_http_requests_total", labels) == \
        sh.metric_value(before, "sanctum_mlx_http_requests_total", labels) + 1
    assert sh.metric_value(after, "sanctum_mlx_inference_completion_tokens_total") == \
        sh.metric_value(before, "sanctum_mlx_inference_completion_tokens_total") + 3
    assert sh.metric_value(after, "sanctum_mlx_inference_requests_total", {"stop_reason": "length"}) == \
        sh.metric_value(before, "sanctum_mlx_inference_requests_total", {"stop_reason": "length"}) + 1


def test_histogram_buckets_reach_the_required_ranges(server):
    text = scrape(server)
    les = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            if s.name.endswith("_bucket"):
                les.setdefault(s.name, set()).add(float(s.labels["le"]))
    assert {0.005, 180.0} <= les["sanctum_mlx_http_duration_seconds_bucket"]
    assert max(x for x in les["sanctum_mlx_inference_tokens_per_sec_bucket"] if x != float("inf")) >= 2000
    assert {1.0, 4096.0} <= les["sanctum_mlx_inference_completion_tokens_bucket"]
