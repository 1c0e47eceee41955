"""The transformers side of the GPU benchmark: the same shapes, random bf16 weights built on the GPU,
timed the way `sanctum bench` times itself (prefill of n tokens with logits for the last one; decode of
128 tokens one forward at a time after a 512-token context, argmax between steps).

  python3 bench/gpu/transformers_peer.py --shape qwen3_5-27b [--layers N] --out peer.json
"""
import argparse
import json
import time

import torch
import transformers

import random_checkpoint


def build(shape: str, layers: int | None):
    cfg = random_checkpoint.hf_config(shape, layers)
    model_type = cfg.pop("model_type")
    cfg.pop("architectures", None)
    config = transformers.AutoConfig.for_model(model_type, **cfg)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    return model.eval(), config


@torch.no_grad()
def time_prefill(model, n: int, vocab: int) -> float:
    ids = torch.randint(0, vocab, (1, n), device="cuda")
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model(ids, use_cache=True, logits_to_keep=1)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


@torch.no_grad()
def time_decode(model, context: int, steps: int, vocab: int) -> float:
    ids = torch.randint(0, vocab, (1, context), device="cuda")
    out = model(ids, use_cache=True, logits_to_keep=1)
    cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        out = model(token, past_key_values=cache, use_cache=True)
        cache, token = out.past_key_values, out.logits[:, -1:].argmax(-1)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", required=True, choices=sorted(random_checkpoint.SHAPES))
    ap.add_argument("--layers", type=int)
    ap.add_argument("--out", required=True)
    ap.add_argument("--repetitions", type=int, default=2, help="timed runs of each test after a warm-up, as `sanctum bench` times them")
    args = ap.parse_args()
    t0 = time.perf_counter()
    model, config = build(args.shape, args.layers)
    vocab = config.vocab_size
    result = {"peer": f"transformers {transformers.__version__} (torch {torch.__version__}, bf16)", "build_seconds": time.perf_counter() - t0}
    # Each test as `sanctum bench` runs it: a warm-up, then the mean of the timed runs (each kept in "runs").
    def timed(test: str, tokens: int, run):
        rates = [tokens / run() for _ in range(args.repetitions)]
        result[test] = sum(rates) / len(rates)
        result["runs"][test] = rates

    result["runs"] = {}
    for n in (512, 4096):
        time_prefill(model, n, vocab)  # warm-up
        timed(f"pp{n}", n, lambda: time_prefill(model, n, vocab))
    time_decode(model, 512, 4, vocab)
    timed("tg128@512", 128, lambda: time_decode(model, 512, 128, vocab))
    result["gpu_memory_peak_bytes"] = torch.cuda.max_memory_allocated()
    with open(args.out, "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
