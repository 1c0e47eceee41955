"""Fixtures for the chat page tests (ui_harness.py drives the page): one browser for the whole run
(its start is the slowest step), the default model's server, and one that wants a bearer token.
Each test starts from a clean origin (localStorage and sessionStorage emptied) and an emptied
performance log, and saves its screenshots under build/test-output/ui/<test name>/."""
from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from ui_harness import chromium_driver, new_page, start_server  # noqa: E402


@pytest.fixture(scope="session")
def ui_server(sanctum_bin, tmp_path_factory):
    s = start_server(sanctum_bin, tmp_path_factory.mktemp("ui-server"))
    yield s
    s.terminate()


@pytest.fixture(scope="session")
def auth_token() -> str:
    return secrets.token_hex(16)


@pytest.fixture(scope="session")
def guarded_server(sanctum_bin, tmp_path_factory, auth_token):
    """A server that wants a bearer token on the plain listener."""
    d = tmp_path_factory.mktemp("ui-guarded")
    token_file = d / "token"
    fd = os.open(token_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(auth_token + "\n")
    s = start_server(sanctum_bin, d, ["--auth-token-file", str(token_file)])
    yield s
    s.terminate()


@pytest.fixture(scope="session")
def browser():
    driver = chromium_driver()
    driver.set_script_timeout(20)
    yield driver
    driver.quit()


@pytest.fixture
def page(ui_server, browser, request):
    p = new_page(browser, ui_server.base, request)
    yield p
    p.screenshot("final")

