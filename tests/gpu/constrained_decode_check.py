"""Grammar-constrained decode on a GPU machine, end to end through `sanctum serve` on a random small-vocabulary model
(tests/e2e/small_vocab_model.py: left alone it writes no JSON, so a valid answer is the constraint's doing). Requests go
one at a time, so each is a lone sequence on the device-pick path: every step's grammar mask goes to the GPU with the
pick, and verification rows of prompt-lookup drafts each get their own.

1. Greedy answers with response_format json_schema, for several schemas, in the exact mode (--matmul-precision f32,
   --kv-cache-dtype f32): --device cuda with the masks applied on the GPU must give the CPU's text and finish reason, and
   so must cuda with prompt lookup off and cuda with the picks on the host (--tune gpu_sampling=0: the rows come back
   and the host masks them, as before).
2. Seeded sampled answers on cuda (temperature 1 with top_p 0.95, then with min_p 0.05): every answer that finishes
   parses and validates with jsonschema (formats checked), and at least half finish (a random model may wander inside
   a string until max_tokens).

  python3 tests/gpu/constrained_decode_check.py             (needs SANCTUM_BIN, jsonschema, tokenizers and mlx-lm)
  ... --model-dir DIR   the small-vocabulary model made there beforehand (a machine without mlx: scripts/gpu_check.sh
                        bundle makes it)
  python3 tests/gpu/constrained_decode_check.py --device cpu  (the same comparisons with every server on the CPU)
"""
import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path

import jsonschema

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "e2e"))
import server_harness as sh  # noqa: E402
import small_vocab_model  # noqa: E402

SCHEMAS = ROOT / "tests" / "data" / "json_schemas"
UNSUPPORTED = json.loads((ROOT / "tests" / "grammar" / "expected_unsupported.json").read_text())
# A profile whose strings are bounded, so that most answers finish; then real-world schemas.
PROFILE = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 12},
    "age": {"type": "integer", "minimum": 0, "maximum": 130},
    "tags": {"type": "array", "items": {"enum": ["red", "green", "blue"]}, "maxItems": 3},
    "active": {"type": "boolean"}},
    "required": ["name", "age", "active"], "additionalProperties": False}
REAL = 5
MAX_TOKENS = 300
EXACT = ["--matmul-precision", "f32", "--kv-cache-dtype", "f32"]


def schemas() -> dict[str, dict]:
    out = {"profile": PROFILE}
    for path in sorted(SCHEMAS.glob("Github_easy--*.json")):
        if len(out) > REAL:
            break
        if path.name not in UNSUPPORTED:
            out[path.name] = json.loads(path.read_text())
    return out


def ask(port: int, schema: dict, **sampling) -> tuple[str, str]:
    body = {"model": "m", "messages": [{"role": "user", "content": "Fill in the form."}], "max_tokens": MAX_TOKENS, **sampling,
            "response_format": {"type": "json_schema", "json_schema": {"name": "form", "schema": schema}}}
    status, _, raw = sh.request(port, "POST", "/v1/chat/completions", json.dumps(body).encode(), timeout=600)
    if status != 200:
        raise SystemExit(f"request on port {port} failed with {status}: {raw[:500]!r}")
    choice = json.loads(raw)["choices"][0]
    return choice["message"]["content"], choice["finish_reason"]


def drafted(port: int) -> int:
    _, _, raw = sh.request(port, "GET", "/metrics")
    m = re.search(rb"^sanctum_mlx_pld_drafted_tokens_total(?:\{[^}]*\})? (\S+)$", raw, re.M)
    return int(float(m.group(1))) if m else 0


def validates(schema: dict, text: str) -> str:
    """"" when `text` is a valid instance of `schema`, else why not."""
    try:
        instance = json.loads(text)
    except json.JSONDecodeError as e:
        return f"not JSON: {e}: {text[:200]!r}"
    cls = jsonschema.validators.validator_for(schema)
    errors = list(cls(schema, format_checker=cls.FORMAT_CHECKER).iter_errors(instance))
    return errors[0].message[:300] if errors else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda", help="the device of the servers under test (cpu: a run without a GPU)")
    ap.add_argument("--model-dir", type=Path, help="where the model is (made there when missing; default: a temporary folder)")
    a = ap.parse_args()
    binary = os.environ["SANCTUM_BIN"]
    forms = schemas()
    ok = True
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        model = small_vocab_model.make_model(a.model_dir or tmp / "chatml", "chatml")
        gpu = ["--device", a.device, *EXACT]
        tested = f"{a.device} device picks"
        modes = {"cpu reference": ["--device", "cpu", *EXACT], tested: gpu, f"{a.device} --no-pld": [*gpu, "--no-pld"],
                 f"{a.device} host picks": [*gpu, "--tune", "gpu_sampling=0"]}
        greedy: dict[str, dict[str, tuple[str, str]]] = {}
        sampled: list[tuple[str, str, str]] = []
        for mode, flags in modes.items():
            server = sh.Server(binary, [f"m={model}"], tmp / f"server-{len(greedy)}.log", extra=flags, ready_timeout=300)
            try:
                greedy[mode] = {name: ask(server.port, schema, temperature=0) for name, schema in forms.items()}
                if mode == tested:
                    print(f"{mode}: {drafted(server.port)} prompt-lookup draft tokens verified under the grammar")
                    sampled = [(name, *ask(server.port, schema, temperature=1.0, seed=seed, **extra))
                               for name, schema in forms.items() for seed in (1, 2)
                               for extra in ({"top_p": 0.95}, {"min_p": 0.05})]
            finally:
                server.terminate()
        for name in forms:
            outputs = {mode: greedy[mode][name] for mode in modes}
            same = len(set(outputs.values())) == 1
            ok &= same
            text, finish = outputs["cpu reference"]
            why = validates(forms[name], text) if finish == "stop" else ""
            ok &= why == ""
            invalid = f"; INVALID: {why}" if why else ""
            print(f"greedy {name}: {finish}, {len(text)} chars, identical {' / '.join(modes)}: {same}{invalid}")
            if not same:
                for mode, (t, f) in outputs.items():
                    print(f"  {mode}: {f} {t[:160]!r}")
        finished = 0
        for name, text, finish in sampled:
            if finish != "stop":
                ok &= finish == "length"
                continue
            finished += 1
            why = validates(forms[name], text)
            if why:
                ok = False
                print(f"sampled {name}: INVALID: {why}")
        ok &= 2 * finished >= len(sampled)
        print(f"sampled on {a.device}: {finished} of {len(sampled)} answers finished, each valid unless listed above")
    print("constrained decode check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
