#!/usr/bin/env python3
"""A tuning knob on against off in batched decode on a GPU: `sanctum serve --device cuda` over a random
4-bit checkpoint at a production shape (batched_decode.make_model), once with the defaults and once
with `--tune KNOB=0`, the two servers alternating for --rounds rounds (the first of each pair
swapping every round, so neither always runs on a machine fresh from the other). Each level: that
many concurrent streams of a --prompt-tokens prompt and --max-tokens tokens, all at once; decode
tok/s = streams x 1000 / ITL p50. With --churn SECONDS each level instead runs that long with clients
looping and closing requests early at random (--cancel-prob), so sequences join and leave the batch.
With --baseline-bin BIN instead of --knob, the second server is another build with the defaults (a
change without a knob against the build before it).

  SANCTUM_BIN=... python3 bench/gpu/knob_ab.py --shape qwen3_5_moe-35b-a3b --layers 12 \\
      --knob group_decode_experts --levels 8,16,32,64 --max-tokens 128 --rounds 2 [--json OUT]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "bench" / "server"))
import loadgen  # noqa: E402
import random_checkpoint  # noqa: E402
from batched_decode import make_model  # noqa: E402


def run_server(binary: str, model: Path, knob_off: str | None, args, levels: list[int]) -> dict[int, float]:
    """Decode tok/s per level for one server (knob_off: the knob turned off, or None for the defaults)."""
    extra = ["--device", args.device, "--no-pld", "--prompt-cache-mb", "0", "--max-seqs", str(max(levels)), "--max-queue",
             str(2 * max(levels))]
    if knob_off:
        extra += ["--tune", f"{knob_off}=0"]
    with loadgen.ServeProcess(binary, str(model), 8, extra, timeout=600) as srv:
        loadgen.run(srv.url, loadgen.LoadConfig(levels=[1], prompt_tokens=args.prompt_tokens, max_tokens=4, requests_per_client=1))
        cfg = loadgen.LoadConfig(levels=levels, prompt_tokens=args.prompt_tokens, max_tokens=args.max_tokens, requests_per_client=1,
                                 duration=args.churn, cancel_prob=args.cancel_prob if args.churn else 0.0)
        rows = loadgen.run(srv.url, cfg, pid=srv.pid)
    return {r["concurrency"]: r["concurrency"] * 1000.0 / r["itl_p50_ms"] for r in rows if r.get("itl_p50_ms")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="qwen3_5_moe-35b-a3b", choices=sorted(random_checkpoint.SHAPES))
    ap.add_argument("--layers", type=int, help="fewer layers than the shape's")
    which = ap.add_mutually_exclusive_group(required=True)
    which.add_argument("--knob", help="the tuning knob to turn off in the second server (sanctum --help-tuning)")
    which.add_argument("--baseline-bin", help="the second server's binary, run with the defaults")
    ap.add_argument("--levels", default="8,16,32,64")
    ap.add_argument("--prompt-tokens", type=int, default=128)
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--churn", type=float, help="seconds per level with clients looping and cancelling at random")
    ap.add_argument("--cancel-prob", type=float, default=0.5)
    ap.add_argument("--device", default="cuda", help="cpu: a quick check of the script")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    binary = os.environ.get("SANCTUM_BIN", str(ROOT / "build" / "sanctum"))
    levels = [int(x) for x in args.levels.split(",")]
    # "on": SANCTUM_BIN with the defaults; "off": the knob turned off, or the baseline build.
    tag = {"on": f"{args.knob} on", "off": f"{args.knob} off"} if args.knob else {"on": "SANCTUM_BIN", "off": "baseline"}
    title = f"{args.knob} on against off" if args.knob else f"{binary} (on) against {args.baseline_bin} (off)"
    runs = {"on": [], "off": []}
    with tempfile.TemporaryDirectory(prefix="knob-ab-") as tmp:
        model = make_model(args.shape, Path(tmp) / args.shape, args.layers)
        for r in range(2 * args.rounds):
            order = ["on", "off"] if r % 2 == 0 else ["off", "on"]
            for which in order:
                off = which == "off"
                got = run_server(args.baseline_bin if off and args.baseline_bin else binary, model, args.knob if off else None, args, levels)
                runs[which].append(got)
                print(f"round {r + 1}, {tag[which]}: " + ", ".join(f"{c} streams {v:,.1f}" for c, v in got.items()), flush=True)
    print(f"{args.shape}{f' cut to {args.layers} layer(s)' if args.layers else ''}: decode tok/s, {title} "
          f"({len(runs['on'])} runs each{', churn' if args.churn else ''})")
    print(f"{'streams':>8}{'off (mean)':>12}{'on (mean)':>12}{'on / off':>10}")
    summary = []
    for c in levels:
        on = [run[c] for run in runs["on"] if c in run]
        off = [run[c] for run in runs["off"] if c in run]
        if not on or not off:
            continue
        m_on, m_off = statistics.mean(on), statistics.mean(off)
        summary.append({"streams": c, "on": on, "off": off, "ratio": m_on / m_off})
        print(f"{c:>8}{m_off:>12,.1f}{m_on:>12,.1f}{m_on / m_off:>9.2f}x")
    if args.json:
        args.json.write_text(json.dumps({"shape": args.shape, "layers": args.layers, "knob": args.knob, "baseline_bin": args.baseline_bin,
                                         "churn": args.churn, "levels": summary}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
