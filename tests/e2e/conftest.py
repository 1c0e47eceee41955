"""Fixtures for the live-server battery: one tiny chat model and one shared server for the
read-only phases; tests that change server state (queue, shutdown) start their own."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import server_harness as sh  # noqa: E402

MODEL = sh.MODEL


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return sh.make_tiny_chat_model(tmp_path_factory.mktemp("e2e") / "tiny-chat")


@pytest.fixture(scope="session")
def server(sanctum_bin, tiny_model, tmp_path_factory):
    logs = tmp_path_factory.mktemp("e2e-logs") / "server.log"
    s = sh.Server(sanctum_bin, [f"{MODEL}={tiny_model}"], logs, extra=["--max-queue", "8", "--threads", "1"])
    yield s
    s.terminate()


@pytest.fixture(scope="session")
def client(server):
    from openai import OpenAI
    return OpenAI(base_url=server.base + "/v1", api_key="unused", max_retries=0, timeout=60)


@pytest.fixture
def start_server(sanctum_bin, tiny_model, tmp_path):
    """Starts extra servers with their own flags; all are stopped after the test."""
    started = []

    def start(*extra: str, models: list[str] | None = None):
        s = sh.Server(sanctum_bin, models or [f"{MODEL}={tiny_model}"], tmp_path / f"server{len(started)}.log",
                      extra=list(extra) + ["--threads", "1"])
        started.append(s)
        return s

    yield start
    for s in started:
        s.terminate()
