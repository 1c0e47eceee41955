#pragma once
// Scratch buffers reused across forward calls: get(slot, rows, cols) returns a (rows, cols) f32 view,
// reallocating only when a larger buffer is needed, so decode steps allocate nothing.
#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace sanctum {

class Workspace {
 public:
  explicit Workspace(Device device = Device::cpu) : device_(device) {}
  Device device() const { return device_; }

  Tensor get(size_t slot, int64_t rows, int64_t cols) { return get_on(device_, slot, rows, cols); }
  // A (rows, cols) buffer of another element type (e.g. i32 expert ids); same reuse rules.
  Tensor get_typed(size_t slot, int64_t rows, int64_t cols, DType dtype) {
    if (slot >= typed_.size()) typed_.resize(slot + 1);
    Tensor& b = typed_[slot];
    if (!b || b.numel() < rows * cols || b.dtype() != dtype) b = Tensor::zeros({rows * cols}, dtype, device_);
    return b.slice(0, 0, rows * cols).reshape({rows, cols});
  }
  // A host buffer whatever the model's device (results that must reach the host, e.g. logits).
  Tensor host(size_t slot, int64_t rows, int64_t cols) { return get_on(Device::cpu, slot, rows, cols); }

 private:
  Tensor get_on(Device device, size_t slot, int64_t rows, int64_t cols) {
    auto& buffers = device == Device::cpu && device_ != Device::cpu ? host_buffers_ : buffers_;
    if (slot >= buffers.size()) buffers.resize(slot + 1);
    Tensor& b = buffers[slot];
    if (!b || b.numel() < rows * cols) b = Tensor::zeros({rows * cols}, DType::f32, device);
    return b.slice(0, 0, rows * cols).reshape({rows, cols});
  }

  Device device_;
  std::vector<Tensor> buffers_, host_buffers_, typed_;
};

}  // namespace sanctum
