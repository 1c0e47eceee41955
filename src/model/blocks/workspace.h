#pragma once
// Scratch buffers reused across forward calls: get(slot, rows, cols) returns a (rows, cols) f32 view,
// reallocating only when a larger buffer is needed, so decode steps allocate nothing.
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace sanctum {

class Workspace {
 public:
  Tensor get(size_t slot, int64_t rows, int64_t cols) {
    if (slot >= buffers_.size()) buffers_.resize(slot + 1);
    Tensor& b = buffers_[slot];
    if (!b || b.numel() < rows * cols) b = Tensor::zeros({rows * cols}, DType::f32);
    return b.slice(0, 0, rows * cols).reshape({rows, cols});
  }

 private:
  std::vector<Tensor> buffers_;
};

}  // namespace sanctum
