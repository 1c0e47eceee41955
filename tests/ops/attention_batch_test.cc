// Attention in tasks of (query, kv group) (ops/cpu/attention_decode.h) and the batched attention ops
// (ops/kv_cache_ops.h): every cache format against the scalar reference at odd head dims, key counts
// and 1..8 heads per kv group; a head's bits whatever group it is computed in; a long row split over
// the threads with the bits it has whole; and a batch of sequences (decode rows, drafts and a
// prefill side by side) with the bits each sequence gets alone, rotations and stores included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "op_test_util.h"
#include "ops/kv_cache_ops.h"
#include "ops/ref/attention.h"
#include "ops/ref/kv_cache.h"
#include "ops/rope_store.h"

namespace sanctum {
namespace {

using ops::KvCacheDtype;
using ops::KvFormat;
using ops::KvRows;
using test::Rng;

// Four threads whatever the machine, before the pool first runs: a call with fewer tasks splits them.
const bool kFourThreads = (set_compute_threads(4), true);

const KvCacheDtype kDtypes[] = {KvCacheDtype::f32, KvCacheDtype::bf16, KvCacheDtype::q8, KvCacheDtype::q4v};

std::string name_of(KvCacheDtype dtype) { return ops::kv_cache_dtype_name(dtype); }

std::vector<int32_t> positions_from(int64_t first, int64_t n) {
  std::vector<int32_t> p(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) p[static_cast<size_t>(i)] = static_cast<int32_t>(first + i);
  return p;
}

// A cache side of `capacity` rows with rows [0, keys) random (every third shifted off zero, for q4).
KvRows random_side(int64_t capacity, int64_t keys, int64_t kv_heads, int64_t d, KvFormat format, Rng& rng) {
  KvRows side = KvRows::zeros(capacity, kv_heads, d, format, Device::cpu);
  Tensor src = Tensor::zeros({keys, kv_heads * d}, DType::f32);
  test::fill_normal(src, rng);
  for (int64_t i = 0; i < keys; i += 3)
    for (int64_t c = 0; c < kv_heads * d; ++c) src.data<float>()[i * kv_heads * d + c] += 2.0f;
  const std::vector<int32_t> pos = positions_from(0, keys);
  ops::store_kv_rows(src, side, ops::Positions{pos});
  return side;
}

struct Cache {
  KvRows k, v;
};

Cache random_cache(KvCacheDtype dtype, int64_t capacity, int64_t keys, int64_t kv_heads, int64_t d, Rng& rng) {
  return {random_side(capacity, keys, kv_heads, d, ops::key_format(dtype), rng),
          random_side(capacity, keys, kv_heads, d, ops::value_format(dtype), rng)};
}

// One kv head of a cache side, as a one-head cache (views of the same storage).
KvRows one_kv_head(const KvRows& r, int64_t g) {
  return KvRows{r.data.slice(1, g, g + 1), r.scales ? r.scales.slice(1, g, g + 1) : Tensor{}, r.format, r.head_dim};
}

Tensor random_q(int64_t n, int64_t heads, int64_t d, Rng& rng) {
  Tensor q = Tensor::zeros({n, heads, d}, DType::f32);
  test::fill_normal(q, rng);
  return q;
}

TEST(AttentionTasks, match_the_reference_for_every_format_and_group_size) {
  Rng rng(41);
  for (KvCacheDtype dtype : kDtypes)
    for (int64_t group = 1; group <= 8; ++group)
      for (int64_t d : {1, 31, 33, 64, 80, 256})
        for (int64_t keys : {1, 15, 17, 300}) {
          const int64_t kv_heads = 1 + (group + d) % 2, heads = group * kv_heads, n = keys % 3 == 0 ? 3 : 1, q_pos0 = keys - n;
          SCOPED_TRACE(test::seed_note() + " dtype " + name_of(dtype) + " group " + std::to_string(group) + " kv_heads " +
                       std::to_string(kv_heads) + " head_dim " + std::to_string(d) + " keys " + std::to_string(keys));
          const Cache c = random_cache(dtype, keys + 4, keys, kv_heads, d, rng);
          const Tensor q = random_q(n, heads, d, rng);
          Tensor out = Tensor::zeros({n, heads, d}, DType::f32), want = Tensor::zeros({n, heads, d}, DType::f32);
          const std::vector<int32_t> pos = positions_from(q_pos0, n);
          const float scale = 1.0f / std::sqrt(static_cast<float>(d));
          ops::attention(q, c.k, c.v, ops::Positions{pos}, scale, out);
          const Tensor kf = ops::ref::dequantize_kv(c.k.slice_rows(0, keys)), vf = ops::ref::dequantize_kv(c.v.slice_rows(0, keys));
          ops::ref::attention(q, kf, vf, q_pos0, scale, want);
          for (int64_t i = 0; i < out.numel(); ++i)
            ASSERT_NEAR(out.data<float>()[i], want.data<float>()[i], 2e-5 * (1.0 + std::fabs(want.data<float>()[i]))) << "element " << i;
        }
}

// The heads of a group share each row load: a head computed in a group of 8 has the bits it has
// alone (a group of one, over its kv head only).
TEST(AttentionTasks, a_head_has_the_same_bits_in_any_group) {
  Rng rng(42);
  for (KvCacheDtype dtype : kDtypes)
    for (int64_t d : {7, 48, 64, 128})
      for (int64_t group : {3, 5, 8}) {
        SCOPED_TRACE(test::seed_note() + " dtype " + name_of(dtype) + " head_dim " + std::to_string(d) + " group " + std::to_string(group));
        const int64_t kv_heads = 2, heads = group * kv_heads, keys = 61, n = 2;
        const Cache c = random_cache(dtype, keys, keys, kv_heads, d, rng);
        const Tensor q = random_q(n, heads, d, rng);
        Tensor all = Tensor::zeros({n, heads, d}, DType::f32), one = Tensor::zeros({n, 1, d}, DType::f32);
        const std::vector<int32_t> pos = positions_from(keys - n, n);
        ops::attention(q, c.k, c.v, ops::Positions{pos}, 0.3f, all);
        for (int64_t h = 0; h < heads; ++h) {
          const int64_t g = h / group;
          ops::attention(q.slice(1, h, h + 1), one_kv_head(c.k, g), one_kv_head(c.v, g), ops::Positions{pos}, 0.3f, one);
          for (int64_t i = 0; i < n; ++i)
            ASSERT_TRUE(test::same_bits(one.data<float>() + i * d, all.data<float>() + (i * heads + h) * d, d))
                << "head " << h << " row " << i;
        }
      }
}

// Fewer tasks than threads: a long row's keys and columns are shared out among the threads. Beside
// enough other sequences nothing is split, and the row must come out with the same bits.
TEST(AttentionTasks, a_long_row_split_over_the_threads_keeps_its_bits) {
  ASSERT_TRUE(kFourThreads);
  ASSERT_EQ(compute_pool().size(), 4);
  Rng rng(43);
  for (KvCacheDtype dtype : kDtypes)
    for (int64_t d : {64, 80, 33})
      for (int64_t keys : {256, 1000, 1237}) {
        SCOPED_TRACE(test::seed_note() + " dtype " + name_of(dtype) + " head_dim " + std::to_string(d) + " keys " + std::to_string(keys));
        const int64_t heads = 3;
        const Cache c = random_cache(dtype, keys, keys, 1, d, rng);
        const Tensor q = random_q(1, heads, d, rng);
        Tensor alone = Tensor::zeros({1, heads, d}, DType::f32);
        const std::vector<int32_t> pos = positions_from(keys - 1, 1);
        ops::attention(q, c.k, c.v, ops::Positions{pos}, 0.2f, alone);  // one task: split four ways
        // the same row as the first of five sequences (five tasks): each task whole
        std::vector<ops::SequenceCache> seqs = {{0, 1, ops::Positions{pos}, c.k, c.v}};
        Tensor batch_q = Tensor::zeros({5, heads, d}, DType::f32), batch_out = Tensor::zeros({5, heads, d}, DType::f32);
        test::fill_normal(batch_q, rng);
        std::copy(q.data<float>(), q.data<float>() + heads * d, batch_q.data<float>());
        for (int64_t s = 1; s < 5; ++s) seqs.push_back({s, s + 1, ops::Positions{pos}, c.k, c.v});
        ops::attention(batch_q, seqs, 0.2f, batch_out);
        ASSERT_TRUE(test::same_bits(alone.data<float>(), batch_out.data<float>(), heads * d));
      }
}

// A batch of sequences in one call: decode rows at different positions, a three-row draft and a
// prefill (whose bf16 keys are transposed), each with the bits of its own one-sequence call.
TEST(AttentionBatch, each_sequence_has_the_bits_it_has_alone) {
  Rng rng(44);
  struct Shape {
    int64_t rows, first;
  };
  const Shape shapes[] = {{1, 0}, {1, 700}, {3, 40}, {20, 5}, {1, 129}, {1, 16}};
  for (KvCacheDtype dtype : kDtypes)
    for (int64_t d : {64, 33})
      for (bool gated : {false, true}) {
        SCOPED_TRACE(test::seed_note() + " dtype " + name_of(dtype) + " head_dim " + std::to_string(d) + (gated ? " gated" : ""));
        const int64_t heads = 14, kv_heads = 2;
        int64_t n = 0;
        std::vector<ops::SequenceCache> seqs;
        std::vector<std::vector<int32_t>> positions;
        positions.reserve(std::size(shapes));
        for (const Shape& s : shapes) {
          const Cache c = random_cache(dtype, s.first + s.rows + 3, s.first + s.rows, kv_heads, d, rng);
          positions.push_back(positions_from(s.first, s.rows));
          seqs.push_back({n, n + s.rows, ops::Positions{positions.back()}, c.k, c.v});
          n += s.rows;
        }
        const Tensor q = random_q(n, heads, d, rng), gate = random_q(n, heads, d, rng);
        Tensor batched = Tensor::zeros({n, heads, d}, DType::f32), alone = Tensor::zeros({n, heads, d}, DType::f32);
        if (gated) ops::gated_attention(q, seqs, 0.125f, gate, batched);
        else ops::attention(q, seqs, 0.125f, batched);
        for (const ops::SequenceCache& s : seqs) {
          Tensor out = alone.slice(0, s.begin, s.end);
          const Tensor qs = q.slice(0, s.begin, s.end);
          if (gated) ops::gated_attention(qs, s.k, s.v, s.positions, 0.125f, gate.slice(0, s.begin, s.end), out);
          else ops::attention(qs, s.k, s.v, s.positions, 0.125f, out);
        }
        ASSERT_TRUE(test::same_bits(batched.data<float>(), alone.data<float>(), n * heads * d));
      }
}

// The batch's rotations run over all rows at once and each sequence's keys and values go to its own
// cache: the rotated rows and every cache byte as the one-sequence op leaves them.
TEST(AttentionBatch, rope_and_store_gives_each_sequence_its_own_bits) {
  Rng rng(45);
  ops::RopeConfig config;
  config.head_dim = 32;
  config.rotary_dim = 16;
  config.theta = 10000.0;
  const ops::RopeTable table(config);
  for (KvCacheDtype dtype : kDtypes)
    for (bool normed : {false, true}) {
      SCOPED_TRACE(test::seed_note() + " dtype " + name_of(dtype) + (normed ? " normed" : ""));
      const int64_t heads = 4, kv_heads = 2, d = 32;
      const std::vector<int64_t> rows = {1, 5, 1, 2}, firsts = {9, 0, 30, 3};
      std::vector<int32_t> all_pos;
      std::vector<std::vector<int32_t>> pos;
      pos.reserve(rows.size());
      std::vector<ops::SequenceCache> batch, solo;
      int64_t n = 0;
      for (size_t s = 0; s < rows.size(); ++s) {
        pos.push_back(positions_from(firsts[s], rows[s]));
        all_pos.insert(all_pos.end(), pos.back().begin(), pos.back().end());
        const int64_t capacity = firsts[s] + rows[s] + 2;
        const Cache a = random_cache(dtype, capacity, firsts[s], kv_heads, d, rng);
        Cache b{KvRows::zeros(capacity, kv_heads, d, a.k.format, Device::cpu),
                KvRows::zeros(capacity, kv_heads, d, a.v.format, Device::cpu)};
        b.k.data.copy_from(a.k.data);
        b.v.data.copy_from(a.v.data);
        if (a.k.scales) b.k.scales.copy_from(a.k.scales);
        if (a.v.scales) b.v.scales.copy_from(a.v.scales);
        batch.push_back({n, n + rows[s], ops::Positions{pos.back()}, a.k, a.v});
        solo.push_back({n, n + rows[s], ops::Positions{pos.back()}, b.k, b.v});
        n += rows[s];
      }
      const Tensor q0 = random_q(n, heads, d, rng), k0 = random_q(n, kv_heads, d, rng),
                   v = random_q(n, kv_heads, d, rng).reshape({n, kv_heads * d});
      const Tensor q_in = random_q(n * heads, 1, d, rng).reshape({n * heads, d});
      const Tensor q_norm = random_q(1, 1, d, rng).reshape({d}), k_norm = random_q(1, 1, d, rng).reshape({d});
      Tensor qb = q0.clone(), kb = k0.clone(), qs = q0.clone(), ks = k0.clone();
      if (normed) ops::norm_rope_and_store(q_in, q_norm, k_norm, 1e-6f, 1.0f, qb, kb, v, all_pos, table, batch);
      else ops::rope_and_store(qb, kb, v, all_pos, table, batch);
      for (const ops::SequenceCache& s : solo) {
        Tensor qr = qs.slice(0, s.begin, s.end), kr = ks.slice(0, s.begin, s.end);
        if (normed)
          ops::norm_rope_and_store(q_in.slice(0, s.begin * heads, s.end * heads), q_norm, k_norm, 1e-6f, 1.0f, qr, kr,
                                   v.slice(0, s.begin, s.end), s.positions, table, s.k, s.v);
        else ops::rope_and_store(qr, kr, v.slice(0, s.begin, s.end), s.positions, table, s.k, s.v);
      }
      ASSERT_TRUE(test::same_bits(qb.data<float>(), qs.data<float>(), n * heads * d));
      ASSERT_TRUE(test::same_bits(kb.data<float>(), ks.data<float>(), n * kv_heads * d));
      for (size_t s = 0; s < batch.size(); ++s) {
        ASSERT_EQ(std::memcmp(batch[s].k.data.raw(), solo[s].k.data.raw(), batch[s].k.data.nbytes()), 0) << "sequence " << s;
        ASSERT_EQ(std::memcmp(batch[s].v.data.raw(), solo[s].v.data.raw(), batch[s].v.data.nbytes()), 0) << "sequence " << s;
        if (batch[s].k.scales) {
          ASSERT_EQ(std::memcmp(batch[s].k.scales.raw(), solo[s].k.scales.raw(), batch[s].k.scales.nbytes()), 0) << "sequence " << s;
        }
        if (batch[s].v.scales) {
          ASSERT_EQ(std::memcmp(batch[s].v.scales.raw(), solo[s].v.scales.raw(), batch[s].v.scales.nbytes()), 0) << "sequence " << s;
        }
      }
    }
}

TEST(AttentionBatch, refuses_rows_outside_the_batch_and_positions_that_are_not_the_sequences) {
  Rng rng(46);
  const Cache c = random_cache(KvCacheDtype::bf16, 10, 4, 1, 32, rng);
  Tensor q = random_q(2, 2, 32, rng), out = Tensor::zeros({2, 2, 32}, DType::f32);
  const std::vector<int32_t> at4 = positions_from(4, 1), at4_3 = positions_from(4, 3), at5 = positions_from(5, 1);
  const std::vector<ops::SequenceCache> past_the_end = {{0, 1, ops::Positions{at4}, c.k, c.v}, {1, 4, ops::Positions{at4_3}, c.k, c.v}};
  EXPECT_THROW(ops::attention(q, past_the_end, 1.0f, out), Error);
  const std::vector<ops::SequenceCache> short_positions = {{0, 1, ops::Positions{at4}, c.k, c.v}, {1, 2, ops::Positions{}, c.k, c.v}};
  EXPECT_THROW(ops::attention(q, short_positions, 1.0f, out), Error);
  // the rotations' positions must be the sequences' own
  Tensor k = random_q(2, 1, 32, rng), v = random_q(2, 1, 32, rng).reshape({2, 32});
  ops::RopeConfig config;
  config.head_dim = 32;
  const ops::RopeTable table(config);
  const std::vector<ops::SequenceCache> two = {{0, 1, ops::Positions{at4}, c.k, c.v}, {1, 2, ops::Positions{at5}, c.k, c.v}};
  const std::vector<int32_t> wrong = {4, 6};
  EXPECT_THROW(ops::rope_and_store(q, k, v, wrong, table, two), Error);
}

}  // namespace
}  // namespace sanctum
