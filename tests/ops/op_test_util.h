#pragma once
// Shared helpers for the op tests: fresh random data per run (the seed is printed via SCOPED_TRACE
// on failure; set SANCTUM_TEST_SEED to replay), tensor fills and normalised error measures.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "base/error.h"
#include "tensor/dtype.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::test {

inline uint64_t test_seed() {
  static const uint64_t seed = [] {
    if (const char* s = std::getenv("SANCTUM_TEST_SEED")) return static_cast<uint64_t>(std::strtoull(s, nullptr, 10));
    std::random_device rd;
    return (static_cast<uint64_t>(rd()) << 32) ^ rd();
  }();
  return seed;
}

inline std::string seed_note() { return "SANCTUM_TEST_SEED=" + std::to_string(test_seed()); }

class Rng {
 public:
  explicit Rng(uint64_t salt = 0) : gen_(test_seed() ^ (salt * 0x9e3779b97f4a7c15ull)) {}
  float uniform(float lo = -1.0f, float hi = 1.0f) { return std::uniform_real_distribution<float>(lo, hi)(gen_); }
  float normal() { return std::normal_distribution<float>(0.0f, 1.0f)(gen_); }
  uint32_t bits32() { return static_cast<uint32_t>(gen_()); }
  int64_t integer(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }

 private:
  std::mt19937_64 gen_;
};

// Stores v into element i of a float-typed buffer.
inline void store_f(void* data, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(data)[i] = v; break;
    case DType::bf16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(v); break;
    case DType::f16: static_cast<uint16_t*>(data)[i] = f32_to_f16(v); break;
    default: break;
  }
}

// Fills every element of a (possibly strided) float tensor with normal(0, scale) values.
inline void fill_normal(Tensor& t, Rng& rng, float scale = 1.0f) {
  int64_t total = t.numel();
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat, off = 0;
    for (int d = t.ndim() - 1; d >= 0; --d) {
      off += (rem % t.dim(d)) * t.stride(d);
      rem /= t.dim(d);
    }
    store_f(t.raw(), t.dtype(), off, rng.normal() * scale);
  }
}

inline Tensor random_tensor(std::initializer_list<int64_t> shape, DType dtype, Rng& rng, float scale = 1.0f) {
  Tensor t = Tensor::zeros(shape, dtype);
  fill_normal(t, rng, scale);
  return t;
}

// A (rows, cols) view with row stride cols + pad and a start offset of `shift` elements, so rows are
// strided and misaligned.
inline Tensor strided_matrix(int64_t rows, int64_t cols, DType dtype, Rng& rng, int64_t pad = 3, int64_t shift = 1) {
  Tensor base = Tensor::zeros({rows, cols + pad}, dtype);
  Tensor view = base.slice(1, shift, shift + cols);
  fill_normal(view, rng);
  return view;
}

// Random MLX-quantized weight: random codes, scales ~ U(0.01, 0.05) (some negative), biases ~ U(-0.2, 0.2).
inline Weight random_quantized(int64_t rows, int64_t cols, int bits, int group, DType sdtype, Rng& rng) {
  Weight w;
  w.rows = rows;
  w.cols = cols;
  w.quant = QuantParams{bits, group};
  w.name = "random_q" + std::to_string(bits) + "_g" + std::to_string(group);
  w.data = Tensor::zeros({rows, cols * bits / 32}, DType::u32);
  for (int64_t i = 0; i < w.data.numel(); ++i) w.data.data<uint32_t>()[i] = rng.bits32();
  w.scales = Tensor::zeros({rows, cols / group}, sdtype);
  w.biases = Tensor::zeros({rows, cols / group}, sdtype);
  const float qmax = static_cast<float>((1 << bits) - 1);
  for (int64_t i = 0; i < w.scales.numel(); ++i) {
    const float s = rng.uniform(0.01f, 0.05f) * (rng.uniform() < -0.8f ? -1.0f : 1.0f) * 15.0f / qmax;
    store_f(w.scales.raw(), sdtype, i, s);
    store_f(w.biases.raw(), sdtype, i, rng.uniform(-0.2f, 0.2f));
  }
  validate_weight(w);
  return w;
}

inline float at(const Tensor& t, int64_t i, int64_t j) { return load_as_f32(t.raw(), t.dtype(), i * t.stride(0) + j * t.stride(1)); }

// Bitwise equality of two f32 rows.
inline bool same_bits(const float* a, const float* b, int64_t n) { return std::memcmp(a, b, static_cast<size_t>(n) * 4) == 0; }

// f() must throw sanctum::Error whose message holds `fragment` (an op's "[name]" tag, say); `what`
// names the case in a failure.
template <class F>
void expect_error_naming(F&& f, const std::string& fragment, const char* what) {
  try {
    f();
    ADD_FAILURE() << "no error for " << what;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << what << ": " << e.what();
  }
}

}  // namespace sanctum::test
