#!/usr/bin/env python3
"""Converts a random MLX-format benchmark checkpoint into a GGUF file llama.cpp loads.

Our checkpoints hold MLX affine-quantized weights: per group of 64 along the input dimension,
w = scale * q + bias, q packed into uint32 words lowest bits first. They are dequantized and
written as Q4_0 (4-bit sources: the same 0.5625 bytes per weight) or Q8_0 (8-bit sources);
norms, biases, the convolution kernel and the MoE routers stay f32, as llama.cpp's own quantizer
leaves them. Architectures: qwen2, qwen3_5 (llama.cpp's qwen35) and qwen3_5_moe (qwen35moe).

Usage: .venv-bench/bin/python bench/peers/mlx_to_gguf.py CHECKPOINT_DIR OUT.gguf
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_vocab  # noqa: E402
import safetensors_np  # noqa: E402

ARCH = {"qwen2": "qwen2", "qwen3_5": "qwen35", "qwen3_5_moe": "qwen35moe"}

# MLX (Hugging Face) tensor path inside a layer -> llama.cpp tensor name inside blk.N.
LAYER_NAMES = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "self_attn.q_norm": "attn_q_norm",
    "self_attn.k_norm": "attn_k_norm",
    "linear_attn.in_proj_qkv": "attn_qkv",
    "linear_attn.in_proj_z": "attn_gate",
    "linear_attn.in_proj_b": "ssm_beta",
    "linear_attn.in_proj_a": "ssm_alpha",
    "linear_attn.conv1d": "ssm_conv1d",
    "linear_attn.norm": "ssm_norm",
    "linear_attn.out_proj": "ssm_out",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "mlp.gate": "ffn_gate_inp",
    "mlp.switch_mlp.gate_proj": "ffn_gate_exps",
    "mlp.switch_mlp.up_proj": "ffn_up_exps",
    "mlp.switch_mlp.down_proj": "ffn_down_exps",
    "mlp.shared_expert.gate_proj": "ffn_gate_shexp",
    "mlp.shared_expert.up_proj": "ffn_up_shexp",
    "mlp.shared_expert.down_proj": "ffn_down_shexp",
    "mlp.shared_expert_gate": "ffn_gate_inp_shexp",
}
# qwen2 normalizes before its MLP; qwen3.5 calls the same norm post-attention.
POST_ATTENTION_NORM = {"qwen2": "ffn_norm", "qwen35": "post_attention_norm", "qwen35moe": "post_attention_norm"}
KEEP_F32 = ("ffn_gate_inp", "ffn_gate_inp_shexp")  # routers: llama.cpp never quantizes them


def dequantize(words: np.ndarray, scales: np.ndarray, biases: np.ndarray, group_size: int = 64) -> np.ndarray:
    """MLX affine dequantization along the last axis; bits follow from the packed width."""
    n_in = scales.shape[-1] * group_size
    bits = words.shape[-1] * 32 // n_in
    per_word = 32 // bits
    shifts = (np.arange(per_word, dtype=np.uint32) * bits)
    q = (words[..., None] >> shifts) & np.uint32((1 << bits) - 1)  # lowest bits first
    q = q.reshape(*words.shape[:-1], scales.shape[-1], group_size).astype(np.float32)
    w = q * scales[..., None].astype(np.float32) + biases[..., None].astype(np.float32)
    return w.reshape(*words.shape[:-1], n_in)


def value_head_order(cfg: dict) -> np.ndarray:
    """GatedDeltaNet with more value than key heads: transformers gives value head h key head
    h // (Hv / Hk) (repeat_interleave), llama.cpp gives it key head h % Hk (its broadcast tiles). The
    value heads are reordered so that llama.cpp's head i is transformers' head order[i]."""
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    ratio = hv // hk
    return np.array([k * ratio + j for j in range(ratio) for k in range(hk)])


def tile_value_heads(name: str, data: np.ndarray, cfg: dict) -> np.ndarray:
    """Applies value_head_order to every tensor with a value-head axis (identity when Hv == Hk)."""
    hk, hv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    if hk == hv:
        return data
    order = value_head_order(cfg)
    dv, v0 = cfg["linear_value_head_dim"], 2 * hk * cfg["linear_key_head_dim"]  # v rows follow q and k
    rows = (order[:, None] * dv + np.arange(dv)).reshape(-1)
    base = name.rsplit(".", 2)[-2] if name.count(".") >= 2 else name
    if base in ("attn_qkv", "ssm_conv1d"):  # q, k, v rows (conv channels), v permuted in blocks of dv
        return np.concatenate([data[:v0], data[v0:][rows]])
    if base == "attn_gate":  # z: one block of dv rows per value head
        return data[rows]
    if base in ("ssm_beta", "ssm_alpha") or name.endswith((".ssm_a", ".ssm_dt.bias")):  # one per value head
        return data[order]
    if base == "ssm_out":  # columns: one block of dv per value head
        return data[:, rows]
    return data


def gguf_name(key: str, arch: str) -> str:
    key = re.sub(r"^(language_model\.)?(model\.)?", "", key)
    if key == "embed_tokens.weight":
        return "token_embd.weight"
    if key == "norm.weight":
        return "output_norm.weight"
    if key == "lm_head.weight":
        return "output.weight"
    m = re.fullmatch(r"layers\.(\d+)\.(.+)\.(weight|bias|dt_bias|A_log)", key)
    if m is None:
        raise ValueError(f"{key}: no llama.cpp name for this tensor; extend LAYER_NAMES in {__file__}")
    layer, path, leaf = m.groups()
    if leaf in ("dt_bias", "A_log"):
        return f"blk.{layer}.{'ssm_dt.bias' if leaf == 'dt_bias' else 'ssm_a'}"
    if path == "post_attention_layernorm":
        base = POST_ATTENTION_NORM[arch]
    elif path in LAYER_NAMES:
        base = LAYER_NAMES[path]
    else:
        raise ValueError(f"{key}: no llama.cpp name for '{path}'; extend LAYER_NAMES in {__file__}")
    return f"blk.{layer}.{base}.{leaf}"


def write_hparams(w, cfg: dict, arch: str, file_type: int) -> None:
    w.add_name(f"sanctum bench {cfg['model_type']}")
    w.add_file_type(file_type)
    w.add_context_length(cfg.get("max_position_embeddings", 32768))
    w.add_embedding_length(cfg["hidden_size"])
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_layer_norm_rms_eps(cfg["rms_norm_eps"])
    head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    rope = cfg.get("rope_parameters") or {}
    w.add_rope_freq_base(rope.get("rope_theta", cfg.get("rope_theta", 10000.0)))
    if arch == "qwen2":
        return
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_dimension_count(int(head_dim * rope.get("partial_rotary_factor", 1.0)))
    w.add_rope_dimension_sections(list(rope.get("mrope_section", [11, 11, 10])) + [0])
    w.add_ssm_conv_kernel(cfg["linear_conv_kernel_dim"])
    w.add_ssm_state_size(cfg["linear_key_head_dim"])
    w.add_ssm_group_count(cfg["linear_num_key_heads"])
    w.add_ssm_time_step_rank(cfg["linear_num_value_heads"])
    w.add_ssm_inner_size(cfg["linear_value_head_dim"] * cfg["linear_num_value_heads"])
    w.add_full_attention_interval(cfg.get("full_attention_interval", 4))
    if arch == "qwen35moe":
        w.add_expert_count(cfg["num_experts"])
        w.add_expert_used_count(cfg["num_experts_per_tok"])
        w.add_expert_feed_forward_length(cfg["moe_intermediate_size"])
        w.add_expert_shared_feed_forward_length(cfg["shared_expert_intermediate_size"])


def convert(model_dir: Path, out: Path, float_type: str | None = None, block_type: str | None = None) -> dict:
    """float_type "f32" or "f16" writes the dequantized weights unquantized (a diagnostic: llama.cpp
    then computes on the very weights sanctum has, without block requantization). block_type "q8_0" or
    "q4_0" picks the block format instead of the one matching the checkpoint's bits."""
    import gguf
    from gguf.quants import quantize

    cfg = json.loads((model_dir / "config.json").read_text())
    cfg = {**cfg, **cfg.get("text_config", {})}
    if cfg["model_type"] not in ARCH:
        raise ValueError(f"model_type {cfg['model_type']!r}: the converter knows {sorted(ARCH)}")
    arch = ARCH[cfg["model_type"]]
    bits = cfg.get("quantization", {}).get("bits", 0)
    qtype = {4: gguf.GGMLQuantizationType.Q4_0, 8: gguf.GGMLQuantizationType.Q8_0}.get(bits)
    if qtype is None:
        raise ValueError(f"{model_dir}: expected an MLX 4- or 8-bit checkpoint, found bits={bits}")
    file_type = gguf.LlamaFileType.MOSTLY_Q4_0 if bits == 4 else gguf.LlamaFileType.MOSTLY_Q8_0
    if block_type is not None:
        qtype = {"q4_0": gguf.GGMLQuantizationType.Q4_0, "q8_0": gguf.GGMLQuantizationType.Q8_0}[block_type]
        file_type = gguf.LlamaFileType.MOSTLY_Q4_0 if block_type == "q4_0" else gguf.LlamaFileType.MOSTLY_Q8_0
    if float_type is not None:
        qtype = gguf.GGMLQuantizationType.F32 if float_type == "f32" else gguf.GGMLQuantizationType.F16
        file_type = gguf.LlamaFileType.ALL_F32 if float_type == "f32" else gguf.LlamaFileType.MOSTLY_F16

    tensors = safetensors_np.open_dir(model_dir)
    writer = gguf.GGUFWriter(str(out), arch)
    write_hparams(writer, cfg, arch, file_type)
    gguf_vocab.write(writer, model_dir, cfg["vocab_size"])

    quantized_bytes = quantized_weights = 0
    for key in sorted(tensors):
        if key.endswith((".scales", ".biases")):
            continue
        stem = key[: -len(".weight")] if key.endswith(".weight") else None
        if stem is not None and f"{stem}.scales" in tensors:
            data = dequantize(tensors[key], tensors[f"{stem}.scales"], tensors[f"{stem}.biases"])
        else:
            data = tensors[key].astype(np.float32)
        name = gguf_name(key, arch)
        data = tile_value_heads(name, data, cfg) if arch != "qwen2" else data
        if name.endswith(".ssm_a"):
            data = -np.exp(data)  # llama.cpp stores A = -exp(A_log)
        elif ".ssm_conv1d." in name:
            data = data.reshape(data.shape[0], -1)  # MLX (channels, kernel, 1) -> (channels, kernel)
        elif ".ffn_gate_inp_shexp." in name:
            data = data.reshape(-1)
        base = name.rsplit(".", 2)[-2]
        if data.ndim >= 2 and ".ssm_conv1d." not in name and base not in KEEP_F32:
            if float_type is None:
                packed = quantize(np.ascontiguousarray(data), qtype)
                writer.add_tensor(name, packed, raw_dtype=qtype)
            else:
                packed = np.ascontiguousarray(data, dtype=np.float32 if float_type == "f32" else np.float16)
                writer.add_tensor(name, packed)
            quantized_bytes += packed.nbytes
            quantized_weights += data.size
        else:
            writer.add_tensor(name, np.ascontiguousarray(data, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return {"arch": arch, "type": qtype.name, "bytes_per_weight": quantized_bytes / max(quantized_weights, 1)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--float", choices=["f32", "f16"], help="write unquantized weights (diagnostic)")
    ap.add_argument("--block", choices=["q8_0", "q4_0"], help="block format (default: Q4_0 for 4-bit, Q8_0 for 8-bit)")
    a = ap.parse_args()
    info = convert(a.model_dir, a.out, a.float, a.block)
    print(f"{a.out}: {info['arch']} {info['type']}, {info['bytes_per_weight']:.4f} bytes per quantized weight")
    return 0


if __name__ == "__main__":
    sys.exit(main())
