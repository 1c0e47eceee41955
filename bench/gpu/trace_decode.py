"""Where a decode step's time goes as served: every kernel of the recorded step (CUDA graph replay,
programmatic dependent launch on) with its real start and end, from a CUPTI trace.

profile_decode.py times kernels one at a time under Nsight Compute, which overstates small kernels and
cannot show what one kernel costs the next. This runs `sanctum bench` decode on a random MLX 4-bit
checkpoint of SHAPE with libsanctum_kernel_trace.so injected (bench/gpu/kernel_trace.cc), then for the
last STEPS graph launches prints, per kernel of the step in order: how long it ran, and how far it
moved the step's end (its end minus the end of the kernel before it, "advance"). The advances add up
to the step; a kernel that starts early and waits costs only its advance. Then the same summed by
kernel name, the step time with and without the trace (the trace's own cost), and what fills the
GPU's idle time between two steps: the pick, the copies and the host's CUDA calls, in order. CUPTI's
own cost lands mostly there, in cudaGraphLaunch above all (0.6-0.9 ms traced, where cutting the step
into three graphs launched one after another changed untraced decode by under 0.5%), so read that
part for its order of events, not its times.

  python3 bench/gpu/trace_decode.py --shape qwen3_5-27b [--layers N] [--steps 32] [--show 40] --out DIR
Needs SANCTUM_BIN and SANCTUM_KERNEL_TRACE_LIB (the built libsanctum_kernel_trace.so).
"""
import argparse
import csv
import json
import os
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import random_checkpoint  # noqa: E402


def bench_tokens_per_second(model: Path, args: list[str], test: str, env: dict) -> float:
    """tok/s of the `sanctum bench --device cuda` result whose test name starts with `test` ("pp", "tg")."""
    cmd = [os.environ["SANCTUM_BIN"], "bench", "--model", str(model), "--device", "cuda", *args, "--repetitions", "1", "--json"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env={**os.environ, **env})
    if r.returncode != 0:
        raise SystemExit(f"sanctum bench failed: {r.stderr[-2000:]}")
    return [x for x in json.loads(r.stdout)["results"] if x["test"].startswith(test)][0]["tokens_per_second"]


def bench_step_us(model: Path, tokens: int, env: dict) -> float:
    return 1e6 / bench_tokens_per_second(model, ["--tg", str(tokens), "--decode-context", "512"], "tg", env)


def traced_checkpoint(args) -> tuple[Path, str, Path]:
    """Checks the environment, makes args.out and the random checkpoint of args.shape cut to
    args.layers (kept between runs); returns the out folder, the checkpoint's name suffix and its path."""
    missing = [v for v in ("SANCTUM_BIN", "SANCTUM_KERNEL_TRACE_LIB") if not os.environ.get(v)]
    if missing:
        raise SystemExit(f"set {' and '.join(missing)} (scripts/gpu_check.sh run sets both from the bundle)")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = f"-{args.layers}l" if args.layers else ""
    model = Path(os.environ.get("SANCTUM_BENCH_DIR", "/tmp/sanctum-bench")) / f"{args.shape}{suffix}"
    if not (model / "config.json").exists():
        random_checkpoint.write_mlx_4bit(model, random_checkpoint.hf_config(args.shape, args.layers))
    return out, suffix, model


def trace_env(trace: Path) -> dict:
    """The environment that injects the kernel trace library, writing its CSV to `trace`."""
    return {"CUDA_INJECTION64_PATH": os.environ["SANCTUM_KERNEL_TRACE_LIB"], "SANCTUM_KERNEL_TRACE": str(trace)}


def short_name(name: str) -> str:
    """The kernel's function name without namespaces, template arguments or parameters."""
    depth, base = 0, []
    for ch in name:  # drop everything inside <...> and (...)
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            base.append(ch)
    words = "".join(base).split()
    return (words[-1] if words else name).split("::")[-1]


def read_trace(trace: Path) -> tuple[list[dict], list[tuple[int, int, str]]]:
    """The trace in one pass: the kernels replayed from graphs (rows with integer start and end), and
    everything else as (start, end, name): kernels launched on their own, copies, host CUDA calls."""
    replayed, outside = [], []
    with trace.open() as f:
        for row in csv.DictReader(f):
            start, end = int(row["start_ns"]), int(row["end_ns"])
            if row["graph"] != "0" and row["grid"] != "-":
                row["start"], row["end"] = start, end
                replayed.append(row)
            else:
                outside.append((start, end, row["name"] if row["grid"] == "-" else short_name(row["name"])))
    return replayed, outside


def read_steps(replayed: list[dict], steps: int) -> list[list[dict]]:
    launches = defaultdict(list)
    for row in replayed:
        launches[(row["graph"], row["correlation"])].append(row)
    if not launches:
        raise SystemExit("no graph launches in the trace: is the cuda_graphs knob off, or the trace library not loaded?")
    # The decode step is the graph launched most often; its last launches are the steady state.
    count = defaultdict(int)
    for graph, _ in launches:
        count[graph] += 1
    graph = max(count, key=count.get)
    ordered = sorted((sorted(k, key=lambda r: r["start"]) for (g, _), k in launches.items() if g == graph), key=lambda k: k[0]["start"])
    return ordered[-steps:]


