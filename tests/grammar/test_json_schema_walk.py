"""Constrained random walks over real-world JSON Schemas (tests/data/json_schemas): every output the
grammar lets through must parse and validate with `jsonschema`; schemas we cannot enforce must be
refused with an error naming the feature (the recorded list), never walked unconstrained."""
import json
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
SCHEMAS = ROOT / "tests" / "data" / "json_schemas"
TOKENIZER = ROOT / "tests" / "data" / "tokenizers" / "qwen3"
EXPECTED_UNSUPPORTED = Path(__file__).with_name("expected_unsupported.json")


@pytest.fixture(scope="module")
def walk_rows(tmp_path_factory):
    # Beside the server binary (build/grammar_walk), or where SANCTUM_GRAMMAR_WALK says.
    bin_dir = Path(os.environ.get("SANCTUM_BIN", ROOT / "build" / "sanctum")).parent
    walker = Path(os.environ.get("SANCTUM_GRAMMAR_WALK", bin_dir / "grammar_walk"))
    if not walker.exists():
        pytest.fail(f"grammar_walk not found at {walker}: build the grammar_walk target")
    out = tmp_path_factory.mktemp("walk") / "walk.jsonl"
    subprocess.run([str(walker), "--tokenizer", str(TOKENIZER), "--schemas", str(SCHEMAS), "--out", str(out),
                    "--seed", "1", "--max-tokens", "3000", "--tries", "4"], check=True, timeout=600)
    return [json.loads(line) for line in out.read_text().splitlines()]


def test_every_schema_gets_a_row(walk_rows):
    assert len(walk_rows) == len(list(SCHEMAS.glob("*.json")))


def test_no_walk_hits_a_dead_end_or_crashes(walk_rows):
    errors = [(r["file"], r["error"]) for r in walk_rows if r["status"] == "error"]
    assert errors == []


def test_at_least_200_real_schemas_generate_valid_output(walk_rows):
    invalid = []
    ok = 0
    for row in walk_rows:
        if row["status"] != "ok":
            continue
        schema = json.loads((SCHEMAS / row["file"]).read_text())
        try:
            instance = json.loads(row["output"])
        except json.JSONDecodeError as e:
            invalid.append((row["file"], f"not JSON: {e}: {row['output'][:200]!r}"))
            continue
        cls = jsonschema.validators.validator_for(schema)
        errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(instance))
        if errors:
            invalid.append((row["file"], errors[0].message[:300]))
        else:
            ok += 1
    assert invalid == []
    assert ok >= 200, f"only {ok} schemas produced output"


def test_unsupported_schemas_are_refused_by_name(walk_rows):
    refused = {r["file"]: r["feature"] for r in walk_rows if r["status"] == "unsupported"}
    for row in walk_rows:
        if row["status"] == "unsupported":
            assert row["feature"] and row["feature"] in row["error"] or "json schema" in row["error"]
    assert refused == json.loads(EXPECTED_UNSUPPORTED.read_text())
