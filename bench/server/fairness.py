#!/usr/bin/env python3
"""Fairness of the batched engine: a long prompt arriving while streams decode delays each of their
tokens by at most about one prefill piece (--max-batch-tokens tokens), not by the whole prefill.

Starts `sanctum serve`, measures the long prompt's prefill alone (its TTFT with nothing else
running, over its pieces: one piece's mean time; and its last piece, which attends over the most
keys and so takes longest: the TTFT of the whole prompt less that of a prompt one piece shorter;
medians of three),
then runs --streams long streaming completions, sends the --long-prompt token prompt once they are
decoding, and reports the streams' inter-token latency p50/p99/max before it arrives and while it
prefills, with the engine's own step time over that window (sanctum_engine_step_seconds): the gaps a
client sees also hold the time its HTTP thread waits for a core. The streams ask for logprobs, so
every token is an event of its own: without them a token whose bytes end inside a UTF-8 character
(random weights pick byte tokens) is held back and reaches the client with the next one, which
would read as a gap of two steps.

  fairness.py --model DIR [--threads 2] [--streams 4] [--long-prompt 2048] [--piece 512] [--json OUT]
              [-- extra serve args]
"""
from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, p):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * (len(s) - 1))))] if s else None


def stream(port, prompt, max_tokens, stamps, stop=None):
    """One streaming completion; appends the arrival time of each streamed chunk to `stamps`."""
    body = {"model": "m", "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True, "stream": True, "temperature": 0, "logprobs": 1}
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", json.dumps(body), {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 200, resp.read()
    while True:
        line = resp.readline()
        if not line or line.startswith(b"data: [DONE]"):
            break
        if line.startswith(b"data: "):
            stamps.append(time.perf_counter())
        if stop is not None and stop.is_set():
            break
    conn.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--binary", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--streams", type=int, default=4)
    ap.add_argument("--long-prompt", type=int, default=2048)
    ap.add_argument("--piece", type=int, default=512)
    ap.add_argument("--json")
    ap.add_argument("serve_args", nargs="*")
    args = ap.parse_args()

    port = free_port()
    proc = subprocess.Popen([args.binary, "serve", "--model", f"m={args.model}", "--port", str(port), "--threads",
                             str(args.threads), "--no-pld", "--prompt-cache-mb", "0", "--max-batch-tokens", str(args.piece),
                             *args.serve_args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except OSError:
                time.sleep(0.2)
        rng = random.Random(0)
        ids = lambda n: [rng.randrange(100, 4000) for _ in range(n)]  # noqa: E731 (inside every vocabulary here)
        # The long prompt alone (after a warm-up): its pieces' mean time.
        stream(port, ids(args.piece), 1, [])
        def ttft(tokens):
            stamps = []
            t0 = time.perf_counter()
            stream(port, ids(tokens), 1, stamps)
            return stamps[0] - t0

        # Medians of three: the last piece is the difference of two TTFTs, each a few seconds long.
        pieces = -(-args.long_prompt // args.piece)
        wholes, lasts = [], []
        for _ in range(3):
            wholes.append(ttft(args.long_prompt))
            lasts.append(wholes[-1] - ttft(args.long_prompt - args.piece) if pieces > 1 else wholes[-1])
        whole, last_piece_s = percentile(wholes, 50), percentile(lasts, 50)
        piece_s = whole / pieces

        def step_totals():
            text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
            found = {}
            for line in text.splitlines():
                for key in ("sanctum_engine_step_seconds_sum", "sanctum_engine_step_seconds_count"):
                    if line.startswith(key + " "):
                        found[key] = float(line.split()[1])
            return found

        stamps = [[] for _ in range(args.streams)]
        stop = threading.Event()
        threads = [threading.Thread(target=stream, args=(port, ids(32), 4000, stamps[i], stop)) for i in range(args.streams)]
        for t in threads:
            t.start()
        time.sleep(4.0)  # the streams decode alone
        steps_before = step_totals()
        arrive = time.perf_counter()
        long_stamps = []
        stream(port, ids(args.long_prompt), 1, long_stamps)
        prefilled = long_stamps[0]
        steps_after = step_totals()
        time.sleep(1.0)
        stop.set()
        for t in threads:
            t.join(60)

        def gaps(lo, hi):
            out = []
            for s in stamps:
                out += [b - a for a, b in zip(s, s[1:]) if lo <= b <= hi]
            return out

        before, during = gaps(arrive - 3.0, arrive), gaps(arrive, prefilled)
        if not before or not during:
            raise SystemExit("the streams produced no tokens before or during the long prompt's prefill: is the machine busy?")
        ms = lambda v: round(v * 1000, 1) if v is not None else None  # noqa: E731
        result = {
            "streams": args.streams, "long_prompt": args.long_prompt, "piece": args.piece, "threads": args.threads,
            "piece_alone_ms": ms(piece_s), "last_piece_alone_ms": ms(last_piece_s), "long_prompt_alone_ttft_ms": ms(whole),
            "long_prompt_ttft_ms": ms(prefilled - arrive),
            "engine_step_mean_ms": ms((steps_after["sanctum_engine_step_seconds_sum"] - steps_before["sanctum_engine_step_seconds_sum"]) /
                                      max(1.0, steps_after["sanctum_engine_step_seconds_count"] -
                                          steps_before["sanctum_engine_step_seconds_count"])),
            "itl_before_p50_ms": ms(percentile(before, 50)), "itl_before_p99_ms": ms(percentile(before, 99)),
            "itl_during_p50_ms": ms(percentile(during, 50)), "itl_during_p99_ms": ms(percentile(during, 99)),
            "itl_during_max_ms": ms(max(during) if during else None),
        }
        result["p99_rise_ms"] = round(result["itl_during_p99_ms"] - result["itl_before_p99_ms"], 1)
        result["rise_within_one_piece"] = result["p99_rise_ms"] <= result["last_piece_alone_ms"]
        print(json.dumps(result, indent=1))
        if args.json:
            Path(args.json).write_text(json.dumps(result, indent=1) + "\n")
        return 0
    finally:
        proc.terminate()
        proc.wait(30)


if __name__ == "__main__":
    sys.exit(main())
