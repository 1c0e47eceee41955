"""Recorded decode steps (CUDA graphs) on a GPU machine: with them on (the default) and off
(SANCTUM_CUDA_GRAPHS=0), `sanctum generate --device cuda` must print the same tokens, in both matmul
precisions, over a generation that crosses attention key tiles and KV-cache growth (a 256-row block
boundary, where the step is recorded again); then the decode speed of each, side by side, on the embedded default model (a tiny
hybrid model, where launch cost is nearly the whole step).

  python3 tests/gpu/cuda_graph_check.py          (needs SANCTUM_BIN)
"""
import json
import os
import subprocess
import sys
from pathlib import Path

MODEL = Path(__file__).resolve().parents[2] / "models" / "default" / "mlx-4bit"


def run(args, graphs: bool) -> str:
    env = dict(os.environ, SANCTUM_CUDA_GRAPHS="1" if graphs else "0")
    out = subprocess.run([os.environ["SANCTUM_BIN"], *args], env=env, capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise SystemExit(f"sanctum {' '.join(args)} failed: {out.stderr.strip()}")
    return out.stdout.strip()


def main() -> int:
    ok = True
    # A short prompt, so one recording serves many positions (across attention key tiles), then a
    # cache growth at 256 rows and a second recording.
    prompt = ",".join(str(7 + (i * 37) % 900) for i in range(30))
    for precision in ("f32", "bf16"):
        args = ["generate", "--model", str(MODEL), "--device", "cuda", "--matmul-precision", precision, "--prompt-ids", prompt,
                "--max-tokens", "300", "--temperature", "0", "--ignore-eos"]
        with_graphs, without = run(args, True), run(args, False)
        same = with_graphs == without and len(with_graphs.split(",")) == 300
        ok &= same
        print(f"{precision}: 300 tokens after 30, graphs on/off identical: {same}")
    speeds = {}
    for graphs in (True, False):
        report = json.loads(run(["bench", "--model", str(MODEL), "--device", "cuda", "--pp", "16", "--tg", "256", "--repetitions", "3",
                                 "--json"], graphs))
        speeds[graphs] = round(next(r["tokens_per_second"] for r in report["results"] if r["test"].startswith("tg")), 1)
    print(f"decode tok/s, graphs on: {speeds[True]}, off: {speeds[False]}")
    print("cuda graph check:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
