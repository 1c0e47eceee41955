"""Remote images for --allow-image-urls (src/server/image_fetch.cc), through build/image_prepare
against a local HTTP server: the fetched bytes are the served ones, redirects are followed a few
times, and a missing image, a redirect loop, an oversized body, a slow server and an untrusted TLS
certificate are clear errors."""
import http.server
import io
import shutil
import ssl
import subprocess
import threading
import time

import numpy as np
import pytest
from PIL import Image

from image_reference import QWEN3_5_CONFIG, run_prepare

PNG = io.BytesIO()
Image.fromarray(np.random.default_rng(3).integers(0, 256, (20, 30, 3), dtype=np.uint8)).save(PNG, format="PNG")
PNG = PNG.getvalue()


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 (the http.server name)
        if self.path == "/a.png":
            return self.reply(200, PNG)
        if self.path == "/redirect":
            return self.reply(302, b"", {"Location": "/a.png"})
        if self.path == "/loop":
            return self.reply(302, b"", {"Location": "/loop"})
        if self.path == "/slow":
            time.sleep(2)
            return self.reply(200, PNG)
        return self.reply(404, b"no")

    def reply(self, status, body, headers=None):
        self.send_response(status)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client stopped at the header (a body over its limit)

    def log_message(self, *args):
        pass


def serve(context=None):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if context:
        httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


@pytest.fixture(scope="module")
def base():
    httpd = serve()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


def fetch(url, *extra):
    return run_prepare(url, QWEN3_5_CONFIG, None, *extra)


def test_fetched_image_is_the_served_one(base, tmp_path):
    (tmp_path / "a.png").write_bytes(PNG)
    want = run_prepare(tmp_path / "a.png", QWEN3_5_CONFIG)["hash"]
    assert fetch(base + "/a.png")["hash"] == want
    assert fetch(base + "/redirect")["hash"] == want


@pytest.mark.parametrize("path, words", [("/missing", "HTTP 404"), ("/loop", "redirected more than 3 times")])
def test_bad_answers_are_errors(base, path, words):
    out = fetch(base + path)
    assert out["kind"] == "fetch" and words in out["error"]


def test_a_body_over_the_limit_is_refused(base):
    out = fetch(base + "/a.png", "--max-image-bytes", str(len(PNG) - 1))
    assert out.get("code") == "image_too_large" and str(len(PNG) - 1) in out["error"], out


def test_a_slow_server_hits_the_deadline(base):
    t0 = time.time()
    out = fetch(base + "/slow", "--fetch-timeout-ms", "300")
    assert "took longer than 300 ms" in out["error"] and time.time() - t0 < 1.9


def test_an_untrusted_certificate_is_refused(tmp_path):
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make a self-signed certificate")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-keyout", str(tmp_path / "k.pem"), "-out", str(tmp_path / "c.pem")], check=True, capture_output=True)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(tmp_path / "c.pem", tmp_path / "k.pem")
    httpd = serve(ctx)
    try:
        out = fetch(f"https://127.0.0.1:{httpd.server_address[1]}/a.png", "--fetch-timeout-ms", "5000")
        assert out["kind"] == "fetch" and "certificate" in out["error"]
    finally:
        httpd.shutdown()
