"""The chat page over plain HTTP: the headers that keep it safe, revalidation with ETag, the files
it loads, --no-ui, and its place outside the bearer token (the API stays behind it)."""
from __future__ import annotations

import json
import re
import subprocess

import server_harness as sh
from ui_harness import start_server

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: blob:; connect-src 'self'; "
       "font-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def test_the_page_carries_a_strict_policy_and_no_inline_script(ui_server):
    status, headers, body = sh.request(ui_server.port, "GET", "/")
    assert status == 200 and headers["content-type"] == "text/html; charset=utf-8"
    assert headers["content-security-policy"] == CSP
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["x-frame-options"] == "DENY" and headers["referrer-policy"] == "no-referrer"
    assert headers["cache-control"] == "no-cache" and re.fullmatch(r'"[0-9a-f]{16}"', headers["etag"])
    html = body.decode()
    # Every script is a module from this server; no inline code, no handler attributes, no other host.
    assert re.findall(r"<script[^>]*>", html) == ['<script type="module" src="/ui/app.js">']
    assert re.findall(r"<script[^>]*>(.*?)</script>", html, re.S) == [""]
    assert re.search(r"\son[a-z]+=", html) is None and " style=" not in html
    assert re.search(r"(src|href)=\"(https?:)?//", html) is None


def test_each_file_the_page_imports_is_served_with_its_type(ui_server):
    _, _, app = sh.request(ui_server.port, "GET", "/ui/app.js")
    imported = set(re.findall(r'from "\./([\w.]+)"', app.decode()))
    assert {"api.js", "messages.js", "sidebar.js", "store.js"} <= imported
    for name in sorted(imported) + ["markdown.js"]:
        status, headers, body = sh.request(ui_server.port, "GET", f"/ui/{name}")
        assert status == 200 and headers["content-type"] == "text/javascript; charset=utf-8", name
        assert headers["content-security-policy"] == CSP and body
    status, headers, _ = sh.request(ui_server.port, "GET", "/ui/style.css")
    assert status == 200 and headers["content-type"] == "text/css; charset=utf-8"


def test_an_unchanged_file_revalidates_to_304(ui_server):
    _, headers, _ = sh.request(ui_server.port, "GET", "/ui/app.js")
    etag = headers["etag"]
    status, again, body = sh.request(ui_server.port, "GET", "/ui/app.js", headers={"If-None-Match": f'"other", {etag}'})
    assert status == 304 and body == b"" and again["etag"] == etag
    status, _, body = sh.request(ui_server.port, "GET", "/ui/app.js", headers={"If-None-Match": '"other"'})
    assert status == 200 and body


def test_unknown_files_and_other_methods_are_refused(ui_server):
    assert sh.request(ui_server.port, "GET", "/ui/nope.js")[0] == 404
    assert sh.request(ui_server.port, "GET", "/ui/../auth.cc")[0] == 404
    status, headers, _ = sh.request(ui_server.port, "POST", "/", body=b"")
    assert status == 405 and headers["allow"] == "GET"


def test_no_ui_turns_the_page_off(sanctum_bin, tmp_path):
    usage = subprocess.run([sanctum_bin, "serve", "--help"], capture_output=True, text=True, timeout=30).stdout
    assert "[--no-ui]" in usage and "chat page at GET /" in usage
    server = start_server(sanctum_bin, tmp_path, ["--no-ui"])
    try:
        assert sh.request(server.port, "GET", "/")[0] == 404
        assert sh.request(server.port, "GET", "/ui/app.js")[0] == 404
        assert sh.request(server.port, "GET", "/v1/models")[0] == 200
    finally:
        server.terminate()


def test_the_model_card_says_whether_the_template_thinks(ui_server):
    """The page shows its thinking switch from this field; the default model's template honours
    enable_thinking (tests/e2e/test_17_enable_thinking.py)."""
    status, _, body = sh.request(ui_server.port, "GET", "/v1/models")
    assert status == 200
    assert [(m["id"], m["thinking"]) for m in json.loads(body)["data"]] == [("default", True)]


def test_the_page_is_open_but_the_api_wants_the_token(guarded_server, auth_token):
    assert sh.request(guarded_server.port, "GET", "/")[0] == 200
    assert sh.request(guarded_server.port, "GET", "/ui/app.js")[0] == 200
    assert sh.request(guarded_server.port, "GET", "/v1/models")[0] == 401
    assert sh.request(guarded_server.port, "GET", "/v1/models", headers={"Authorization": f"Bearer {auth_token}"})[0] == 200
