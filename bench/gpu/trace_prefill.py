"""Where one prompt's time goes as `sanctum bench` runs it: every kernel of a prefill forward with its
real start and end, from a CUPTI trace (bench/gpu/kernel_trace.cc), so that the GPU's idle time
between kernels shows beside the kernels' own time. profile_decode.py --prefill sums kernel times
under Nsight Compute, which runs each kernel alone with cold caches and so cannot show idle time.

Runs `sanctum bench --pp N` on a random MLX 4-bit checkpoint of SHAPE (a warm-up forward and a timed
one) with the trace library injected, takes the last forward (the last run of kernels with no gap of
a millisecond or more), and prints: its span, the GPU's busy and idle time in it, the idle gaps by
size with the host CUDA calls that start in them, and the kernels summed by name and grid.

  python3 bench/gpu/trace_prefill.py --shape mistral-24b [--layers N] [--tokens 4096] --out DIR
Needs SANCTUM_BIN and SANCTUM_KERNEL_TRACE_LIB (the built libsanctum_kernel_trace.so).
"""
import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import random_checkpoint  # noqa: E402
from trace_decode import bench_tokens_per_second, read_trace, trace_env, traced_checkpoint  # noqa: E402


def bench_prefill_ms(model: Path, tokens: int, env: dict) -> float:
    return 1000.0 * tokens / bench_tokens_per_second(model, ["--pp", str(tokens), "--tg", "0"], "pp", env)


def last_forward(kernels: list[tuple[int, int, str, str]], split_ns: int = 1_000_000) -> list[tuple[int, int, str, str]]:
    """The timed forward: from the last embedding lookup on (each forward starts with one; the warm-up
    and the timed forward can follow each other closely), else the last run of kernels in which no
    gap reaches split_ns, of those with the most kernels."""
    kernels = sorted(kernels)
    starts = [i for i, k in enumerate(kernels) if k[2].startswith("embedding")]
    if starts:
        return kernels[starts[-1]:]
    runs, current = [], [kernels[0]]
    for k in kernels[1:]:
        if k[0] - max(c[1] for c in current[-8:]) >= split_ns:
            runs.append(current)
            current = []
        current.append(k)
    runs.append(current)
    most = max(len(r) for r in runs)
    return [r for r in runs if len(r) >= most // 2][-1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, choices=list(random_checkpoint.SHAPES))
    ap.add_argument("--layers", type=int, default=None, help="cut the shape to this many layers (default: all)")
    ap.add_argument("--tokens", type=int, default=4096)
    ap.add_argument("--top", type=int, default=25, help="kernel rows to print")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    out, suffix, model = traced_checkpoint(args)
    plain = bench_prefill_ms(model, args.tokens, {})
    trace = out / f"{args.shape}{suffix}-pp{args.tokens}-trace.csv"
    traced = bench_prefill_ms(model, args.tokens, trace_env(trace))
    replayed, outside = read_trace(trace)
    if replayed:
        raise SystemExit("prefill ran from CUDA graphs: this script reads kernels launched one by one")
    host = [(s, e, n) for s, e, n in outside if n.startswith("api ")]
    copies = [(s, e, n) for s, e, n in outside if n.startswith("memcpy ")]
    kernels = [(s, e, n, "") for s, e, n in outside if not n.startswith(("api ", "memcpy "))]
    fwd = last_forward(kernels + [(s, e, n, "copy") for s, e, n in copies])
    lo, hi = fwd[0][0], max(k[1] for k in fwd)
    busy, idle, gaps, reach = 0, 0, [], lo
    for s, e, name, _ in fwd:
        if s > reach:
            gaps.append((s - reach, reach, name))
            idle += s - reach
        busy += max(0, e - max(s, reach))
        reach = max(reach, e)
    print(f"{args.shape}{suffix} pp{args.tokens}: {plain:.2f} ms in `sanctum bench` ({traced:.2f} ms traced); traced forward: "
          f"{len(fwd)} kernels and copies, first start to last end {(hi - lo) / 1e6:.2f} ms, GPU busy {busy / 1e6:.2f} ms, idle {idle / 1e6:.2f} ms")
    buckets = defaultdict(lambda: [0, 0])
    for g, _, _ in gaps:
        b = "< 2 us" if g < 2000 else "2-10 us" if g < 10000 else "10-100 us" if g < 100000 else ">= 100 us"
        buckets[b][0] += 1
        buckets[b][1] += g
    print("idle gaps by size: " + ", ".join(f"{b}: {c} ({t / 1e6:.2f} ms)" for b, (c, t) in buckets.items()))
    print("largest gaps, with the host CUDA calls that start in them:")
    for g, at, after in sorted(gaps, reverse=True)[:10]:
        calls = sorted({n[4:] for s, e, n in host if at <= s < at + g})
        print(f"  {g / 1000:8.1f} us before {after}, {(at - lo) / 1e6:.2f} ms in: {', '.join(calls) or '-'}")
    by_name = defaultdict(lambda: [0, 0])
    for s, e, name, _ in fwd:
        by_name[name][0] += 1
        by_name[name][1] += e - s
    print(f"kernels by name ({sum(v[1] for v in by_name.values()) / 1e6:.2f} ms summed):")
    for name, (count, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:args.top]:
        print(f"  {t / 1e6:8.3f} ms {100 * t / busy:5.1f}%  {count:5d}x  {name}")
    (out / f"{args.shape}{suffix}-pp{args.tokens}.json").write_text(json.dumps(
        {"bench_ms": plain, "traced_ms": traced, "span_ms": (hi - lo) / 1e6, "busy_ms": busy / 1e6, "idle_ms": idle / 1e6,
         "kernels": [{"name": n, "count": c, "ms": t / 1e6} for n, (c, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])]}, indent=1))


if __name__ == "__main__":
    main()