def between_steps(outside: list[tuple[int, int, str]], steps: list[list[dict]]) -> tuple[float, list[tuple[str, float, float, int]]]:
    """The GPU's idle time from one recorded step's last kernel to the next one's first, averaged,
    and what fills it: the work outside the graph (kernels, copies) and the host's CUDA calls, each
    by name with its mean time inside the gap, its mean start after the gap opens, and its count per gap."""
    windows = [(max(r["end"] for r in a), min(r["start"] for r in b)) for a, b in zip(steps, steps[1:])]
    if not windows:
        return 0.0, []
    by_name = defaultdict(lambda: [0.0, 0.0, 0])
    for lo, hi in windows:
        for start, end, name in outside:
            inside = min(end, hi) - max(start, lo)
            if inside > 0 or (lo <= start <= hi):
                by_name[name][0] += max(0, inside)
                by_name[name][1] += start - lo
                by_name[name][2] += 1
    n = len(windows)
    gap = sum(hi - lo for lo, hi in windows) / n / 1000
    rows = sorted(((name, t / n / 1000, at / c / 1000, c / n) for name, (t, at, c) in by_name.items()), key=lambda r: r[2])
    return gap, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, choices=list(random_checkpoint.SHAPES))
    ap.add_argument("--layers", type=int, default=None, help="cut the shape to this many layers (default: all)")
    ap.add_argument("--steps", type=int, default=32, help="average over the last STEPS decode steps")
    ap.add_argument("--show", type=int, default=40, help="print the first SHOW kernels of the step one by one")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out, suffix, model = traced_checkpoint(args)
    tokens = args.steps + 16
    plain = bench_step_us(model, tokens, {})
    trace = out / f"{args.shape}{suffix}-trace.csv"
    traced = bench_step_us(model, tokens, trace_env(trace))
    replayed, outside = read_trace(trace)
    steps = read_steps(replayed, args.steps)
    lengths = {len(s) for s in steps}
    if len(lengths) != 1:
        raise SystemExit(f"decode steps differ in kernel count: {sorted(lengths)}")
    n = lengths.pop()
    span = sum(s[-1]["end"] - s[0]["start"] for s in steps) / len(steps) / 1000
    period = sum(b[0]["start"] - a[0]["start"] for a, b in zip(steps, steps[1:])) / max(1, len(steps) - 1) / 1000
    print(f"{args.shape}{suffix}: decode step {plain:.1f} us in `sanctum bench` ({traced:.1f} us traced); traced step: {n} kernels, "
          f"first start to last end {span:.1f} us, launch to launch {period:.1f} us")
    rows = []
    for i in range(n):
        dur = sum(s[i]["end"] - s[i]["start"] for s in steps) / len(steps) / 1000
        adv = sum(s[i]["end"] - (s[i - 1]["end"] if i else s[i]["start"]) for s in steps) / len(steps) / 1000
        early = sum(max(0, (s[i - 1]["end"] if i else s[i]["start"]) - s[i]["start"]) for s in steps) / len(steps) / 1000
        first = steps[0][i]
        rows.append((short_name(first["name"]), first["grid"], first["block"], dur, adv, early))
    print(f"first {min(args.show, n)} kernels of the step: ran (us), advance (us), started ahead of the previous end (us), grid x block")
    for name, grid, block, dur, adv, early in rows[:args.show]:
        print(f"  {dur:7.2f} {adv:7.2f} {early:6.2f}  {name}  {grid}x{block}")
    by_name = defaultdict(lambda: [0, 0.0, 0.0])
    for name, grid, _, dur, adv, _ in rows:
        key = f"{name} {grid}"
        by_name[key][0] += 1
        by_name[key][1] += dur
        by_name[key][2] += adv
    total = sum(v[2] for v in by_name.values())
    print(f"by kernel and grid, per step (advance sum {total:.1f} us):")
    for key, (count, dur, adv) in sorted(by_name.items(), key=lambda kv: -kv[1][2]):
        print(f"  {adv:8.1f} us advance ({100 * adv / total:4.1f}%)  {dur:8.1f} us ran  {count:3d}x  {key}")
    gap, fill = between_steps(outside, steps)
    print(f"between steps (GPU idle from a step's last kernel to the next one's first): {gap:.1f} us; in it, by start:")
    for name, inside, at, count in fill:
        print(f"  starts {at:8.1f} us in, {inside:7.1f} us inside, {count:4.1f}x  {name}")
    (out / f"{args.shape}{suffix}-step.json").write_text(json.dumps(
        {"bench_step_us": plain, "traced_step_us": traced, "span_us": span, "period_us": period, "between_steps_us": gap,
         "between_steps": [dict(zip(("name", "inside_us", "starts_us", "per_gap"), r)) for r in fill],
         "kernels": [dict(zip(("name", "grid", "block", "ran_us", "advance_us", "ahead_us"), r)) for r in rows]}, indent=1))


if __name__ == "__main__":
    main()
