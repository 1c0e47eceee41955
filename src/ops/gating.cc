#include "ops/gating.h"

#include <cmath>

#include "base/error.h"
#include "ops/cuda/kernels.h"

namespace sanctum::ops {

namespace {
void check_rows(const Tensor& t, const Tensor& like, const char* what) {
  check(t.ndim() == 2 && t.dim(0) == like.dim(0) && t.dim(1) == like.dim(1) && t.dtype() == DType::f32 && t.stride(1) == 1,
        ErrorKind::invalid_argument,
        std::string("[sigmoid_mul] ") + what + " must be (n, d) f32 with unit column stride like x, got " + t.shape_string());
}
}  // namespace

void sigmoid_mul(const Tensor& x, const Tensor& gate, Tensor& out) {
  check_rows(x, x, "x");
  check_rows(gate, x, "gate");
  check_rows(out, x, "out");
  check(x.device() == gate.device() && x.device() == out.device(), ErrorKind::unsupported,
        "[sigmoid_mul] x, gate and out must be on one device");
  if (x.device() == Device::cuda) return cuda::sigmoid_mul(x, gate, out);
  const int64_t n = x.dim(0), d = x.dim(1);
  for (int64_t r = 0; r < n; ++r) {
    const float* xr = x.data<float>() + r * x.stride(0);
    const float* gr = gate.data<float>() + r * gate.stride(0);
    float* o = out.data<float>() + r * out.stride(0);
    for (int64_t i = 0; i < d; ++i) o[i] = xr[i] / (1.0f + std::exp(-gr[i]));
  }
}

}  // namespace sanctum::ops
