// The vision encoder's ops on the GPU (layer_norm, gelu, full_attention, encoder_matmul) against
// the scalar references in src/ops/ref, on fresh random inputs at odd sizes, strided rows and the
// aliasing the tower uses. Skips without a GPU; scripts/gpu_check.sh runs it there.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "../ops/op_test_util.h"
#include "gpu_test_util.h"
#include "ops/encoder_matmul.h"
#include "ops/full_attention.h"
#include "ops/gelu.h"
#include "ops/layer_norm.h"
#include "ops/precision.h"
#include "ops/ref/full_attention.h"
#include "ops/ref/gelu.h"
#include "ops/ref/layer_norm.h"
#include "ops/ref/matmul.h"

namespace sanctum {
namespace {

using test::Rng;

class CudaEncoderOps : public test::RequiresGpu {};

using test::PrecisionScope;

// Each element of `got` (any device, any strides) within rel of the largest magnitude of its row of
// `want` (host): f32 rounding of a row's sums scales with the row.
void expect_close(const Tensor& got_any, const Tensor& want, float rel, const std::string& what) {
  const Tensor got = test::host(got_any).clone();
  ASSERT_EQ(got.numel(), want.numel()) << what;
  const int64_t d = want.dim(-1), rows = want.numel() / d;
  const Tensor g2 = got.reshape({rows, d}), w2 = want.clone().reshape({rows, d});
  for (int64_t r = 0; r < rows; ++r) {
    float scale = 1e-6f;
    for (int64_t c = 0; c < d; ++c) scale = std::max(scale, std::abs(test::at(w2, r, c)));
    for (int64_t c = 0; c < d; ++c)
      ASSERT_NEAR(test::at(g2, r, c), test::at(w2, r, c), rel * scale) << what << " row " << r << " col " << c << " " << test::seed_note();
  }
}

// A strided, misaligned (rows, cols) f32 view on the GPU and the same values on the host.
std::pair<Tensor, Tensor> strided_pair(int64_t rows, int64_t cols, Rng& rng, float shift = 0.0f) {
  Tensor h = test::strided_matrix(rows, cols, DType::f32, rng);
  for (int64_t r = 0; r < rows; ++r) h.data<float>()[r * h.stride(0)] += shift;
  Tensor wide = test::gpu(Tensor::zeros({rows, cols + 3}, DType::f32));
  Tensor g = wide.slice(1, 1, 1 + cols);
  g.copy_from(h);
  return {g, h};
}

TEST_F(CudaEncoderOps, layer_norm_matches_ref_at_odd_sizes_strided_and_in_place) {
  Rng rng(81);
  for (int64_t d : {1, 31, 32, 33, 769, 1152, 5125}) {
    for (int64_t n : {1, 5, 300}) {
      auto [x, xh] = strided_pair(n, d, rng, 40.0f);  // rows far from zero: the mean must come out first
      for (DType wt : {DType::f32, DType::bf16, DType::f16}) {
        Tensor w = test::random_tensor({d}, wt, rng), b = test::random_tensor({d}, wt, rng);
        Tensor ref = Tensor::zeros({n, d}, DType::f32);
        ops::ref::layer_norm(xh, w, b, 1e-6f, ref);
        Tensor out = test::gpu(Tensor::zeros({n, d}, DType::f32));
        ops::layer_norm(x, test::gpu(w), test::gpu(b), 1e-6f, out);
        expect_close(out, ref, 2e-5f, "d=" + std::to_string(d) + " n=" + std::to_string(n));
        Tensor same = test::gpu(xh.clone());
        ops::layer_norm(same, test::gpu(w), test::gpu(b), 1e-6f, same);
        expect_close(same, ref, 2e-5f, "in place d=" + std::to_string(d));
      }
    }
  }
}

TEST_F(CudaEncoderOps, gelu_both_forms_match_ref_strided_and_in_place) {
  Rng rng(82);
  for (ops::GeluKind kind : {ops::GeluKind::erf, ops::GeluKind::tanh}) {
    for (int64_t d : {1, 31, 33, 769, 5125}) {
      auto [x, xh] = strided_pair(7, d, rng);
      xh.data<float>()[0] = -12.0f;  // deep negative tail
      if (d > 1) xh.data<float>()[1] = 9.0f;
      x.copy_from(xh);
      Tensor ref = Tensor::zeros({7, d}, DType::f32);
      ops::ref::gelu(xh, ref, kind);
      Tensor out = test::gpu(Tensor::zeros({7, d}, DType::f32));
      ops::gelu(x, out, kind);
      expect_close(out, ref, 2e-6f, "d=" + std::to_string(d));
      ops::gelu(x, x, kind);
      expect_close(x, ref, 2e-6f, "in place d=" + std::to_string(d));
    }
  }
}

// q, k, v as the tower makes them (heads of one token side by side) and a query view cut out of a
// wider row, as slices of the qkv projection are.
TEST_F(CudaEncoderOps, full_attention_every_query_sees_every_key_as_the_ref_does) {
  Rng rng(83);
  for (ops::MatmulPrecision p : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16}) {
    const PrecisionScope scope(p);
    // TF32 rounds q and k to 11 significant bits outside the f32 mode: scores of ~10 (head_dim 1) move by
    // ~1e-2 and their weights by ~1%.
    const float rel = p == ops::MatmulPrecision::f32 ? 2e-5f : 3e-2f;
    for (int64_t d : {1, 16, 33, 72}) {
      for (auto [n, m] : {std::pair<int64_t, int64_t>{1, 1}, {7, 7}, {31, 33}, {64, 5}, {9, 300}, {257, 257}}) {
        for (auto [heads, kv_heads] : {std::pair<int64_t, int64_t>{1, 1}, {4, 2}, {3, 3}}) {
          Tensor qh = test::random_tensor({n, heads, d}, DType::f32, rng);
          Tensor kh = test::random_tensor({m, kv_heads, d}, DType::f32, rng), vh = test::random_tensor({m, kv_heads, d}, DType::f32, rng);
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          Tensor ref = Tensor::zeros({n, heads, d}, DType::f32);
          ops::ref::full_attention(qh, kh, vh, scale, ref);
          Tensor wide_host = Tensor::zeros({n, heads + 1, d}, DType::f32);  // filled here, uploaded whole
          for (int64_t i = 0; i < n; ++i)
            for (int64_t h = 0; h < heads; ++h)
              for (int64_t k = 0; k < d; ++k)
                wide_host.data<float>()[(i * (heads + 1) + h + 1) * d + k] = qh.data<float>()[(i * heads + h) * d + k];
          Tensor wide = test::gpu(wide_host);
          Tensor q = wide.slice(1, 1, heads + 1);
          Tensor out = test::gpu(Tensor::zeros({n, heads, d}, DType::f32));
          ops::full_attention(q, test::gpu(kh), test::gpu(vh), scale, out);
          // Outputs are convex combinations of v: normalised by the whole output.
          expect_close(out.reshape({1, n * heads * d}), ref.reshape({1, n * heads * d}), rel,
                       std::string(ops::matmul_precision_name(p)) + " n=" + std::to_string(n) + " m=" + std::to_string(m) +
                           " d=" + std::to_string(d) + " heads=" + std::to_string(heads) + "/" + std::to_string(kv_heads));
        }
      }
    }
  }
}

TEST_F(CudaEncoderOps, full_attention_over_many_keys_runs_in_query_blocks) {
  // 9,000 keys and a group of two: S of one block is bounded near 64 MB, so 1,000 queries take two
  // blocks; the second must start at its own queries.
  Rng rng(84);
  const PrecisionScope scope(ops::MatmulPrecision::f32);
  const int64_t n = 1000, m = 9000, heads = 4, kv_heads = 2, d = 16;
  Tensor qh = test::random_tensor({n, heads, d}, DType::f32, rng);
  Tensor kh = test::random_tensor({m, kv_heads, d}, DType::f32, rng), vh = test::random_tensor({m, kv_heads, d}, DType::f32, rng);
  Tensor ref = Tensor::zeros({n, heads, d}, DType::f32);
  ops::ref::full_attention(qh, kh, vh, 0.7f, ref);
  Tensor out = test::gpu(Tensor::zeros({n, heads, d}, DType::f32));
  ops::full_attention(test::gpu(qh), test::gpu(kh), test::gpu(vh), 0.7f, out);
  expect_close(out.reshape({1, n * heads * d}), ref.reshape({1, n * heads * d}), 2e-5f, "9000 keys");
}

// sum_k |x[i][k]| |W[r][k]| for each output: what the f32 rounding of the sum y[i][r] scales with
// (a single output's own magnitude can be far smaller when its terms cancel).
Tensor abs_products(const Tensor& xh, const Weight& w, int64_t rows, int64_t cols) {
  Tensor eye = Tensor::zeros({cols, cols}, DType::f32);
  for (int64_t k = 0; k < cols; ++k) eye.data<float>()[k * cols + k] = 1.0f;
  Tensor wt = Tensor::zeros({cols, rows}, DType::f32);
  ops::ref::matmul(eye, w, wt);  // wt[k][r] = W[r][k], quantized forms dequantized
  const int64_t n = xh.dim(0);
  Tensor out = Tensor::zeros({n, rows}, DType::f32);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t r = 0; r < rows; ++r) {
      double sum = 0;
      for (int64_t k = 0; k < cols; ++k) sum += std::abs(double{test::at(xh, i, k)}) * std::abs(double{wt.data<float>()[k * rows + r]});
      out.data<float>()[i * rows + r] = static_cast<float>(sum);
    }
  return out;
}

