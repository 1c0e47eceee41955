"""Fixtures for the live-server battery: one tiny chat model and one shared server for the
read-only phases; tests that change server state (queue, shutdown) start their own."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import router_harness as rh  # noqa: E402
import server_harness as sh  # noqa: E402

MODEL = sh.MODEL
# Router health probes fast enough that tests see upstreams change state within a second.
FAST_HEALTH = {"interval_s": 0.2, "timeout_s": 0.5}


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory) -> Path:
    return sh.make_tiny_chat_model(tmp_path_factory.mktemp("e2e") / "tiny-chat")


@pytest.fixture(scope="session")
def tiny_vocab(tiny_model):
    """The tiny model's tokenizer and chat template, run apart from the server (reference.py)."""
    import reference
    return reference.Vocab(tiny_model)


@pytest.fixture(scope="session")
def default_server(sanctum_bin, tmp_path_factory):
    """One server of the embedded default model, named "default", for checks of what it answers."""
    s = sh.Server(sanctum_bin, [f"default={sh.DEFAULT_MODEL}"], tmp_path_factory.mktemp("default") / "server.log",
                  extra=["--threads", "1"])
    yield s
    s.terminate()


@pytest.fixture(scope="session")
def default_vocab():
    import reference
    return reference.Vocab(sh.DEFAULT_MODEL)


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


@pytest.fixture
def faults():
    """Fault-injecting upstreams (router_harness.Fault) made by the test; all closed after it."""
    made = []

    def make(mode: str = "ok", **kw) -> rh.Fault:
        f = rh.Fault(mode, **kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()


@pytest.fixture
def router(sanctum_bin, tmp_path):
    """Starts `sanctum route` processes on configs (fast health probes unless given); all stopped after."""
    started = []

    def start(config: dict) -> rh.Router:
        config.setdefault("health", FAST_HEALTH)
        r = rh.Router(sanctum_bin, config, tmp_path, name=f"router{len(started)}")
        started.append(r)
        return r

    yield start
    for r in started:
        r.terminate()
