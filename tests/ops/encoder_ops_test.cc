// The vision encoder's ops (layer_norm, gelu, full_attention) against their scalar references, at
// sizes around the vector width, on fresh random data and strided rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/full_attention.h"
#include "ops/gelu.h"
#include "ops/layer_norm.h"
#include "ops/ref/full_attention.h"
#include "ops/ref/gelu.h"
#include "ops/ref/layer_norm.h"

namespace sanctum {
namespace {

using test::Rng;

// Normalised error: each element within rel of its row's largest magnitude (f32 rounding of a row's
// sums scales with the row, not with the element).
void expect_close(const Tensor& got, const Tensor& want, float rel, const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel());
  const int64_t d = got.dim(-1), rows = got.numel() / d;
  for (int64_t r = 0; r < rows; ++r) {
    float scale = 1e-6f;
    for (int64_t c = 0; c < d; ++c) scale = std::max(scale, std::abs(want.data<float>()[r * d + c]));
    for (int64_t c = 0; c < d; ++c) {
      const float g = got.data<float>()[r * d + c], w = want.data<float>()[r * d + c];  // both contiguous
      ASSERT_NEAR(g, w, rel * scale) << what << " row " << r << " col " << c << " " << test::seed_note();
    }
  }
}

TEST(LayerNorm, matches_ref_at_sizes_around_the_vector_width) {
  Rng rng(71);
  for (int64_t d : {1, 31, 32, 33, 769, 1152}) {
    for (int64_t n : {1, 5}) {
      Tensor x = test::strided_matrix(n, d, DType::f32, rng);
      for (int64_t i = 0; i < n; ++i) x.data<float>()[i * x.stride(0)] += 40.0f;  // a row far from zero
      for (DType wt : {DType::f32, DType::bf16}) {
        Tensor w = test::random_tensor({d}, wt, rng), b = test::random_tensor({d}, wt, rng);
        Tensor out = Tensor::zeros({n, d}, DType::f32), ref = Tensor::zeros({n, d}, DType::f32);
        ops::layer_norm(x, w, b, 1e-6f, out);
        ops::ref::layer_norm(x, w, b, 1e-6f, ref);
        expect_close(out, ref, 2e-5f, "d=" + std::to_string(d));
      }
    }
  }
}

TEST(LayerNorm, bad_arguments_raise_errors) {
  Tensor x = Tensor::zeros({2, 8}, DType::f32), w = Tensor::zeros({7}, DType::f32), b = Tensor::zeros({8}, DType::f32);
  EXPECT_THROW(ops::layer_norm(x, w, b, 1e-6f, x), Error);
  Tensor cuda = Tensor::view_of(x.raw(), {2, 8}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::layer_norm(cuda, b, b, 1e-6f, cuda), Error);
}

TEST(Gelu, both_forms_match_ref_and_alias) {
  Rng rng(72);
  for (ops::GeluKind kind : {ops::GeluKind::erf, ops::GeluKind::tanh}) {
    for (int64_t d : {1, 31, 33, 769, 5125}) {
      Tensor x = test::strided_matrix(3, d, DType::f32, rng);
      x.data<float>()[0] = -12.0f;  // deep negative tail
      Tensor out = Tensor::zeros({3, d}, DType::f32), ref = Tensor::zeros({3, d}, DType::f32);
      ops::gelu(x, out, kind);
      ops::ref::gelu(x, ref, kind);
      expect_close(out, ref, 1e-5f, "d=" + std::to_string(d));
      Tensor same = out.clone();
      ops::gelu(same, same, kind);
      Tensor twice = Tensor::zeros({3, d}, DType::f32);
      ops::gelu(out, twice, kind);
      expect_close(same, twice, 0.0f, "in place");
    }
  }
}

TEST(FullAttention, every_query_sees_every_key_as_the_ref_does) {
  Rng rng(73);
  for (int64_t d : {1, 16, 33, 72}) {
    for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {31, 33}, {64, 5}, {9, 300}, {257, 257}}) {  // >= 256 keys: by the GEMM
      for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{1, 1}, {4, 2}, {3, 3}}) {
        Tensor q = test::random_tensor({n, heads, d}, DType::f32, rng);
        Tensor k = test::random_tensor({m, kv_heads, d}, DType::f32, rng), v = test::random_tensor({m, kv_heads, d}, DType::f32, rng);
        Tensor out = Tensor::zeros({n, heads, d}, DType::f32), ref = Tensor::zeros({n, heads, d}, DType::f32);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        ops::full_attention(q, k, v, scale, out);
        ops::ref::full_attention(q, k, v, scale, ref);
        // Outputs are convex combinations of v: normalised by the whole output, not per row.
        expect_close(out.reshape({1, n * heads * d}), ref.reshape({1, n * heads * d}), 2e-5f,
                     "n=" + std::to_string(n) + " d=" + std::to_string(d));
      }
    }
  }
}

TEST(FullAttention, the_last_query_is_not_limited_to_earlier_keys) {
  // One key matches the first query strongly: a causal mask would hide it from nothing, a
  // bidirectional one must let query 0 read value 2.
  Tensor q = Tensor::zeros({1, 1, 2}, DType::f32), k = Tensor::zeros({3, 1, 2}, DType::f32), v = Tensor::zeros({3, 1, 2}, DType::f32);
  q.data<float>()[0] = 1.0f;
  k.data<float>()[4] = 100.0f;  // key 2
  v.data<float>()[4] = 7.0f;
  Tensor out = Tensor::zeros({1, 1, 2}, DType::f32);
  ops::full_attention(q, k, v, 1.0f, out);
  EXPECT_NEAR(out.data<float>()[0], 7.0f, 1e-4f);
}

TEST(FullAttention, bad_arguments_raise_errors) {
  Tensor q = Tensor::zeros({2, 3, 8}, DType::f32), k = Tensor::zeros({4, 2, 8}, DType::f32), out = Tensor::zeros({2, 3, 8}, DType::f32);
  EXPECT_THROW(ops::full_attention(q, k, k, 1.0f, out), Error);  // 3 heads over 2 kv heads
  Tensor cuda = Tensor::view_of(q.raw(), {2, 3, 8}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::full_attention(cuda, q, q, 1.0f, out), Error);  // tensors on two devices
}

}  // namespace
}  // namespace sanctum
