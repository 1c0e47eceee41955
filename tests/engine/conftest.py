"""Tiny random checkpoints of every architecture, shared by the engine suites."""
import pytest

import tiny_models
from engine_models import ARCHS


@pytest.fixture(scope="session")
def models(tmp_path_factory):
    built = {}
    for name, (base, overrides) in ARCHS.items():
        cfg = dict(tiny_models.BASE_CONFIGS[base])
        cfg.update(overrides)
        out = tmp_path_factory.mktemp(name)
        tiny_models.save_checkpoint(tiny_models.make_model(cfg, seed=3), cfg, out, bits=4, group_size=64)
        built[name] = (out, cfg["vocab_size"])
    return built
