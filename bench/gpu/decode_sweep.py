"""Decode tok/s of sanctum (or with --prefill N, prefill tok/s at N tokens) for several values of
settings (every combination when --env is given more than once), on the same checkpoint in one run: the
settings are timed in turns, round after round, so that drift over the run (the GPU's clocks as it
warms, above all under GEMMs) falls on all of them alike. A lowercase NAME is a tuning knob (`sanctum
--help-tuning`, passed as SANCTUM_TUNE=NAME=V), any other an environment variable; the full benchmark
is run_bench.py. Two builds compare the same way with
SANCTUM_BIN as the setting (--env SANCTUM_BIN=/path/to/base,/path/to/new; scripts/gpu_check.sh bundles
a second binary as bin/sanctum-base when SANCTUM_GPU_BASE names one).

  python3 bench/gpu/decode_sweep.py --shapes qwen3_5-27b,mistral-24b --env weight_evict_first=0,1 \
      [--env NAME=V1,V2] [--rounds 2] [--prefill 4096 | --decode-context 16384] --out sweep.json
Needs SANCTUM_BIN (scripts/gpu_check.sh sets it).
"""
import argparse
import itertools
import json
import shutil
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import random_checkpoint  # noqa: E402
from run_bench import WORK, sanctum_bench  # noqa: E402


def env_of(setting: dict) -> dict:
    """The environment of one setting: lowercase names are tuning knobs, joined into SANCTUM_TUNE."""
    env = {name: value for name, value in setting.items() if not name.islower()}
    knobs = [f"{name}={value}" for name, value in setting.items() if name.islower()]
    if knobs:
        env["SANCTUM_TUNE"] = ",".join(knobs)
    return env


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", default=",".join(random_checkpoint.SHAPES))
    ap.add_argument("--env", required=True, action="append", metavar="NAME=V1,V2,...")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--prefill", type=int, default=0, help="time prefill at this many tokens instead of decode")
    ap.add_argument("--decode-context", type=int, default=512, help="prompt tokens before the timed decode")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    axes = [(name, values.split(",")) for name, _, values in (e.partition("=") for e in args.env)]
    settings = [dict(zip([n for n, _ in axes], combo)) for combo in itertools.product(*[v for _, v in axes])]
    labels = [" ".join(f"{n}={v}" for n, v in s.items()) for s in settings]
    WORK.mkdir(parents=True, exist_ok=True)
    results = {}
    for shape in args.shapes.split(","):
        model_dir = WORK / shape
        random_checkpoint.write_mlx_4bit(model_dir, random_checkpoint.hf_config(shape))
        runs = {label: [] for label in labels}
        test = f"pp{args.prefill}" if args.prefill else f"tg128@{args.decode_context}"
        for _ in range(args.rounds):
            for label, env in zip(labels, settings):
                by_test = sanctum_bench(model_dir, env_of(env), decode_only=True, prefill_only=args.prefill,
                                        decode_context=args.decode_context)["by_test"]
                runs[label].append(by_test[test])
        shutil.rmtree(model_dir, ignore_errors=True)
        results[shape] = runs
        print(f"## {shape}: {test} tok/s, the first setting as the base")
        base = statistics.median(runs[labels[0]])
        for label in labels:
            m = statistics.median(runs[label])
            print(f"  {label:40s}  median {m:7.1f}  ({m / base:.3f}x)  runs {', '.join(f'{x:.1f}' for x in runs[label])}")
        Path(args.out).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