TEST_F(CudaEncoderOps, encoder_matmul_is_an_f32_gemm_in_the_f32_mode_for_every_weight_form) {
  Rng rng(85);
  const PrecisionScope scope(ops::MatmulPrecision::f32);
  for (int64_t n : {1, 33, 300}) {
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{1, 64}, {33, 128}, {769, 192}}) {
      auto [x, xh] = strided_pair(n, cols, rng);
      std::vector<std::pair<std::string, Weight>> weights;
      for (DType dt : {DType::f32, DType::bf16, DType::f16})
        weights.push_back({std::string(dtype_name(dt)), dense_weight(test::random_tensor({rows, cols}, dt, rng))});
      weights.push_back({"q4", test::random_quantized(rows, cols, 4, 64, DType::bf16, rng)});
      weights.push_back({"q8", test::random_quantized(rows, cols, 8, 32, DType::f32, rng)});
      for (const auto& [name, w] : weights) {
        Tensor ref = Tensor::zeros({n, rows}, DType::f32);
        ops::ref::matmul(xh, w, ref);
        Tensor wide = test::gpu(Tensor::zeros({n, rows + 5}, DType::f32));
        Tensor y = wide.slice(1, 2, 2 + rows);
        ops::encoder_matmul(x, test::gpu(w), y);
        // f32 sums of at most 192 terms round within 192 * 2^-24 ~ 1.1e-5 of sum |x||w|; TF32 products
        // (2^-11 each) would miss that by far.
        const Tensor got = test::host(y).clone(), bound = abs_products(xh, w, rows, cols);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_NEAR(test::at(got, i, r), ref.data<float>()[i * rows + r], 2e-5f * bound.data<float>()[i * rows + r] + 1e-30f)
                << name << " n=" << n << " rows=" << rows << " at " << i << "," << r << " " << test::seed_note();
      }
    }
  }
}

TEST_F(CudaEncoderOps, encoder_matmul_in_the_bf16_mode_stays_within_bf16_rounding) {
  Rng rng(86);
  const PrecisionScope scope(ops::MatmulPrecision::bf16);
  auto [x, xh] = strided_pair(300, 256, rng);
  const Weight w = dense_weight(test::random_tensor({129, 256}, DType::bf16, rng));
  Tensor ref = Tensor::zeros({300, 129}, DType::f32);
  ops::ref::matmul(xh, w, ref);
  Tensor y = test::gpu(Tensor::zeros({300, 129}, DType::f32));
  ops::encoder_matmul(x, test::gpu(w), y);
  expect_close(y, ref, 2e-2f, "bf16 mode");
}

}  // namespace
}  // namespace sanctum
