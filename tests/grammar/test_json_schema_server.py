"""response_format json_schema through a live server, for every real-world schema of tests/data/json_schemas.

The model has random weights over a small vocabulary (tests/e2e/small_vocab_model.py): left alone it writes no JSON at
all, so every answer that finishes is valid only because of the constraint. Each answer that ends with finish_reason
"stop" must parse and validate with `jsonschema` (formats checked); a random model may wander inside a string until
max_tokens, so only most, not all, answers must finish. Schemas we cannot enforce must be refused with a 400 naming
the feature (the list tests/grammar/expected_unsupported.json, the same one the grammar walk test pins). The 248
schemas in turn also pass the server's bound on cached grammars (128), which /metrics reports.
"""
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import server_harness as sh  # noqa: E402
import small_vocab_model  # noqa: E402

SCHEMAS = ROOT / "tests" / "data" / "json_schemas"
EXPECTED_UNSUPPORTED = json.loads((Path(__file__).with_name("expected_unsupported.json")).read_text())
MAX_TOKENS = 1500


@pytest.fixture(scope="module")
def answers(sanctum_bin, tmp_path_factory):
    model = small_vocab_model.make_model(tmp_path_factory.mktemp("json-schema-model") / "chatml", "chatml")
    server = sh.Server(sanctum_bin, [f"small={model}"], tmp_path_factory.mktemp("json-schema-logs") / "server.log",
                       extra=["--max-seqs", "16", "--max-queue", "64"])

    def ask(path: Path):
        body = {"model": "small", "messages": [{"role": "user", "content": "Fill in the form."}], "max_tokens": MAX_TOKENS,
                "temperature": 1.0, "seed": 7,
                "response_format": {"type": "json_schema", "json_schema": {"name": "form", "schema": json.loads(path.read_text())}}}
        status, _, raw = sh.request(server.port, "POST", "/v1/chat/completions", json.dumps(body).encode(), timeout=300)
        return path.name, status, json.loads(raw)

    try:
        with ThreadPoolExecutor(16) as pool:
            out = list(pool.map(ask, sorted(SCHEMAS.glob("*.json"))))
        status, _, metrics = sh.request(server.port, "GET", "/metrics")
        assert status == 200
    finally:
        server.terminate()
    return out, metrics.decode()


def test_unsupported_schemas_are_400s_naming_the_feature(answers):
    refused = {}
    for name, status, body in answers[0]:
        if status == 400:
            assert body["error"]["param"] == "response_format", body
            refused[name] = body["error"]["message"]
    assert set(refused) == set(EXPECTED_UNSUPPORTED)
    for name, feature in EXPECTED_UNSUPPORTED.items():
        assert f"unsupported: {feature}" in refused[name], refused[name]


def test_every_finished_answer_parses_and_validates(answers):
    invalid, finished, compiled = [], 0, 0
    for name, status, body in answers[0]:
        if status != 200:
            continue
        compiled += 1
        choice = body["choices"][0]
        if choice["finish_reason"] != "stop":
            assert choice["finish_reason"] == "length", choice
            continue
        finished += 1
        schema = json.loads((SCHEMAS / name).read_text())
        try:
            instance = json.loads(choice["message"]["content"])
        except json.JSONDecodeError as e:
            invalid.append((name, f"not JSON: {e}: {choice['message']['content'][:200]!r}"))
            continue
        cls = jsonschema.validators.validator_for(schema)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(instance))
        if errors:
            invalid.append((name, errors[0].message[:300]))
    assert invalid == []
    assert compiled >= 240
    assert finished >= 0.9 * compiled, f"only {finished} of {compiled} answers finished within {MAX_TOKENS} tokens"


def test_the_grammar_cache_keeps_its_bound_and_reports_it(answers):
    answers, metrics = answers
    compiled = sum(status == 200 for _, status, _ in answers)
    assert compiled > 128
    # The least recently used went past 128 grammars; the bytes they hold are under the 256 MiB bound.
    assert sh.metric_value(metrics, "sanctum_grammar_cache_grammars", {"model": "small"}) == 128
    held = sh.metric_value(metrics, "sanctum_grammar_cache_bytes", {"model": "small"})
    assert 0 < held <= 256 << 20


def test_a_grammar_cache_of_zero_keeps_no_masks_and_still_constrains(sanctum_bin, tmp_path):
    """--grammar-cache-mb 0: each grammar's masks are computed again where needed instead of kept, and no
    grammar stays past the one in use; the answers are the cached server's (same seed) and validate."""
    model = small_vocab_model.make_model(tmp_path / "chatml", "chatml")
    names = sorted(p.name for p in SCHEMAS.glob("*.json") if p.name not in EXPECTED_UNSUPPORTED)[:6]
    answers = {}
    for flags in (["--grammar-cache-mb", "0"], []):
        server = sh.Server(sanctum_bin, [f"small={model}"], tmp_path / f"server{len(flags)}.log", extra=flags)
        try:
            for name in names:
                body = {"model": "small", "messages": [{"role": "user", "content": "Fill in the form."}], "max_tokens": 300,
                        "temperature": 1.0, "seed": 3,
                        "response_format": {"type": "json_schema", "json_schema": {"name": "form", "schema": json.loads((SCHEMAS / name).read_text())}}}
                status, _, raw = sh.request(server.port, "POST", "/v1/chat/completions", json.dumps(body).encode(), timeout=300)
                assert status == 200, raw
                answers.setdefault(name, []).append(json.loads(raw)["choices"][0])
            metrics = sh.request(server.port, "GET", "/metrics")[2].decode()
            if flags:
                assert sh.metric_value(metrics, "sanctum_grammar_cache_grammars", {"model": "small"}) <= 1
                assert '"grammar_cache_mib": 0' in json.dumps(json.loads(sh.request(server.port, "GET", "/health")[2])["memory"]["models"]["small"])
        finally:
            server.terminate()
    for name, (bare, cached) in answers.items():
        assert bare == cached, name
        if bare["finish_reason"] == "stop":
            schema = json.loads((SCHEMAS / name).read_text())
            jsonschema.validators.validator_for(schema)(schema).validate(json.loads(bare["message"]["content"]))
