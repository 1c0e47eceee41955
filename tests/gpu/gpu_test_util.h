#pragma once
// What the GPU suites share: a fixture base that skips without a usable GPU, uploads of test
// tensors and weights, and the matmul precision for a scope.
#include <gtest/gtest.h>

#include "ops/precision.h"
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

// Sets the matmul precision for a scope.
struct PrecisionScope {
  ops::MatmulPrecision saved = ops::matmul_precision();
  explicit PrecisionScope(ops::MatmulPrecision p) { ops::set_matmul_precision(p); }
  ~PrecisionScope() { ops::set_matmul_precision(saved); }
};

}  // namespace sanctum::test
