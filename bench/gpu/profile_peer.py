"""Where transformers' GPU time goes in one prefill, kernel by kernel, at a benchmark shape with few layers:
the peer's side of `profile_decode.py --prefill N`, so that the two can be read next to each other.

  python3 bench/gpu/profile_peer.py --shape mistral-24b --layers 4 --prefill 2048
"""
import argparse
from collections import defaultdict

import torch
from torch.profiler import ProfilerActivity, profile

from transformers_peer import build, time_prefill


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--prefill", type=int, default=2048)
    args = ap.parse_args()
    model, config = build(args.shape, args.layers)
    ids = torch.randint(0, config.vocab_size, (1, args.prefill), device="cuda")
    for _ in range(2):  # warm: cuBLAS heuristics, the attention backend's first call
        model(ids, use_cache=True, logits_to_keep=1)
    torch.cuda.synchronize()
    wall = min(time_prefill(model, args.prefill, config.vocab_size) for _ in range(3))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        model(ids, use_cache=True, logits_to_keep=1)
        torch.cuda.synchronize()
    by_name = defaultdict(lambda: [0, 0.0])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA:
            by_name[e.name][0] += 1
            by_name[e.name][1] += e.device_time
    total = sum(t for _, t in by_name.values())
    print(f"transformers {args.shape}, {args.layers} layers: prefill of {args.prefill} tokens, kernels sum {total / 1000:.2f} ms, "
          f"best of three unprofiled {1000 * wall:.2f} ms")
    for name, (count, t) in sorted(by_name.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"  {t:9.1f} us  {count:3d}x  {name[:110]}")


if __name__ == "__main__":
    main()
