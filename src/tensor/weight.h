#pragma once
// A linear-layer weight of logical shape (rows = out features, cols = in features), either dense
// (f32 / bf16 / f16) or MLX affine-quantized:
//   data   (rows, cols * bits / 32) u32 — each word packs 32/bits values, lowest bits first, along cols
//   scales (rows, cols / group_size)  f32 / bf16 / f16
//   biases (rows, cols / group_size)  same dtype as scales
// and w[r][c] = scales[r][c / g] * q[r][c] + biases[r][c / g].
//
// On a GPU in the bf16 precision mode, 4-bit weights are reordered at load for the decode mat-vec
// (layout tiles, ops/cuda/matvec_tiles.cuh): the same tensors and shapes, the same bytes, permuted
// within each block of 16 rows, so that row slices at multiples of 16 stay valid.
#include <cstdint>
#include <memory>
#include <string>

#include "tensor/tensor.h"

namespace sanctum {

struct QuantParams {
  int bits = 0;        // 0: dense; otherwise 4 or 8
  int group_size = 0;  // 32, 64 or 128
};

enum class WeightLayout : uint8_t {
  rows,   // as above
  tiles,  // 4-bit, rows a multiple of 16, cols of 64: see ops/cuda/matvec_tiles.cuh
};

struct Weight {
  Tensor data;
  Tensor scales;
  Tensor biases;
  QuantParams quant;
  WeightLayout layout = WeightLayout::rows;
  int64_t rows = 0;
  int64_t cols = 0;
  std::string name;  // checkpoint tensor name, for error messages

  bool quantized() const { return quant.bits != 0; }
  // Bytes a full pass over this weight reads (for bandwidth accounting).
  size_t nbytes() const { return data.nbytes() + scales.nbytes() + biases.nbytes(); }

  // Backend-specific repacked form, built once at load by the kernels that want one; null when unused.
  // On the CPU: the copy the int8 kernels read (ops/cpu/int8_weight.h). Copies of a Weight share it.
  std::shared_ptr<const void> packed;
};

// Checks the invariants above; throws Error naming the weight.
void validate_weight(const Weight& w);
// Builds a dense weight view (rows, cols) over an existing tensor.
Weight dense_weight(Tensor data, std::string name = {});

}  // namespace sanctum
