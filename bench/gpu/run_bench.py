"""GPU benchmark, sanctum and transformers side by side in one run on one machine.

For each shape (Qwen3.5-27B dense hybrid, Qwen3.6-35B-A3B hybrid MoE, Devstral-Small-24B) it writes a
random MLX 4-bit g64 checkpoint on the machine itself, runs `sanctum bench --device cuda` (prefill 512
and 4096, decode 128 after a 512-token context, device copy bandwidth), then the transformers peer on
the same shape in bf16 in a fresh process, and prints each figure with the ratio to the peer and the
decode bandwidth floor (weight bytes read per token / measured copy bandwidth). Both sides time each
test alike: one warm-up, then REPETITIONS timed runs, whose mean is the figure (each run printed too).

  python3 bench/gpu/run_bench.py [--shapes a,b] [--no-peer] --out results.json
Needs SANCTUM_BIN (scripts/gpu_check.sh sets it) and a GPU with room for the largest shape in bf16.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import random_checkpoint  # noqa: E402

WORK = Path(os.environ.get("SANCTUM_BENCH_DIR", "/tmp/sanctum-bench"))
PEER_TIMEOUT = int(os.environ.get("SANCTUM_PEER_TIMEOUT", "300"))  # seconds per shape; the MoE peer can be very slow
REPETITIONS = 2  # timed runs of each test after a warm-up, on both sides; each side reports their mean


def sanctum_bench(model_dir: Path, env: dict | None = None, decode_only: bool = False, prefill_only: int = 0,
                  decode_context: int = 512) -> dict:
    """decode_only: tg128 after decode_context (512) alone; prefill_only=N: ppN alone; else the full set.
    env may name another binary as SANCTUM_BIN (decode_sweep.py's comparisons of two builds)."""
    binary = (env or {}).get("SANCTUM_BIN", os.environ["SANCTUM_BIN"])
    cmd = [binary, "bench", "--model", str(model_dir), "--device", "cuda", "--memory-bandwidth"]
    if prefill_only:
        cmd += ["--pp", str(prefill_only), "--tg", "0"]
    else:
        cmd += [] if decode_only else ["--pp", "512", "--pp", "4096"]
        cmd += ["--tg", "128", "--decode-context", str(decode_context)]
    cmd += ["--repetitions", str(REPETITIONS), "--json"]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **(env or {})})
    if r.returncode != 0:
        raise RuntimeError(f"sanctum bench failed: {r.stderr[-2000:]}")
    out = json.loads(r.stdout)
    out["wall_seconds"] = time.perf_counter() - t0
    out["by_test"] = {x["test"]: x["tokens_per_second"] for x in out["results"]}
    return out


