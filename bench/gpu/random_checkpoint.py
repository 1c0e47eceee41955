"""Random-weight checkpoints at production shapes, written straight to disk (no framework, numpy only)
so a GPU machine can build a 15-20 GB model in seconds without downloading anything.

  write_mlx_4bit(dir, config)   MLX affine 4-bit g64 (what sanctum serves from mlx-community)
  hf_config(name)               the Hugging Face config of each benchmark shape

Weights are not meaningful, only well-scaled: codes uniform, scales so each weight has std ~0.02 and
mean ~0, norms at 1 (stored as w - 1 = 0 for the Qwen3.5 Hugging Face flavour), decays as Qwen3.5 inits
them. The layout follows the Hugging Face names; MoE experts use mlx's stacked switch_mlp grids.
"""
import json
import struct
from pathlib import Path

import numpy as np

GROUP, BITS = 64, 4

SHAPES = {
    # Qwen3.5-27B: 64 layers, every 4th full attention.
    "qwen3_5-27b": {
        "model_type": "qwen3_5_text", "architectures": ["Qwen3_5ForCausalLM"], "hidden_size": 5120, "intermediate_size": 17408,
        "num_hidden_layers": 64, "num_attention_heads": 24, "num_key_value_heads": 4, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 48, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "vocab_size": 248320, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": False, "max_position_embeddings": 262144,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    },
    # Devstral-Small-24B (Mistral Small 3.x text): 40 layers, GQA 32/8, head_dim 128.
    "mistral-24b": {
        "model_type": "mistral", "architectures": ["MistralForCausalLM"], "hidden_size": 5120, "intermediate_size": 32768,
        "num_hidden_layers": 40, "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 128, "vocab_size": 131072,
        "rms_norm_eps": 1e-5, "rope_theta": 100000000.0, "tie_word_embeddings": False, "max_position_embeddings": 131072,
        "sliding_window": None,
    },
    # Qwen3.6-35B-A3B: 40 layers, 256 experts, 8 routed + 1 shared.
    "qwen3_5_moe-35b-a3b": {
        "model_type": "qwen3_5_moe_text", "architectures": ["Qwen3_5MoeForCausalLM"], "hidden_size": 2048,
        "num_hidden_layers": 40, "num_attention_heads": 16, "num_key_value_heads": 2, "head_dim": 256,
        "linear_num_key_heads": 16, "linear_num_value_heads": 32, "linear_key_head_dim": 128, "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4, "full_attention_interval": 4, "vocab_size": 248320, "rms_norm_eps": 1e-6,
        "num_experts": 256, "num_experts_per_tok": 8, "moe_intermediate_size": 512, "shared_expert_intermediate_size": 512,
        "norm_topk_prob": True, "tie_word_embeddings": False, "max_position_embeddings": 262144,
        "rope_parameters": {"rope_type": "default", "rope_theta": 10000000.0, "partial_rotary_factor": 0.25,
                            "mrope_section": [11, 11, 10], "mrope_interleaved": True},
    },
}


def hf_config(name: str, layers: int | None = None) -> dict:
    c = json.loads(json.dumps(SHAPES[name]))
    if layers is not None:
        c["num_hidden_layers"] = layers
    if "full_attention_interval" in c:
        n, k = c["num_hidden_layers"], c.pop("full_attention_interval")
        c["layer_types"] = ["full_attention" if (i + 1) % k == 0 else "linear_attention" for i in range(n)]
    return c


def tensors(c: dict):
    """(name, kind, shape): kind 'q' is a quantized linear (rows, cols), 'f' a bf16 tensor, 'qe' expert grids."""
    h, out = c["hidden_size"], []
    out.append(("model.embed_tokens", "q", (c["vocab_size"], h)))
    out.append(("lm_head", "q", (c["vocab_size"], h)))
    out.append(("model.norm.weight", "norm", (h,)))
    hd = c["head_dim"]
    for i in range(c["num_hidden_layers"]):
        p = f"model.layers.{i}."
        out += [(p + "input_layernorm.weight", "norm", (h,)), (p + "post_attention_layernorm.weight", "norm", (h,))]
        linear = c.get("layer_types", ["full_attention"] * c["num_hidden_layers"])[i] == "linear_attention"
        if linear:
            kd, vd = c["linear_num_key_heads"] * c["linear_key_head_dim"], c["linear_num_value_heads"] * c["linear_value_head_dim"]
            hv, conv = c["linear_num_value_heads"], 2 * kd + vd
            a = p + "linear_attn."
            out += [(a + "in_proj_qkv", "q", (conv, h)), (a + "in_proj_z", "q", (vd, h)), (a + "in_proj_b", "q", (hv, h)),
                    (a + "in_proj_a", "q", (hv, h)), (a + "out_proj", "q", (h, vd)),
                    (a + "conv1d.weight", "conv", (conv, 1, c["linear_conv_kernel_dim"])), (a + "A_log", "a_log", (hv,)),
                    (a + "dt_bias", "ones", (hv,)), (a + "norm.weight", "ones", (c["linear_value_head_dim"],))]
        else:
            a = p + "self_attn."
            gated = c["model_type"].startswith("qwen3_5")
            q_rows = (2 if gated else 1) * c["num_attention_heads"] * hd
            out += [(a + "q_proj", "q", (q_rows, h)), (a + "k_proj", "q", (c["num_key_value_heads"] * hd, h)),
                    (a + "v_proj", "q", (c["num_key_value_heads"] * hd, h)), (a + "o_proj", "q", (h, c["num_attention_heads"] * hd))]
            if gated:
                out += [(a + "q_norm.weight", "norm", (hd,)), (a + "k_norm.weight", "norm", (hd,))]
        m = p + "mlp."
        if "num_experts" in c:
            e, mi, si = c["num_experts"], c["moe_intermediate_size"], c["shared_expert_intermediate_size"]
            out += [(m + "gate", "q", (e, h)), (m + "switch_mlp.gate_proj", "qe", (e, mi, h)),
                    (m + "switch_mlp.up_proj", "qe", (e, mi, h)), (m + "switch_mlp.down_proj", "qe", (e, h, mi)),
                    (m + "shared_expert.gate_proj", "q", (si, h)), (m + "shared_expert.up_proj", "q", (si, h)),
                    (m + "shared_expert.down_proj", "q", (h, si)), (m + "shared_expert_gate", "q", (1, h))]
        else:
            im = c["intermediate_size"]
            out += [(m + "gate_proj", "q", (im, h)), (m + "up_proj", "q", (im, h)), (m + "down_proj", "q", (h, im))]
    return out


class _Pool:
    """Cycles through one block of random bytes: fast, and every tensor still looks random."""

    def __init__(self, seed: int, size: int = 64 << 20):
        self.data = np.random.default_rng(seed).integers(0, 256, size=size, dtype=np.uint8).tobytes()
        self.pos = 0

    def write(self, f, n: int) -> None:
        """Writes n bytes straight from the pool (no copies in Python)."""
        view = memoryview(self.data)
        while n > 0:
            chunk = view[self.pos:self.pos + n]
            f.write(chunk)
            n -= len(chunk)
            self.pos = (self.pos + len(chunk) + 4093) % len(self.data)


def _bf16(x: np.ndarray) -> bytes:
    return (np.asarray(x, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16).tobytes()


def write_mlx_4bit(out_dir, config: dict, seed: int = 0) -> Path:
    """Writes config.json + model.safetensors (4-bit g64 linears, bf16 rest) and returns the directory."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg = dict(config)
    cfg["quantization"] = {"group_size": GROUP, "bits": BITS}
    (out / "config.json").write_text(json.dumps(cfg, indent=1))
    rng = np.random.default_rng(seed)
    # Codes are uniform on 0..15 (std 4.6): scale 0.02 / 4.6 and bias -7.5 * scale give weights ~ N(0, 0.02).
    scale = 0.02 / 4.6
    entries, blobs = {}, []
    offset = 0

    def add(name, dtype, shape, nbytes, producer):
        nonlocal offset
        entries[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + nbytes]}
        blobs.append((nbytes, producer))
        offset += nbytes

    pool = _Pool(seed)
    for name, kind, shape in tensors(config):
        if kind in ("q", "qe"):
            lead, cols = shape[:-1], shape[-1]
            rows = int(np.prod(lead))
            packed = list(lead) + [cols * BITS // 32]
            groups = list(lead) + [cols // GROUP]
            add(name + ".weight", "U32", packed, rows * cols * BITS // 8, lambda f, n: pool.write(f, n))
            s = _bf16(np.full(rows * (cols // GROUP), scale))
            b = _bf16(np.full(rows * (cols // GROUP), -7.5 * scale))
            add(name + ".scales", "BF16", groups, len(s), lambda f, n, s=s: f.write(s))
            add(name + ".biases", "BF16", groups, len(b), lambda f, n, b=b: f.write(b))
        else:
            count = int(np.prod(shape))
            if kind == "norm":
                vals = np.zeros(count) if config["model_type"].startswith("qwen3_5") else np.ones(count)
            elif kind == "ones":
                vals = np.ones(count)
            elif kind == "a_log":
                vals = np.log(rng.uniform(1, 16, count))
            else:  # conv
                vals = rng.normal(0, 0.2, count)
            data = _bf16(vals)
            add(name, "BF16", shape, len(data), lambda f, n, d=data: f.write(d))
    header = json.dumps(entries, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    with open(out / "model.safetensors", "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        for nbytes, producer in blobs:
            producer(f, nbytes)
    return out
