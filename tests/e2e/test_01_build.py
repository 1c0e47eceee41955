"""Phase build: the binary has the serve subcommand and its start-up checks fail loudly."""
import os
import socket
import subprocess

import server_harness as sh


def test_serve_help_lists_the_endpoints(sanctum_bin):
    r = subprocess.run([sanctum_bin, "serve", "--help"], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert "/v1/chat/completions" in r.stdout and "--allow-unspecified" in r.stdout


def test_serve_without_a_model_serves_the_embedded_default_model(sanctum_bin, tmp_path):
    server = sh.Server(sanctum_bin, [], tmp_path / "default.log")
    try:
        status, _, body = sh.post_json(server.port, "/v1/chat/completions", {
            "messages": [{"role": "user", "content": "What is 2+2? Respond with only the number."}],
            "max_tokens": 8, "temperature": 0})
        assert status == 200
        assert body["choices"][0]["message"]["content"].strip() == "4"
    finally:
        assert server.terminate() == 0


def test_missing_default_model_exits_nonzero_with_one_line(sanctum_bin):
    r = subprocess.run([sanctum_bin, "serve"], capture_output=True, text=True, timeout=30,
                       env={**os.environ, "SANCTUM_DEFAULT_MODEL": "/nonexistent/model"})
    assert r.returncode != 0
    assert "--model" in r.stderr and "/nonexistent/model" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_unspecified_address_needs_explicit_flag(sanctum_bin, tiny_model):
    r = subprocess.run([sanctum_bin, "serve", "--model", str(tiny_model), "--host", "0.0.0.0", "--port",
                        str(sh.free_port())], capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "--allow-unspecified" in r.stderr


def test_loopback_bind_failure_is_fatal(sanctum_bin, tiny_model):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = subprocess.run([sanctum_bin, "serve", "--model", str(tiny_model), "--port", str(port)],
                           capture_output=True, text=True, timeout=60)
    assert r.returncode != 0
    assert "cannot listen" in r.stderr


def test_missing_model_directory_fails_before_binding(sanctum_bin, tmp_path):
    r = subprocess.run([sanctum_bin, "serve", "--model", str(tmp_path / "nope"), "--port", str(sh.free_port())],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode != 0


def test_failed_non_loopback_bind_is_skipped_with_a_warning(start_server):
    # 192.0.2.1 (TEST-NET-1) is on no interface here: the bind fails and the server starts anyway.
    s = start_server("--host", "127.0.0.1", "--host", "192.0.2.1")
    assert sh.request(s.port, "GET", "/health")[0] == 200
    warnings = [r for r in s.log_records() if r.get("level") == "warn" and "192.0.2.1" in r.get("address", "")]
    assert warnings, s.logs()
