"""The tuning knobs from the command line: `sanctum --help-tuning` prints the one table, docs/tuning.md
is that table as generated, and a bad --tune or SANCTUM_TUNE stops a subcommand with one clear line
before any model is loaded."""
import os
import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_MODEL = ROOT / "models" / "default" / "mlx-4bit"


def run(sanctum_bin, *args, env=None, timeout=120):
    full_env = {k: v for k, v in os.environ.items() if k != "SANCTUM_TUNE"}
    full_env.update(env or {})
    return subprocess.run([sanctum_bin, *args], capture_output=True, text=True, timeout=timeout, env=full_env)


def test_docs_tuning_page_is_the_generated_table(sanctum_bin):
    r = run(sanctum_bin, "--help-tuning", "--markdown")
    assert r.returncode == 0, r.stderr
    page = (ROOT / "docs" / "tuning.md").read_text()
    assert page == r.stdout, "docs/tuning.md is stale: regenerate it with `build/sanctum --help-tuning --markdown > docs/tuning.md`"


def test_help_tuning_names_each_knobs_test_and_status(sanctum_bin):
    r = run(sanctum_bin, "--help-tuning")
    assert r.returncode == 0, r.stderr
    knobs = re.findall(r"^  ([a-z0-9_]+) \((cuda|cpu|cpu, cuda)\)$", r.stdout, flags=re.M)
    assert len(knobs) >= 20, r.stdout
    assert r.stdout.count("off path tested by: tests/") == len(knobs)
    assert r.stdout.count("status: ") == len(knobs)
    for test in set(re.findall(r"off path tested by: (\S+)", r.stdout)):
        assert (ROOT / test).exists(), test


def test_help_lists_help_tuning(sanctum_bin):
    assert "--help-tuning" in run(sanctum_bin, "--help").stderr


@pytest.mark.parametrize("command", ["generate", "bench", "logits"])
def test_an_unknown_knob_is_refused_before_loading(sanctum_bin, command, tmp_path):
    args = {"generate": ["--model", str(DEFAULT_MODEL), "--prompt-ids", "1,2", "--max-tokens", "1"],
            "bench": ["--model", str(DEFAULT_MODEL), "--pp", "4", "--tg", "1"],
            "logits": ["--model", str(DEFAULT_MODEL), "--prompt-ids", "1,2", "--out", str(tmp_path / "l.npy")]}[command]
    r = run(sanctum_bin, command, *args, "--tune", "fuse_everything=0")
    assert r.returncode == 2, r.stderr
    assert "unknown tuning knob 'fuse_everything'" in r.stderr and "cuda_graphs" in r.stderr, r.stderr
    assert not (tmp_path / "l.npy").exists()


def test_serve_refuses_a_bad_value_from_the_environment(sanctum_bin):
    r = run(sanctum_bin, "serve", "--port", "0", env={"SANCTUM_TUNE": "fuse_norm=sometimes"})
    assert r.returncode == 2, r.stderr
    assert "SANCTUM_TUNE: fuse_norm=sometimes: the value must be 1, 0, on, off, true or false" in r.stderr, r.stderr


def test_knobs_off_on_the_cpu_give_the_same_tokens(sanctum_bin):
    # Every knob today changes GPU kernels only: turning all of them off must leave a CPU run as it was.
    names = re.findall(r"^  ([a-z0-9_]+) \(", run(sanctum_bin, "--help-tuning").stdout, flags=re.M)
    all_off = ",".join(f"{n}=0" for n in names)
    base = ["generate", "--model", str(DEFAULT_MODEL), "--prompt-ids", "11,64,117,170,223", "--max-tokens", "24", "--temperature", "0",
            "--ignore-eos"]
    default = run(sanctum_bin, *base)
    tuned = run(sanctum_bin, *base, "--tune", all_off)
    assert default.returncode == 0 and tuned.returncode == 0, default.stderr + tuned.stderr
    assert tuned.stdout == default.stdout and len(default.stdout.split(",")) == 24
