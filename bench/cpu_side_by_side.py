#!/usr/bin/env python3
"""sanctum beside llama.cpp on this CPU: the same random weights, the same threads, in turns.

For each shape (the MLX benchmark checkpoints of bench/peers/checkpoints.py, converted to GGUF by
bench/peers/mlx_to_gguf.py: Q4_0 for 4-bit g64, Q8_0 for 8-bit), one run measures
  prefill 512 and 2,048 tokens, decode 128 tokens after a 512-token prompt (single stream):
    sanctum through `sanctum bench --json` (--matmul-precision int8 and f32 rows), llama.cpp
    through its C API (bench/peers/llama_peer.py) in a child process;
  batched decode at 4 and 8 sequences (each a --batch-prompt prompt, then --batch-gen tokens):
    llama.cpp through llama_batch with one seq_id per sequence, sanctum through `sanctum serve` and
    the HTTP load generator (bench/server/loadgen.py), aggregate output tok/s end to end;
  peak RSS of each process (bench runs and llama.cpp from wait4, the server sampled).
Prints one table per shape with sanctum/llama.cpp ratios; --json writes everything.

Run with the bench venv (bench/peers/setup_venv.sh makes it; the checkpoints need the test venv):
  .venv/bin/python bench/peers/checkpoints.py --shape qwen2-0.5b --bits 4
  .venv-bench/bin/python bench/cpu_side_by_side.py [--shapes qwen2-0.5b qwen3_5-0.8b] [--threads 2] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench" / "peers"))
sys.path.insert(0, str(ROOT / "bench" / "server"))
import llama_peer  # noqa: E402
import loadgen  # noqa: E402

SHAPES = ["qwen2-0.5b", "qwen3_5-0.8b", "qwen3_5_moe-small"]


def run_child(cmd: list[str], timeout: float) -> tuple[str, int]:
    """Runs cmd; returns (stdout, peak RSS bytes of that process alone, from wait4)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    out_parts, err_parts = [], []
    readers = [threading.Thread(target=lambda s, p: p.append(s.read()), args=(proc.stdout, out_parts)),
               threading.Thread(target=lambda s, p: p.append(s.read()), args=(proc.stderr, err_parts))]
    for t in readers:
        t.start()
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        if time.time() > deadline:
            proc.kill()
            pid, status, usage = os.wait4(proc.pid, 0)
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:3])} ... exited {proc.returncode}:\n{''.join(err_parts)[-3000:]}")
    return "".join(out_parts), usage.ru_maxrss * 1024


def sanctum_bench(binary: str, model: Path, threads: int, prefill: list[int], gen: int, context: int, reps: int,
                  precision: str) -> dict:
    cmd = [binary, "bench", "--model", str(model), *sum((["--pp", str(n)] for n in prefill), []), "--tg", str(gen),
           "--decode-context", str(context), "--repetitions", str(reps), "--threads", str(threads),
           "--matmul-precision", precision, "--json"]
    out, rss = run_child(cmd, timeout=3600)
    data = json.loads(out)
    res = {}
    for r in data["results"]:
        key = f"prefill_{r['tokens']}" if r["test"].startswith("pp") else "decode"
        res[key] = r["tokens_per_second"]
    return {**res, "peak_rss": rss, "weight_bytes_per_token": data["weight_bytes_per_token"]}


