"""`sanctum --version` / `sanctum version`: the release, the commit and the CUDA backend, in a fixed
format that deploy scripts and bug reports can rely on; and `serve --device` refusing what it cannot
do with one clear line, before anything is loaded or bound."""
import re
import subprocess

import pytest

# "sanctum 0.4.0 (abc1234)", "(abc1234+dirty)" or "(unknown)" for a build without git.
FIRST_LINE = re.compile(r"^sanctum (\d+\.\d+\.\d+) \(([0-9a-f]{7,40}(\+dirty)?|unknown)\)$")
CUDA_LINE = re.compile(r"^cuda: (on|off) \((.+)\)$")


def run(sanctum_bin, *args, timeout=60):
    return subprocess.run([sanctum_bin, *args], capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("spelling", ["--version", "version"])
def test_version_prints_release_commit_and_cuda(sanctum_bin, spelling):
    r = run(sanctum_bin, spelling)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == 2, r.stdout
    assert FIRST_LINE.match(lines[0]), lines[0]
    m = CUDA_LINE.match(lines[1])
    assert m, lines[1]
    if m.group(1) == "off":
        assert "without the CUDA backend" in m.group(2)


def test_both_spellings_agree(sanctum_bin):
    assert run(sanctum_bin, "--version").stdout == run(sanctum_bin, "version").stdout


def test_version_is_listed_in_help(sanctum_bin):
    r = run(sanctum_bin, "--help")
    assert r.returncode == 0
    assert re.search(r"^\s+version\s", r.stderr, re.M), r.stderr


def test_version_rejects_stray_flags(sanctum_bin):
    r = run(sanctum_bin, "version", "--bogus")
    assert r.returncode == 2 and "--bogus" in r.stderr


def cuda_usable(sanctum_bin) -> bool:
    return run(sanctum_bin, "version").stdout.splitlines()[1].startswith("cuda: on (GPU available)")


def test_serve_device_cuda_without_a_gpu_fails_with_one_line(sanctum_bin, tmp_path):
    if cuda_usable(sanctum_bin):
        pytest.skip("a GPU is usable here")
    # The model directory does not exist: the device check must come first, before any load or bind.
    r = run(sanctum_bin, "serve", "--device", "cuda", "--port", "0", "--model", str(tmp_path / "absent"))
    assert r.returncode == 1, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("sanctum serve: error: --device cuda: "), lines[0]


def test_serve_gpu_memory_limit_needs_device_cuda(sanctum_bin, tmp_path):
    for extra in ([], ["--device", "cpu"]):
        r = run(sanctum_bin, "serve", *extra, "--gpu-memory-limit-mb", "1024", "--port", "0", "--model", str(tmp_path / "absent"))
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert r.stderr.strip() == "sanctum serve: error: --gpu-memory-limit-mb needs --device cuda"


def test_serve_rejects_an_unknown_device(sanctum_bin, tmp_path):
    r = run(sanctum_bin, "serve", "--device", "tpu", "--port", "0", "--model", str(tmp_path / "absent"))
    assert r.returncode == 2
    assert r.stderr.strip() == "sanctum serve: error: --device must be cpu or cuda, got 'tpu'"


def test_serve_help_lists_the_device_flags(sanctum_bin):
    r = run(sanctum_bin, "serve", "--help")
    assert r.returncode == 0
    assert "--device cpu|cuda" in r.stdout and "--gpu-memory-limit-mb N" in r.stdout


def test_serve_refuses_an_unknown_matmul_precision_before_binding(sanctum_bin):
    r = run(sanctum_bin, "serve", "--port", "0", "--matmul-precision", "fp4")
    assert r.returncode == 2, r.stderr
    assert "unknown matmul precision 'fp4'" in r.stderr and "use f32, int8 or bf16" in r.stderr, r.stderr
