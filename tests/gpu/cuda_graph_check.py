"""Recorded decode steps (CUDA graphs) on a GPU machine: with them on and chained (the default: each
step queued before the host reads the token of the one before), on without chaining
(--tune chained_decode=0) and off (--tune cuda_graphs=0), `sanctum generate --device cuda` must
print the same tokens, greedy in both matmul precisions and sampled with a seed, over a generation
that crosses attention key tiles and KV-cache growth (a 256-row block boundary, where the step is
recorded again); then the decode speed of each, side by side, on the embedded default model (a tiny
hybrid model, where launch cost is nearly the whole step). The same identity, greedy in the bf16 mode,
on a random-weight MoE model at the Qwen3.6-35B-A3B layer shapes cut to 4 layers (built with
bench/gpu/random_checkpoint.py), whose decode runs the fused MoE launches (routing inside the expert
gate/up launch, the combine at the end of the down launch with its per-column counts).

  python3 tests/gpu/cuda_graph_check.py          (needs SANCTUM_BIN)
"""
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

MODEL = Path(__file__).resolve().parents[2] / "models" / "default" / "mlx-4bit"
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench" / "gpu"))
import random_checkpoint  # noqa: E402


MODES = {"chained": {}, "unchained": {"SANCTUM_TUNE": "chained_decode=0"}, "graphs off": {"SANCTUM_TUNE": "cuda_graphs=0"}}


def run(args, mode: str) -> str:
    env = dict(os.environ, **MODES[mode])
    out = subprocess.run([os.environ["SANCTUM_BIN"], *args], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"sanctum {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def main() -> int:
    ok = True
    # A short prompt, so one recording serves many positions (across attention key tiles), then a
    # cache growth at 256 rows and a second recording.
    prompt = ",".join(str(7 + (i * 37) % 900) for i in range(30))
    # bf16 runs without prompt lookup: its verify rows go through other kernels than a one-row step
    # (rounding differently), and when the draft gate drafts depends on measured step times, so with
    # it on the same greedy run may part at a near-tie from one run to the next.
    for precision, sampling in (("f32", ["--temperature", "0"]), ("bf16", ["--temperature", "0", "--no-pld"]),
                                ("bf16", ["--temperature", "0.8", "--top-p", "0.9", "--seed", "7", "--no-pld"])):
        args = ["generate", "--model", str(MODEL), "--device", "cuda", "--matmul-precision", precision, "--prompt-ids", prompt,
                "--max-tokens", "300", "--ignore-eos", *sampling]
        outputs = {mode: run(args, mode) for mode in MODES}
        same = len(set(outputs.values())) == 1 and len(outputs["chained"].split(",")) == 300
        ok &= same
        print(f"{precision} {' '.join(sampling)}: 300 tokens after 30, identical {' / '.join(MODES)}: {same}")
    with tempfile.TemporaryDirectory() as tmp:
        config = random_checkpoint.hf_config("qwen3_5_moe-35b-a3b", 4)
        moe = random_checkpoint.write_mlx_4bit(Path(tmp) / "moe-4l", config)
        ids = ",".join(str(11 + (i * 53) % (config["vocab_size"] - 11)) for i in range(40))
        args = ["generate", "--model", str(moe), "--device", "cuda", "--matmul-precision", "bf16", "--prompt-ids", ids, "--max-tokens", "64",
                "--ignore-eos", "--temperature", "0", "--no-pld"]
        outputs = {mode: run(args, mode) for mode in MODES}
    same = len(set(outputs.values())) == 1 and len(outputs["chained"].split(",")) == 64
    ok &= same
    print(f"MoE shape, 4 layers, bf16 --temperature 0: 64 tokens after 40, identical {' / '.join(MODES)}: {same}")
    speeds = {}
    for mode in MODES:
        report = json.loads(run(["bench", "--model", str(MODEL), "--device", "cuda", "--pp", "16", "--tg", "256", "--repetitions", "3",
                                 "--json"], mode))
        speeds[mode] = round(next(r["tokens_per_second"] for r in report["results"] if r["test"].startswith("tg")), 1)
    print("decode tok/s, " + ", ".join(f"{mode}: {v}" for mode, v in speeds.items()))
    print("cuda graph check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
