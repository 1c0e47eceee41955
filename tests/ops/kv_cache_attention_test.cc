// The KV cache's stored formats (ops/kv_format.h): rows written through store_kv_rows read back
// within each format's rounding, and attention reading the stored rows in place equals the scalar
// reference run on their dequantized values, at odd head dims, GQA groups and cache offsets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/cpu/kernels.h"
#include "ops/gating.h"
#include "ops/kv_cache_ops.h"
#include "ops/ref/attention.h"
#include "ops/ref/kv_cache.h"

namespace sanctum {
namespace {

using ops::KvCacheDtype;
using ops::KvFormat;
using ops::KvRows;
using test::Rng;

const KvCacheDtype kConverted[] = {KvCacheDtype::bf16, KvCacheDtype::q8, KvCacheDtype::q4v};

std::vector<int32_t> positions_from(int64_t first, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(first + i);
  return p;
}

// rows (n, heads * d) f32 of normal values, some rows shifted off zero (values the affine q4 format
// has to follow).
Tensor random_rows(int64_t n, int64_t heads, int64_t d, Rng& rng) {
  Tensor t = Tensor::zeros({n, heads * d}, DType::f32);
  test::fill_normal(t, rng);
  for (int64_t i = 0; i < n; i += 3)
    for (int64_t c = 0; c < heads * d; ++c) t.data<float>()[i * heads * d + c] += 2.0f;
  return t;
}

// Writes rows into a fresh cache side of `rows` capacity at `first`, in pieces of `piece` rows.
KvRows stored(const Tensor& src, int64_t capacity, int64_t first, int64_t heads, int64_t d, KvFormat format, int64_t piece) {
  KvRows cache = KvRows::zeros(capacity, heads, d, format, Device::cpu);
  for (int64_t at = 0; at < src.dim(0); at += piece) {
    const int64_t end = std::min(src.dim(0), at + piece);
    const std::vector<int32_t> pos = positions_from(first + at, end - at);
    ops::store_kv_rows(src.slice(0, at, end), cache, ops::Positions{pos});
  }
  return cache;
}

TEST(KvCacheFormats, stored_rows_read_back_within_the_formats_rounding) {
  Rng rng(11);
  for (KvFormat format : {KvFormat::f32, KvFormat::bf16, KvFormat::q8, KvFormat::q4})
    for (int64_t d : {1, 31, 32, 33, 64, 80, 128}) {
      SCOPED_TRACE(test::seed_note() + " format " + std::to_string(static_cast<int>(format)) + " head_dim " + std::to_string(d));
      const int64_t n = 9, heads = 3;
      const Tensor src = random_rows(n, heads, d, rng);
      const KvRows cache = stored(src, n + 4, 2, heads, d, format, 4);
      const Tensor back = ops::ref::dequantize_kv(cache.slice_rows(2, 2 + n));
      for (int64_t i = 0; i < n; ++i)
        for (int64_t h = 0; h < heads; ++h)
          for (int64_t b0 = 0; b0 < d; b0 += ops::kKvBlock) {
            const int64_t end = std::min(d, b0 + ops::kKvBlock);
            const float* x = src.data<float>() + (i * heads + h) * d;
            const float* y = back.data<float>() + (i * heads + h) * d;
            float lo = x[b0], hi = x[b0], amax = 0.0f;
            for (int64_t c = b0; c < end; ++c) lo = std::min(lo, x[c]), hi = std::max(hi, x[c]), amax = std::max(amax, std::fabs(x[c]));
            for (int64_t c = b0; c < end; ++c) {
              // Half a step of each format, the step's own bf16 rounding (up to 2^-7) allowed for.
              const float bound = format == KvFormat::f32    ? 0.0f
                                  : format == KvFormat::bf16 ? std::fabs(x[c]) * 0x1p-8f
                                  : format == KvFormat::q8   ? amax / 127.0f * 0.5f * (1 + 0x1p-6f)
                                                             : (hi - lo + std::fabs(lo) * 0x1p-7f) / 15.0f * 0.5f * (1 + 0x1p-6f);
              ASSERT_LE(std::fabs(x[c] - y[c]), bound + 1e-7f) << "row " << i << " head " << h << " col " << c;
            }
          }
    }
}

// out = attention over `dtype`'s stored rows; want = the reference on their dequantized values.
void expect_matches_ref(KvCacheDtype dtype, int64_t n, int64_t q_pos0, int64_t heads, int64_t kv_heads, int64_t d, Rng& rng) {
  SCOPED_TRACE(test::seed_note() + " dtype " + ops::kv_cache_dtype_name(dtype) + " n " + std::to_string(n) + " q_pos0 " +
               std::to_string(q_pos0) + " heads " + std::to_string(heads) + "/" + std::to_string(kv_heads) + " head_dim " +
               std::to_string(d));
  const int64_t keys = q_pos0 + n, capacity = keys + 5;
  const KvRows k = stored(random_rows(keys, kv_heads, d, rng), capacity, 0, kv_heads, d, ops::key_format(dtype), 64);
  const KvRows v = stored(random_rows(keys, kv_heads, d, rng), capacity, 0, kv_heads, d, ops::value_format(dtype), 64);
  Tensor q = Tensor::zeros({n, heads, d}, DType::f32);
  test::fill_normal(q, rng);
  Tensor out = Tensor::zeros({n, heads, d}, DType::f32), want = Tensor::zeros({n, heads, d}, DType::f32);
  const std::vector<int32_t> pos = positions_from(q_pos0, n);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  ops::attention(q, k, v, ops::Positions{pos}, scale, out);
  const Tensor kf = ops::ref::dequantize_kv(k.slice_rows(0, keys)), vf = ops::ref::dequantize_kv(v.slice_rows(0, keys));
  ops::ref::attention(q, kf, vf, q_pos0, scale, want);
  for (int64_t i = 0; i < out.numel(); ++i)
    ASSERT_NEAR(out.data<float>()[i], want.data<float>()[i], 2e-5 * (1.0 + std::fabs(want.data<float>()[i]))) << "element " << i;
}

TEST(KvCacheAttention, matches_ref_on_the_dequantized_rows_for_every_converted_dtype) {
  Rng rng(23);
  struct Case {
    int64_t n, q_pos0, heads, kv_heads, head_dim;
  };
  for (KvCacheDtype dtype : kConverted)
    for (const Case& c : {Case{1, 0, 1, 1, 1}, Case{1, 40, 4, 2, 31}, Case{1, 300, 6, 2, 32}, Case{1, 77, 3, 1, 33}, Case{7, 0, 4, 4, 64},
                          Case{33, 5, 6, 3, 80}, Case{5, 600, 8, 2, 128}, Case{16, 16, 2, 1, 48}})
      expect_matches_ref(dtype, c.n, c.q_pos0, c.heads, c.kv_heads, c.head_dim, rng);
}

// A prefill reads bf16 keys transposed in blocks of the vector width (as many as fit its scratch
// bound, the rest in rows) and decode reads them in rows, a kv group's heads together: every query
// must get the same bits either way, at head dims with and without a vector tail, key counts off the
// block boundaries and groups of 2, 7 and 8 heads.
TEST(KvCacheAttention, a_query_gives_the_same_bits_in_a_prefill_and_in_decode) {
  Rng rng(29);
  const int64_t keys = 70;
  struct Heads {
    int64_t heads, kv_heads;
  };
  for (const Heads& hs : {Heads{4, 2}, Heads{14, 2}, Heads{8, 1}})
    for (KvCacheDtype dtype : kConverted)
      for (int64_t d : {64, 80, 33, 7})
        for (int64_t bound : {ops::kMaxTransposedKeyBytes, int64_t{4 * hs.kv_heads * d * 20}, int64_t{0}}) {
          const int64_t heads = hs.heads, kv_heads = hs.kv_heads;
          SCOPED_TRACE(test::seed_note() + " dtype " + ops::kv_cache_dtype_name(dtype) + " head_dim " + std::to_string(d) + " heads " +
                       std::to_string(heads) + "/" + std::to_string(kv_heads) + " scratch bound " + std::to_string(bound));
          const KvRows k = stored(random_rows(keys, kv_heads, d, rng), keys, 0, kv_heads, d, ops::key_format(dtype), 32);
          const KvRows v = stored(random_rows(keys, kv_heads, d, rng), keys, 0, kv_heads, d, ops::value_format(dtype), 32);
          Tensor q = Tensor::zeros({keys, heads, d}, DType::f32);
          test::fill_normal(q, rng);
          Tensor all = Tensor::zeros({keys, heads, d}, DType::f32), one = Tensor::zeros({1, heads, d}, DType::f32);
          ops::cpu::attention_kv(q, k, v, 0, 0.125f, all, bound);
          for (int64_t i : {0, 7, 15, 16, 17, 31, 32, 47, 69}) {
            const std::vector<int32_t> p1 = positions_from(i, 1);
            ops::attention(q.slice(0, i, i + 1), k, v, ops::Positions{p1}, 0.125f, one);
            for (int64_t c = 0; c < heads * d; ++c) ASSERT_EQ(one.data<float>()[c], all.data<float>()[i * heads * d + c]) << "query " << i;
          }
        }
}

TEST(KvCacheAttention, gated_form_applies_the_sigmoid_gate_to_the_converted_cache_attention) {
  Rng rng(31);
  const int64_t n = 3, heads = 2, d = 32, keys = 10;
  for (KvCacheDtype dtype : kConverted) {
    const KvRows k = stored(random_rows(keys, 1, d, rng), keys, 0, 1, d, ops::key_format(dtype), 8);
    const KvRows v = stored(random_rows(keys, 1, d, rng), keys, 0, 1, d, ops::value_format(dtype), 8);
    Tensor q = Tensor::zeros({n, heads, d}, DType::f32), gate = Tensor::zeros({n, heads, d}, DType::f32);
    test::fill_normal(q, rng);
    test::fill_normal(gate, rng);
    Tensor gated = Tensor::zeros({n, heads, d}, DType::f32), plain = Tensor::zeros({n, heads, d}, DType::f32);
    const std::vector<int32_t> pos = positions_from(keys - n, n);
    ops::gated_attention(q, k, v, ops::Positions{pos}, 0.2f, gate, gated);
    ops::attention(q, k, v, ops::Positions{pos}, 0.2f, plain);
    Tensor plain_rows = plain.reshape({n * heads, d});
    ops::sigmoid_mul(plain_rows, gate.reshape({n * heads, d}), plain_rows);
    for (int64_t i = 0; i < plain.numel(); ++i) ASSERT_EQ(gated.data<float>()[i], plain.data<float>()[i]);
  }
}

TEST(KvCacheAttention, refuses_a_cache_too_short_for_the_queries) {
  const KvRows k = KvRows::zeros(4, 1, 32, KvFormat::q8, Device::cpu), v = KvRows::zeros(4, 1, 32, KvFormat::q4, Device::cpu);
  Tensor q = Tensor::zeros({2, 1, 32}, DType::f32), out = Tensor::zeros({2, 1, 32}, DType::f32);
  const std::vector<int32_t> pos = positions_from(3, 2);
  EXPECT_THROW(ops::attention(q, k, v, ops::Positions{pos}, 1.0f, out), Error);
}

}  // namespace
}  // namespace sanctum
