#pragma once
// What the GPU suites share: a fixture base that skips without a usable GPU, and uploads of test
// tensors and weights.
#include <gtest/gtest.h>

#include "tensor/device_memory.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::test {

class RequiresGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!device_memory::cuda_available()) GTEST_SKIP() << "no GPU: " << device_memory::cuda_unavailable_reason();
  }
};

inline Tensor gpu(const Tensor& t) { return t.to(Device::cuda); }
inline Tensor host(const Tensor& t) { return t.to(Device::cpu); }

// The same weight with its data, scales and biases on the GPU.
inline Weight gpu(const Weight& w) {
  Weight g = w;
  g.data = gpu(w.data);
  if (w.quantized()) {
    g.scales = gpu(w.scales);
    g.biases = gpu(w.biases);
  }
  return g;
}

}  // namespace sanctum::test