def llama_child(gguf: str, threads: int, prefill: list[int], gen: int, context: int, reps: int, batches: list[int],
                batch_prompt: int, batch_gen: int) -> dict:
    """Runs inside the child process, so its peak RSS is llama.cpp's alone."""
    out = {}
    peer = llama_peer.LlamaPeer(gguf, threads, n_ctx=max(max(prefill), context + gen) + 16)
    vocab = peer.vocab
    try:
        for n in prefill:
            toks = llama_peer.random_tokens(n, vocab, 42)
            peer.time_prefill(toks)  # warm-up
            out[f"prefill_{n}"] = sum(n / peer.time_prefill(toks) for _ in range(reps)) / reps
        ctx_toks, gen_toks = llama_peer.random_tokens(context, vocab, 7), llama_peer.random_tokens(gen, vocab, 9)
        peer.time_decode(ctx_toks, gen_toks[:8])  # warm-up
        out["decode"] = sum(gen / peer.time_decode(ctx_toks, gen_toks) for _ in range(reps)) / reps
    finally:
        peer.close()
    for b in batches:
        peer = llama_peer.LlamaPeer(gguf, threads, n_ctx=b * (batch_prompt + batch_gen) + 16, n_seq=b)
        try:
            prompts = [llama_peer.random_tokens(batch_prompt, vocab, 100 + s) for s in range(b)]
            peer.time_batched(prompts[:1], 4)  # warm-up
            out[f"batched_{b}"] = peer.time_batched(prompts, batch_gen)
        finally:
            peer.close()
    out["peak_rss"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    import llama_cpp
    out["llama_cpp_python"] = llama_cpp.__version__
    return out


def sanctum_batched(binary: str, model: Path, threads: int, batches: list[int], batch_prompt: int, batch_gen: int,
                    precision: str) -> dict:
    cfg = loadgen.LoadConfig(levels=batches, prompt_tokens=batch_prompt, max_tokens=batch_gen, requests_per_client=1)
    # Prompt-lookup drafts are off: llama.cpp decodes without them here.
    with loadgen.ServeProcess(binary, str(model), threads, ["--matmul-precision", precision, "--no-pld"]) as srv:
        warm = loadgen.LoadConfig(levels=[1], prompt_tokens=batch_prompt, max_tokens=4, requests_per_client=1, seed=99)
        loadgen.run(srv.url, warm)
        levels = loadgen.run(srv.url, cfg, pid=srv.pid)
    out = {f"batched_{r['concurrency']}": r for r in levels}
    out["peak_rss"] = max(r.get("rss_peak", 0) for r in levels)
    return out


def ensure_inputs(shape: str, bits: int) -> tuple[Path, Path]:
    ckpt = ROOT / "bench" / "out" / f"{shape}-q{bits}g64"
    if not (ckpt / "config.json").exists() or not (ckpt / "tokenizer.json").exists():
        test_py = ROOT / ".venv" / "bin" / "python"
        subprocess.run([str(test_py), str(ROOT / "bench" / "peers" / "checkpoints.py"), "--shape", shape, "--bits", str(bits)],
                       check=True)
    gguf = ckpt.parent / f"{ckpt.name}.gguf"
    if not gguf.exists():
        import mlx_to_gguf
        mlx_to_gguf.convert(ckpt, gguf)
    return ckpt, gguf


def fmt_table(shape: str, bits: int, r: dict, a) -> str:
    ll, s8, s32 = r["llama"], r["sanctum_int8"], r["sanctum_f32"]
    b8, b32 = r["serve_int8"], r["serve_f32"]
    lines = [f"shape {shape}, {bits}-bit ({'Q4_0' if bits == 4 else 'Q8_0'} for llama.cpp), {a.threads} threads",
             f"{'':32}{'llama.cpp':>11}{'sanctum int8':>14}{'x':>7}{'sanctum f32':>13}{'x':>7}"]

    def row(label, lv, iv, fv, unit_scale=1.0, spec="11.1f"):
        ri = f"{iv / lv:7.2f}" if lv else f"{'':7}"
        rf = f"{fv / lv:7.2f}" if lv else f"{'':7}"
        lines.append(f"{label:32}{lv * unit_scale:{spec}}{iv * unit_scale:14.1f}{ri}{fv * unit_scale:13.1f}{rf}")
    for n in a.prefill:
        row(f"prefill {n} tok/s", ll[f"prefill_{n}"], s8[f"prefill_{n}"], s32[f"prefill_{n}"])
    row(f"decode {a.gen} after {a.context} tok/s", ll["decode"], s8["decode"], s32["decode"])
    for b in a.batch:
        row(f"batched decode {b} seqs tok/s", ll[f"batched_{b}"]["aggregate_tok_s"], b8[f"batched_{b}"]["aggregate_tok_s"],
            b32[f"batched_{b}"]["aggregate_tok_s"])
    row("peak RSS MB, single stream", ll["peak_rss"], s8["peak_rss"], s32["peak_rss"], 1e-6)
    row("peak RSS MB, batched (server)", ll["peak_rss"], b8["peak_rss"], b32["peak_rss"], 1e-6)
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shapes", nargs="+", default=SHAPES, choices=SHAPES)
    ap.add_argument("--bits", type=int, default=4, choices=[4, 8])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prefill", type=int, nargs="+", default=[512, 2048])
    ap.add_argument("--gen", type=int, default=128)
    ap.add_argument("--context", type=int, default=512, help="prompt tokens before the timed decode")
    ap.add_argument("--batch", type=int, nargs="+", default=[4, 8])
    ap.add_argument("--batch-prompt", type=int, default=128)
    ap.add_argument("--batch-gen", type=int, default=64)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    ap.add_argument("--json", type=Path)
    ap.add_argument("--llama-child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.llama_child:
        print(json.dumps(llama_child(a.llama_child, a.threads, a.prefill, a.gen, a.context, a.reps, a.batch,
                                     a.batch_prompt, a.batch_gen)))
        return 0

    report = {"command": " ".join(sys.argv), "machine": platform.processor() or platform.machine(),
              "cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
              "load_average_start": os.getloadavg(), "shapes": {}}
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            report["machine"] = line.split(":", 1)[1].strip()
            break
    tables = []
    for shape in a.shapes:
        ckpt, gguf = ensure_inputs(shape, a.bits)
        r = {"sanctum_int8": sanctum_bench(a.sanctum, ckpt, a.threads, a.prefill, a.gen, a.context, a.reps, "int8"),
             "sanctum_f32": sanctum_bench(a.sanctum, ckpt, a.threads, a.prefill, a.gen, a.context, a.reps, "f32")}
        child = [sys.executable, __file__, "--llama-child", str(gguf), "--threads", str(a.threads), "--gen", str(a.gen),
                 "--context", str(a.context), "--reps", str(a.reps), "--batch-prompt", str(a.batch_prompt),
                 "--batch-gen", str(a.batch_gen), "--prefill", *map(str, a.prefill), "--batch", *map(str, a.batch)]
        out, rss = run_child(child, timeout=3600)
        r["llama"] = {**json.loads(out.strip().splitlines()[-1]), "peak_rss": rss}
        r["serve_int8"] = sanctum_batched(a.sanctum, ckpt, a.threads, a.batch, a.batch_prompt, a.batch_gen, "int8")
        r["serve_f32"] = sanctum_batched(a.sanctum, ckpt, a.threads, a.batch, a.batch_prompt, a.batch_gen, "f32")
        r["weight_file_bytes"] = sum(p.stat().st_size for p in ckpt.glob("*.safetensors"))
        r["gguf_bytes"] = gguf.stat().st_size
        report["shapes"][shape] = r
        tables.append(fmt_table(shape, a.bits, r, a))
        print(tables[-1] + "\n", flush=True)
        if a.json:  # after every shape: a long run cut short keeps what it measured
            a.json.write_text(json.dumps(report, indent=2))
    report["load_average_end"] = os.getloadavg()
    print(f"batched rows: {a.batch_prompt}-token prompts, {a.batch_gen} tokens each, aggregate output tok/s end to end "
          f"(prefills included); load average {report['load_average_start'][0]:.1f} at start, "
          f"{report['load_average_end'][0]:.1f} at end")
    if a.json:
        a.json.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
