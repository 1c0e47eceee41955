#!/usr/bin/env python3
"""Router overhead on loopback: added time to first byte (router minus direct, p50/p99) and router
throughput, against a fake upstream fast enough not to be the bottleneck (fake_upstream.cc, one
epoll thread) with a C++ closed-loop load generator (load.cc). Both are compiled here with g++.

Usage: python bench/router/bench_router.py [--sanctum build/sanctum] [--seconds 5] [--latency-requests 5000]
Prints a Markdown table; the same numbers as JSON with --json.
"""
from __future__ import annotations

import argparse
import json
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def build(out: Path) -> tuple[Path, Path]:
    fake, load = out / "fake_upstream", out / "load"
    subprocess.run(["g++", "-O2", "-std=c++20", "-o", str(fake), str(HERE / "fake_upstream.cc")], check=True)
    subprocess.run(["g++", "-O2", "-std=c++20", "-pthread", "-o", str(load), str(HERE / "load.cc")], check=True)
    return fake, load


def wait_port(port: int, timeout: float = 10) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"nothing listens on {port}")


def run_load(load: Path, port: int, conns: int, amount: float) -> dict:
    out = subprocess.run([str(load), str(port), str(conns), str(amount)], check=True, capture_output=True, text=True, timeout=600)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--seconds", type=float, default=5.0, help="duration of each throughput run")
    ap.add_argument("--latency-requests", type=int, default=5000, help="sequential requests per latency run")
    ap.add_argument("--conns", default="8,16,32", help="connection counts for the throughput runs")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        fake, load = build(tmp)
        up_port, router_port = free_port(), free_port()
        procs = [subprocess.Popen([str(fake), str(up_port)], stderr=subprocess.DEVNULL)]
        try:
            wait_port(up_port)
            config = tmp / "router.yaml"
            config.write_text(json.dumps({
                "listen": {"port": router_port, "max_connections": 4096},
                "health": {"interval_s": 5, "timeout_s": 1},
                "backends": [{"name": "fake", "models": ["m"], "url": f"http://127.0.0.1:{up_port}"}]}))
            procs.append(subprocess.Popen([args.sanctum, "route", "--config", str(config), "--log-level", "warn"],
                                          stderr=subprocess.DEVNULL))
            wait_port(router_port)
            results = {}
            # Latency: one connection, sequential requests, direct then through the router.
            results["direct_c1"] = run_load(load, up_port, 1, -args.latency_requests)
            results["router_c1"] = run_load(load, router_port, 1, -args.latency_requests)
            for c in [int(x) for x in args.conns.split(",")]:
                results[f"router_c{c}"] = run_load(load, router_port, c, args.seconds)
            results[f"direct_c16"] = run_load(load, up_port, 16, min(args.seconds, 2.0))
        finally:
            for p in procs:
                p.terminate()
                p.wait(10)

    d, r = results["direct_c1"], results["router_c1"]
    added = {"p50_ms": r["ttfb_p50_ms"] - d["ttfb_p50_ms"], "p99_ms": r["ttfb_p99_ms"] - d["ttfb_p99_ms"]}
    results["added_ttfb"] = added
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print("| run | conns | requests | errors | req/s | TTFB p50 ms | TTFB p99 ms |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name, v in results.items():
        if name == "added_ttfb":
            continue
        kind, conns = name.rsplit("_c", 1)
        print(f"| {kind} | {conns} | {v['requests']} | {v['errors']} | {v['rps']:.0f} | {v['ttfb_p50_ms']:.3f} | {v['ttfb_p99_ms']:.3f} |")
    print(f"\nadded TTFB through the router (sequential, keep-alive): p50 {added['p50_ms']:.3f} ms, p99 {added['p99_ms']:.3f} ms")
    best = max(v["rps"] for k, v in results.items() if k.startswith("router_c") and k != "router_c1")
    print(f"router throughput (best of the concurrent runs): {best:.0f} req/s")


if __name__ == "__main__":
    sys.exit(main())
