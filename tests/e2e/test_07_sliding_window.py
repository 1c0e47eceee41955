"""A checkpoint whose config declares sliding-window attention runs exactly within the window (where the
window changes nothing: every position still sees all earlier ones) and refuses sequences longer than it,
since sliding-window attention itself is not implemented: the server's context is the window
(max_model_len, 400 context_length_exceeded past it), and the CLI exits with an error naming
`sliding_window` rather than printing tokens that full attention computed."""
import json
import shutil
import subprocess

import pytest

import server_harness as sh
from server_harness import MODEL

WINDOW = 48


@pytest.fixture(scope="module")
def windowed(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("windowed") / "model"
    shutil.copytree(tiny_model, out)
    config = json.loads((out / "config.json").read_text())
    layers = config["num_hidden_layers"]
    config.update({"use_sliding_window": True, "sliding_window": WINDOW, "max_window_layers": layers - 1})  # the last layer slides
    (out / "config.json").write_text(json.dumps(config))
    return out


@pytest.fixture(scope="module")
def servers(sanctum_bin, tiny_model, windowed, tmp_path_factory):
    logs = tmp_path_factory.mktemp("windowed-logs")
    plain = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], logs / "plain.log", extra=["--threads", "1"])
    slid = sh.Server(sanctum_bin, [f"{MODEL}={windowed}"], logs / "slid.log", extra=["--threads", "1"])
    yield plain, slid
    plain.terminate()
    slid.terminate()


def completion(server, prompt, max_tokens):
    return sh.post_json(server.port, "/v1/completions",
                        {"model": MODEL, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True})


def test_the_context_is_the_window_and_inside_it_answers_are_exact(servers):
    plain, slid = servers
    status, _, card = sh.request(slid.port, "GET", f"/v1/models/{MODEL}")
    assert status == 200 and json.loads(card)["max_model_len"] == WINDOW
    assert any(r.get("msg") == "context capped at the sliding window" for r in slid.log_records())
    prompt = list(range(10, 10 + WINDOW - 8))
    status, _, inside = completion(slid, prompt, 8)  # ends exactly at the window
    assert status == 200
    assert inside["choices"][0]["text"] == completion(plain, prompt, 8)[2]["choices"][0]["text"]
    status, _, body = completion(slid, prompt, 9)  # one past it
    assert status == 400 and body["error"]["code"] == "context_length_exceeded" and str(WINDOW) in body["error"]["message"]


def test_the_cli_refuses_to_run_past_the_window(sanctum_bin, windowed):
    ids = ",".join(str(i) for i in range(10, 10 + WINDOW - 4))
    run = subprocess.run([sanctum_bin, "generate", "--model", str(windowed), "--prompt-ids", ids, "--max-tokens", "3", "--ignore-eos",
                          "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert len(run.stdout.strip().split(",")) == 3
    run = subprocess.run([sanctum_bin, "generate", "--model", str(windowed), "--prompt-ids", ids, "--max-tokens", "8", "--ignore-eos",
                          "--threads", "1"], capture_output=True, text=True, timeout=120)
    assert run.returncode != 0 and "sliding_window" in run.stderr and "Traceback" not in run.stderr
