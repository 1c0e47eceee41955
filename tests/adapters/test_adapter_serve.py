"""`sanctum serve --adapter NAME=DIR`: the adapter is merged into that model (the server answers what
`generate --adapter` answers), and `--adapter-manifest` puts the adapter's files behind the same gate
as a model's: verified before bind, the merge reading the files it hashed, a tampered file refused by
name with the port never opened."""
import shutil
import subprocess

import pytest

import mlx_adapters
import server_harness as sh

PROMPT = "The capital of France is"


@pytest.fixture(scope="module")
def setup(sanctum_bin, tmp_path_factory):
    root = tmp_path_factory.mktemp("adapter-serve")
    model = sh.make_tiny_chat_model(root / "tiny")
    adapter = mlx_adapters.train_adapter(model, root / "adapter", steps=2, keys=["self_attn.q_proj", "self_attn.v_proj", "mlp.up_proj"])
    manifest = root / "adapter.sha256"
    r = subprocess.run([sanctum_bin, "manifest", "generate", str(adapter), "--out", str(manifest)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    listed = sorted(line.split()[-1] for line in manifest.read_text().splitlines())
    assert listed == ["adapter_config.json", "adapters.safetensors"]
    return {"root": root, "model": model, "adapter": adapter, "manifest": manifest}


def completion(port, max_tokens=8):
    status, _, body = sh.request(port, "POST", "/v1/completions",
                                 {"model": sh.MODEL, "prompt": PROMPT, "max_tokens": max_tokens, "temperature": 0})
    assert status == 200, body
    import json
    return json.loads(body)["choices"][0]["text"]


def generate(sanctum_bin, model, adapter=None, max_tokens=8):
    args = [sanctum_bin, "generate", "--model", str(model), "--prompt", PROMPT, "--max-tokens", str(max_tokens), "--temperature", "0",
            "--ignore-eos", "--no-pld"]
    if adapter:
        args += ["--adapter", str(adapter)]
    r = subprocess.run(args, capture_output=True, text=True, timeout=120, check=True)
    return r.stdout


def test_served_adapter_answers_what_generate_does(sanctum_bin, setup, tmp_path):
    s = sh.Server(sanctum_bin, [f"{sh.MODEL}={setup['model']}"], tmp_path / "server.log",
                  ["--adapter", f"{sh.MODEL}={setup['adapter']}", "--adapter-manifest", str(setup["manifest"]), "--no-pld"])
    try:
        text = completion(s.port)
        order = [r["msg"] for r in s.log_records() if r.get("msg") in ("adapter manifest verified", "adapter merged", "listening")]
        assert order == ["adapter manifest verified", "adapter merged", "listening"]
    finally:
        s.terminate()
    with_adapter = generate(sanctum_bin, setup["model"], setup["adapter"])
    assert with_adapter.startswith(text) and text
    assert with_adapter != generate(sanctum_bin, setup["model"]), "the adapter changed nothing: the check would show nothing"


def serve_must_refuse(sanctum_bin, setup, extra):
    port = sh.free_port()
    r = subprocess.run([sanctum_bin, "serve", "--model", f"{sh.MODEL}={setup['model']}", "--port", str(port), *extra],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "listening" not in r.stderr and "model loaded" not in r.stderr
    return r.stderr


def test_tampered_adapter_is_refused_before_bind(sanctum_bin, setup, tmp_path):
    adapter = tmp_path / "adapter"
    shutil.copytree(setup["adapter"], adapter)
    data = bytearray((adapter / "adapters.safetensors").read_bytes())
    data[-1] ^= 1
    (adapter / "adapters.safetensors").write_bytes(bytes(data))
    err = serve_must_refuse(sanctum_bin, setup, ["--adapter", str(adapter), "--adapter-manifest", str(setup["manifest"])])
    assert "adapters.safetensors" in err


@pytest.mark.parametrize("flags,message", [
    (["--adapter", "other=/nonexistent"], "no --model is named 'other'"),
    (["--adapter", "A", "--adapter", "B"], "one adapter per model"),
    (["--adapter-manifest", "M"], "give one --adapter-manifest per --adapter"),
    (["--adapter-manifest-pubkey", "P"], "--adapter-manifest-sig / --adapter-manifest-pubkey need --adapter-manifest"),
])
def test_adapter_flag_mistakes_are_refused(sanctum_bin, setup, flags, message):
    assert message in serve_must_refuse(sanctum_bin, setup, flags)
