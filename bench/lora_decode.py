"""Per-token decode cost of an unmerged LoRA adapter (serve --lora's per-row path) beside the base, in
one `sanctum bench` run: a random rank-R mlx-lm adapter over every projection of every layer
(attention q/k/v/o, GatedDeltaNet in_proj_*/out_proj, MLP gate/up/down) of a bench shape checkpoint
(bench/cpu_vs_mlx.py builds them: random weights, MLX 4-bit g64), then `sanctum bench --lora`, which
times decode without and with the adapter on the same loaded model.

    .venv/bin/python bench/lora_decode.py --shape qwen3_5-0.8b --rank 16 --threads 2 --gen 64
"""
import argparse
import json
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tools"))

PROJECTIONS = ("q_proj", "k_proj", "v_proj", "o_proj", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "out_proj", "gate_proj",
               "up_proj", "down_proj")


def read_header(path: Path) -> dict:
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def write_safetensors(path: Path, tensors: dict) -> None:
    header, blobs, offset = {}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype=np.float32).tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)) + raw)
        for b in blobs:
            f.write(b)


def make_adapter(model_dir: Path, out: Path, rank: int, seed: int = 0) -> int:
    """A random rank-`rank` adapter on every projection of model_dir; returns the modules adapted."""
    rng = np.random.default_rng(seed)
    config = json.loads((model_dir / "config.json").read_text())
    text = config.get("text_config", config)
    group = config["quantization"]["group_size"] if "quantization" in config else 0
    tensors = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        for name, info in read_header(f).items():
            if not name.endswith(".weight") or ".layers." not in name or name.rsplit(".", 2)[-2] not in PROJECTIONS:
                continue
            module = name[:-len(".weight")]
            out_dim = info["shape"][0]
            scales = read_header(f).get(module + ".scales")
            in_dim = scales["shape"][1] * group if scales else info["shape"][1]
            tensors[module + ".lora_a"] = rng.normal(0, 1 / np.sqrt(in_dim), (in_dim, rank))
            tensors[module + ".lora_b"] = rng.normal(0, 0.01, (rank, out_dim))
    out.mkdir(parents=True, exist_ok=True)
    write_safetensors(out / "adapters.safetensors", tensors)
    (out / "adapter_config.json").write_text(json.dumps({
        "fine_tune_type": "lora", "num_layers": text["num_hidden_layers"],
        "lora_parameters": {"rank": rank, "scale": 20.0, "dropout": 0.0, "keys": None}}))
    return len(tensors) // 2


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="qwen3_5-0.8b")
    ap.add_argument("--model", help="a checkpoint directory (default: bench/out/<shape>-q4g64, built when missing)")
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--gen", type=int, default=64)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--matmul-precision", default="f32")
    ap.add_argument("--sanctum", default=str(ROOT / "build" / "sanctum"))
    args = ap.parse_args()
    if args.model:
        model = Path(args.model)
    else:
        import cpu_vs_mlx
        model = cpu_vs_mlx.build_checkpoint(args.shape, ROOT / "bench" / "out" / f"{args.shape}-q4g64")
    adapter = ROOT / "bench" / "out" / f"{model.name}-lora-r{args.rank}"
    modules = make_adapter(model, adapter, args.rank)
    cmd = [args.sanctum, "bench", "--model", str(model), "--lora", str(adapter), "--pp", "16", "--tg", str(args.gen), "--repetitions",
           str(args.reps), "--threads", str(args.threads), "--matmul-precision", args.matmul_precision, "--json"]
    print(" ".join(cmd), file=sys.stderr)
    rows = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["results"]
    by_test = {r["test"]: r for r in rows}
    base, lora = by_test[f"tg{args.gen}"], by_test[f"tg{args.gen}+lora"]
    # Runs alternate base and adapter; the fastest of each is the one least disturbed by other load,
    # the median the one a single outlier moves least.
    ms_base, ms_lora = 1000 / max(base["runs"]), 1000 / max(lora["runs"])
    med_base, med_lora = 1000 / float(np.median(base["runs"])), 1000 / float(np.median(lora["runs"]))
    print(json.dumps({"model": str(model), "rank": args.rank, "modules": modules, "threads": args.threads,
                      "matmul_precision": args.matmul_precision, "base_tok_s_best": round(max(base["runs"]), 2),
                      "lora_tok_s_best": round(max(lora["runs"]), 2), "base_ms_per_token": round(ms_base, 2),
                      "lora_ms_per_token": round(ms_lora, 2), "added_ms_per_token": round(ms_lora - ms_base, 2),
                      "lora_over_base": round(ms_lora / ms_base, 3), "median_base_ms_per_token": round(med_base, 2),
                      "median_lora_ms_per_token": round(med_lora, 2), "median_lora_over_base": round(med_lora / med_base, 3),
                      "runs": {"base": base["runs"], "lora": lora["runs"]}}, indent=2))


if __name__ == "__main__":
    main()
