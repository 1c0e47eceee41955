#include "ops/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/gating.h"
#include "ops/ref/attention.h"

namespace sanctum {
namespace {

using test::Rng;

// A KV cache view: (n_kv, kv_heads, head_dim) rows inside a (capacity, kv_heads + 1, head_dim) buffer,
// so the token stride exceeds kv_heads * head_dim.
Tensor cache_view(int64_t n_kv, int64_t kv_heads, int64_t head_dim, Rng& rng) {
  Tensor base = Tensor::zeros({n_kv + 7, kv_heads + 1, head_dim}, DType::f32);
  test::fill_normal(base, rng);
  return base.slice(0, 0, n_kv).slice(1, 0, kv_heads);
}

double max_error(const Tensor& got, const Tensor& want) {
  double err = 0;
  for (int64_t i = 0; i < got.dim(0); ++i)
    for (int64_t h = 0; h < got.dim(1); ++h)
      for (int64_t d = 0; d < got.dim(2); ++d)
        err = std::max(err, static_cast<double>(std::abs(got.data<float>()[i * got.stride(0) + h * got.stride(1) + d] -
                                                         want.data<float>()[i * want.stride(0) + h * want.stride(1) + d])));
  return err;
}

TEST(Attention, matches_ref_for_gqa_shapes_and_cache_offsets) {
  Rng rng(71);
  struct Case {
    int64_t n, q_pos0, heads, kv_heads, head_dim;
  };
  for (Case c : {Case{1, 0, 2, 1, 32}, Case{1, 700, 14, 2, 64}, Case{9, 0, 14, 2, 64}, Case{33, 5, 4, 4, 31}, Case{17, 40, 8, 2, 128},
                 Case{5, 3, 6, 3, 256}, Case{3, 0, 2, 2, 1}}) {
    const int64_t n_kv = c.q_pos0 + c.n + 2;  // cache rows beyond the last query must be ignored
    Tensor q = test::random_tensor({c.n, c.heads, c.head_dim}, DType::f32, rng);
    Tensor k = cache_view(n_kv, c.kv_heads, c.head_dim, rng), v = cache_view(n_kv, c.kv_heads, c.head_dim, rng);
    Tensor out = Tensor::zeros({c.n, c.heads, c.head_dim}, DType::f32), ref = Tensor::zeros({c.n, c.heads, c.head_dim}, DType::f32);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    ops::attention(q, k, v, c.q_pos0, scale, out);
    ops::ref::attention(q, k, v, c.q_pos0, scale, ref);
    // outputs are convex mixtures of V rows (|v| ~ N(0,1)); absolute f32 error
    EXPECT_LE(max_error(out, ref), 2e-5) << "n=" << c.n << " q_pos0=" << c.q_pos0 << " heads=" << c.heads << "/" << c.kv_heads
                                         << " head_dim=" << c.head_dim << " " << test::seed_note();
  }
}

TEST(Attention, prefill_then_decode_equals_full_prefill_bitwise) {
  Rng rng(72);
  const int64_t L = 40, split = 27, heads = 14, kv_heads = 2, head_dim = 64;
  Tensor q = test::random_tensor({L, heads, head_dim}, DType::f32, rng);
  Tensor k = cache_view(L, kv_heads, head_dim, rng), v = cache_view(L, kv_heads, head_dim, rng);
  Tensor full = Tensor::zeros({L, heads, head_dim}, DType::f32);
  ops::attention(q, k, v, 0, 0.125f, full);
  Tensor part = Tensor::zeros({L, heads, head_dim}, DType::f32);
  Tensor head = part.slice(0, 0, split);
  ops::attention(q.slice(0, 0, split), k.slice(0, 0, split), v.slice(0, 0, split), 0, 0.125f, head);
  for (int64_t i = split; i < L; ++i) {
    Tensor oi = part.slice(0, i, i + 1);
    ops::attention(q.slice(0, i, i + 1), k.slice(0, 0, i + 1), v.slice(0, 0, i + 1), i, 0.125f, oi);
  }
  EXPECT_TRUE(test::same_bits(full.data<float>(), part.data<float>(), L * heads * head_dim)) << test::seed_note();
}

TEST(Attention, bad_arguments_raise_errors) {
  Tensor q = Tensor::zeros({2, 4, 16}, DType::f32), out = Tensor::zeros({2, 4, 16}, DType::f32);
  Tensor k = Tensor::zeros({5, 3, 16}, DType::f32);  // 4 heads not a multiple of 3
  EXPECT_THROW(ops::attention(q, k, k, 0, 1.0f, out), Error);
  Tensor k2 = Tensor::zeros({5, 2, 16}, DType::f32);
  EXPECT_THROW(ops::attention(q, k2, k2, 4, 1.0f, out), Error);  // cache too short for q_pos0 + n
  Tensor k_hd = Tensor::zeros({5, 2, 8}, DType::f32);
  EXPECT_THROW(ops::attention(q, k_hd, k_hd, 0, 1.0f, out), Error);
  Tensor cuda = Tensor::view_of(q.raw(), {2, 4, 16}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::attention(cuda, k2, k2, 0, 1.0f, out), Error);
  Tensor out16 = Tensor::zeros({2, 4, 16}, DType::bf16);  // bf16 out is the GPU's alone
  EXPECT_THROW(ops::attention(q, k2, k2, 3, 1.0f, out16), Error);
  EXPECT_EQ(ops::attention_output_dtype(4096, 128, Device::cpu), DType::f32);
  ops::attention(q, k2, k2, 3, 1.0f, out);
}

// Gated attention's output: attention over the cache, then sigmoid_mul by the gate, read in place
// from the q/gate rows the projection left (each head's query then its gate).
TEST(Attention, gated_attention_is_attention_then_sigmoid_mul) {
  Rng rng(12);
  const int64_t n = 3, heads = 4, kv = 2, d = 16, capacity = 9;
  const std::vector<int32_t> pos{5, 6, 7};
  const ops::Positions positions{pos, nullptr};
  const Tensor q = test::random_tensor({n, heads, d}, DType::f32, rng), qg = test::random_tensor({n, heads, 2 * d}, DType::f32, rng);
  const Tensor k = test::random_tensor({capacity, kv, d}, DType::f32, rng), v = test::random_tensor({capacity, kv, d}, DType::f32, rng);
  const Tensor gate = qg.slice(2, d, 2 * d);
  Tensor want = Tensor::zeros({n, heads, d}, DType::f32), got = Tensor::zeros({n, heads, d}, DType::f32);
  ops::attention(q, k, v, positions, 0.25f, want);
  Tensor want_rows = want.reshape({n * heads, d});
  ops::sigmoid_mul(want_rows, gate.reshape({n * heads, d}), want_rows);
  ops::gated_attention(q, k, v, positions, 0.25f, gate, got);
  EXPECT_TRUE(test::same_bits(want.data<float>(), got.data<float>(), n * heads * d));
  Tensor narrow = Tensor::zeros({n, heads, d - 1}, DType::f32);
  EXPECT_THROW(ops::gated_attention(q, k, v, positions, 0.25f, narrow, got), Error);
  EXPECT_THROW(ops::gated_attention(q, k, v, positions, 0.25f, Tensor{}, got), Error);
  Tensor short_cache = k.slice(0, 0, 6);  // rows 5..7 of 6
  EXPECT_THROW(ops::gated_attention(q, short_cache, short_cache, positions, 0.25f, gate, got), Error);
}

}  // namespace
}  // namespace sanctum
