"""cuBLAS through torch at the 24B shape's prompt GEMMs (4,096 tokens, random bf16 operands): time with
bf16 and with f32 outputs, and the kernel cuBLAS picks for each. What a prompt GEMM of ours can expect
from cuBLAS on this card, apart from its inputs' data (random data draws more power than trained weights,
and the clocks follow).

  python3 bench/gpu/gemm_probe.py [--tokens 4096]
"""
import argparse

import torch

# (rows, cols) of the 24B shape's weights: stacked q/k/v, q, k or v, o, stacked gate/up, gate or up, down.
SHAPES = {"qkv": (6144, 5120), "q": (4096, 5120), "kv": (1024, 5120), "o": (5120, 4096), "gate_up": (65536, 5120),
          "gate": (32768, 5120), "down": (5120, 32768)}


def mean_us(f, reps: int = 20) -> float:
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(reps):
        f()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / reps * 1000


def kernels(f) -> list[str]:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        f()
        torch.cuda.synchronize()
    return [e.name[:60] for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith("Memset")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=4096)
    n = ap.parse_args().tokens
    for name, (m, k) in SHAPES.items():
        x = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        bf16_out = lambda: torch.mm(x, w.t())  # noqa: E731
        f32_out = lambda: torch.mm(x, w.t(), out_dtype=torch.float32)  # noqa: E731
        flop = 2 * n * m * k
        t16, t32 = mean_us(bf16_out), mean_us(f32_out)
        print(f"{name:8s} {m:6d} x {k:6d}, {n} tokens: bf16 out {t16:8.1f} us ({flop / t16 / 1e6:4.0f} TFLOP/s) {kernels(bf16_out)}")
        print(f"{'':8s} {'':15s} {'':13s} f32 out  {t32:8.1f} us ({flop / t32 / 1e6:4.0f} TFLOP/s) {kernels(f32_out)}")


if __name__ == "__main__":
    main()