def generate_decode(model_dir: Path, env: dict) -> float:
    """Decode tok/s of `sanctum generate` (sampling included) over 128 greedy tokens after 512 prompt tokens."""
    ids = ",".join(str(7 + (i * 7919) % 20000) for i in range(512))
    cmd = [os.environ["SANCTUM_BIN"], "generate", "--model", str(model_dir), "--device", "cuda", "--prompt-ids", ids, "--max-tokens",
           "128", "--ignore-eos", "--no-pld", "--timing"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    if r.returncode != 0:
        raise RuntimeError(f"sanctum generate failed: {r.stderr[-2000:]}")
    return float(r.stderr.split("decode ")[1].split(" tok/s")[0])


def peer(shape: str) -> dict:
    out = WORK / f"{shape}-peer.json"
    try:
        r = subprocess.run([sys.executable, str(HERE / "transformers_peer.py"), "--shape", shape, "--out", str(out), "--repetitions",
                            str(REPETITIONS)], capture_output=True, text=True, timeout=PEER_TIMEOUT)
    except subprocess.TimeoutExpired:
        return {"error": f"did not finish in {PEER_TIMEOUT} s"}
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
    return json.loads(out.read_text())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=",".join(random_checkpoint.SHAPES))
    ap.add_argument("--no-peer", action="store_true")
    ap.add_argument("--out", required=True)
    ap.add_argument("--generate", action="store_true",
                    help="also time `sanctum generate` decode (sampling included) with sampling on the GPU and on the host")
    ap.add_argument("--compare-env", metavar="NAME=VALUE",
                    help="also time prefill and decode with this environment setting, in the same run on the same checkpoint")
    args = ap.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    results = {}
    for shape in args.shapes.split(","):
        model_dir = WORK / shape
        t0 = time.perf_counter()
        random_checkpoint.write_mlx_4bit(model_dir, random_checkpoint.hf_config(shape))
        written = time.perf_counter() - t0
        try:
            ours = sanctum_bench(model_dir)
        except Exception as e:  # report and go on with the other shapes
            ours = {"error": str(e)}
        if args.compare_env and "error" not in ours:
            name, _, value = args.compare_env.partition("=")
            other = sanctum_bench(model_dir, {name: value})
            ours["compare_env"] = {"setting": args.compare_env, "by_test": other["by_test"]}
            print(f"  with {args.compare_env}: " + ", ".join(
                f"{test} {other['by_test'].get(test, 0):.1f} tok/s (default {ours['by_test'].get(test, 0):.1f})"
                for test in ("pp512", "pp4096", "tg128@512")))
        if args.generate and "error" not in ours:
            device, host = (generate_decode(model_dir, {"SANCTUM_TUNE": f"gpu_sampling={v}"}) for v in ("1", "0"))
            ours["generate_decode"] = {"gpu_sampling": device, "host_sampling": host}
            print(f"  generate decode (128 greedy tokens after 512): sampling on the GPU {device:.1f} tok/s, on the host {host:.1f}")
        shutil.rmtree(model_dir, ignore_errors=True)
        theirs = {} if args.no_peer else peer(shape)
        results[shape] = {"sanctum": ours, "transformers": theirs, "checkpoint_write_seconds": written}
        print_row(shape, ours, theirs)
        Path(args.out).write_text(json.dumps(results, indent=1))


def runs_of(side: dict, test: str) -> str:
    """A side's timed runs of one test, as `sanctum bench` (results) or the peer (runs) reports them."""
    if "results" in side:
        runs = next((r.get("runs", []) for r in side["results"] if r["test"] == test), [])
    else:
        runs = side.get("runs", {}).get(test, [])
    return ", ".join(f"{x:.1f}" for x in runs)


def print_row(shape: str, ours: dict, theirs: dict):
    print(f"\n## {shape}")
    if "error" in ours:
        print(f"  sanctum: {ours['error']}")
        return
    bw = ours.get("memory_read_gb_per_second", 0.0)
    weight_gb = ours["weight_bytes_per_token"] / 1e9
    floor = bw / weight_gb if weight_gb else 0.0
    print(f"  weights read per token {weight_gb:.2f} GB, device copy bandwidth {bw:.0f} GB/s -> floor {floor:.0f} tok/s; "
          f"GPU memory peak {ours.get('gpu_memory_peak_bytes', 0) / 2**30:.1f} GiB")
    for test in ("pp512", "pp4096", "tg128@512"):
        v = ours["by_test"].get(test)
        p = theirs.get(test) if isinstance(theirs, dict) else None
        line = f"  {test:10s} sanctum {v:9.1f} tok/s"
        if test.startswith("tg") and floor:
            line += f" ({100 * v / floor:.0f}% of floor)"
        if p:
            line += f" | transformers {p:9.1f} tok/s | ratio {v / p:.2f}x"
            line += f"  (runs {runs_of(ours, test)} | {runs_of(theirs, test)})"
        elif isinstance(theirs, dict) and "error" in theirs:
            line += f" | transformers: {theirs['error']}"
        print(line)
    pp = ours["by_test"].get("pp512")
    if pp:
        print(f"  TTFT (512-token prompt) {1000 * 512 / pp:.0f} ms")


if __name__ == "__main__":
    main()
