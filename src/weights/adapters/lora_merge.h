#pragma once
// Folding a LoRA / DoRA target into a weight at load (LoraTarget: lora_adapter.h).
//   LoRA: W' = W + scale * B A
//   DoRA: V = W + scale * B A, W' = (m / ||V||_row) * V   (norm over the inputs of each output row)
// Dense weights (f32 / bf16 / f16): B A accumulated in f32; as mlx-lm's fuse does, the delta is rounded
// to the weight's dtype before the add and the sum after it (DoRA: the row norm too), so a merged
// weight equals the fused model's.
// MLX affine-quantized weights, the way mlx-lm's fuse does: dequantize to the scales' dtype, add the
// delta rounded to that dtype, then requantize with the same bits and group size (affine_quantize_row);
// a DoRA merge requantizes the f32 rescaled weight and keeps f32 scales and biases, as mlx-lm's does.
#include <cstdint>

#include "tensor/tensor.h"
#include "weights/adapters/lora_adapter.h"

namespace sanctum {

// delta (t.out, t.in) f32 = scale * B A for expert `expert` (0 for a plain target), rows
// [row0, row1) only; out points at row row0.
void lora_delta_rows(const LoraTarget& t, int64_t expert, int64_t row0, int64_t row1, float* out);

// The merged copy of dense weight `w`: (out, in), or (E, out, in) for a per-expert target. Throws
// invalid_input naming `what` and the adapter tensors when the shapes disagree.
Tensor merge_dense(const Tensor& w, const LoraTarget& t, const std::string& what);

struct QuantizedWeight {
  Tensor data;    // u32 (…, out, in * bits / 32)
  Tensor scales;  // (…, out, in / group)
  Tensor biases;
};

// The merged, requantized copy of an MLX affine-quantized weight (2-D, or 3-D per expert).
QuantizedWeight merge_quantized(const QuantizedWeight& w, int bits, int group_size, const LoraTarget& t, const std::string& what);

// mlx's affine quantization of one row of `cols` values (cols a multiple of group_size): per group,
// the scale and bias mlx.core.quantize picks and the codes it writes, packed lowest bits first.
// Scales and biases come back in f32, before rounding to the checkpoint's dtype, as mlx computes
// the codes with the unrounded values.
void affine_quantize_row(const float* w, int64_t cols, int bits, int group_size, uint32_t* packed, float* scales, float* biases);

// One row of an MLX affine-quantized weight as mlx.core.dequantize gives it: scale * q + bias per
// element, computed in `dtype` (the product rounded to it, then the sum), returned as f32.
void affine_dequantize_row(const uint32_t* packed, const void* scales, const void* biases, DType dtype, int64_t cols, int bits,
                           int group_size, float* out);

}  // namespace sanctum
