// RopeTable against mlx-lm (golden outputs from rope_golden.py) and the cpu rope against ops::ref.
#include "ops/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/elementwise.h"
#include "ops/ref/rope.h"
#include "ops/rms_norm.h"
#include "ops/rope_store.h"

namespace sanctum {
namespace {

#include "rope_golden.inc"

using test::Rng;
constexpr int32_t kPositions[5] = {0, 1, 5, 1000, 30000};

// mlx forms the angle in f32 too, but its f32 inverse frequencies may differ by an ulp from ours, and
// the angle error grows with the position: allow 2 ulp of angle plus rounding.
template <int D>
void expect_matches_mlx(const ops::RopeConfig& config, const float (&golden)[5][D], const char* name) {
  ops::RopeTable table(config);
  for (int p = 0; p < 5; ++p) {
    Tensor x = Tensor::zeros({1, 1, D}, DType::f32);
    for (int i = 0; i < D; ++i) x.data<float>()[i] = static_cast<float>((i * 7 % 13) / 13.0 - 0.5);
    const int32_t pos = kPositions[p];
    ops::rope(x, std::span<const int32_t>(&pos, 1), table);
    const double tol = 2e-6 + 2.5e-7 * pos;
    for (int i = 0; i < D; ++i) ASSERT_NEAR(x.data<float>()[i], golden[p][i], tol) << name << " position " << pos << " dim " << i;
  }
}

TEST(Rope, standard_matches_mlx_lm) {
  ops::RopeConfig c;
  c.head_dim = 64;
  c.theta = 1000000.0;
  expect_matches_mlx(c, k_standard, "standard");
}

TEST(Rope, linear_matches_mlx_lm) {
  ops::RopeConfig c;
  c.type = ops::RopeConfig::Type::linear;
  c.head_dim = 32;
  c.factor = 2.0;
  expect_matches_mlx(c, k_linear, "linear");
}

TEST(Rope, llama3_matches_mlx_lm) {
  ops::RopeConfig c;
  c.type = ops::RopeConfig::Type::llama3;
  c.head_dim = 128;
  c.theta = 500000.0;
  c.factor = 8.0;
  c.original_max_position = 8192;
  expect_matches_mlx(c, k_llama3, "llama3");
}

TEST(Rope, yarn_matches_mlx_lm) {
  ops::RopeConfig c;
  c.type = ops::RopeConfig::Type::yarn;
  c.head_dim = 64;
  c.theta = 1000000.0;
  c.factor = 4.0;
  c.original_max_position = 32768;
  expect_matches_mlx(c, k_yarn, "yarn");
  EXPECT_NEAR(ops::RopeTable(c).magnitude(), 0.1 * std::log(4.0) + 1.0, 1e-6);
}

TEST(Rope, yarn_with_mscale_all_dim_matches_mlx_lm) {
  ops::RopeConfig c;
  c.type = ops::RopeConfig::Type::yarn;
  c.head_dim = 128;
  c.theta = 10000.0;
  c.factor = 40.0;
  c.original_max_position = 4096;
  c.mscale = 1.0;
  c.mscale_all_dim = 0.707;
  expect_matches_mlx(c, k_yarn_mscale, "yarn_mscale");
}

TEST(Rope, cpu_matches_ref_with_partial_rotary_and_strided_heads) {
  Rng rng(11);
  for (int head_dim : {2, 32, 64, 80, 128, 256})
    for (int rotary : {0, head_dim / 2, head_dim / 4})
      for (auto type : {ops::RopeConfig::Type::standard, ops::RopeConfig::Type::yarn}) {
        if (rotary % 2) continue;
        ops::RopeConfig c;
        c.type = type;
        c.head_dim = head_dim;
        c.rotary_dim = rotary;
        c.factor = 4.0;
        c.original_max_position = 4096;
        ops::RopeTable table(c);
        const int64_t n = 5, heads = 3;
        // (n, heads, head_dim) view inside a fused (n, heads + 2, head_dim) buffer, one element shifted
        Tensor base = Tensor::zeros({n, heads + 2, head_dim + 1}, DType::f32);
        Tensor x = base.slice(1, 1, 1 + heads).slice(2, 1, 1 + head_dim);
        test::fill_normal(x, rng);
        Tensor expect = x.clone();
        std::vector<int32_t> pos(n);
        for (auto& p : pos) p = static_cast<int32_t>(rng.integer(0, 40000));
        ops::rope(x, pos, table);
        ops::ref::rope(expect, pos, table);
        for (int64_t i = 0; i < n; ++i)
          for (int64_t h = 0; h < heads; ++h)
            for (int64_t d = 0; d < head_dim; ++d) {
              const float got = x.data<float>()[i * x.stride(0) + h * x.stride(1) + d];
              const float want = expect.data<float>()[(i * heads + h) * head_dim + d];
              ASSERT_NEAR(got, want, 3e-6f * (1.0f + std::abs(want)))
                  << "head_dim " << head_dim << " rotary " << rotary << " " << test::seed_note();
            }
      }
}

TEST(Rope, bad_arguments_raise_errors) {
  ops::RopeConfig c;
  c.head_dim = 64;
  ops::RopeTable table(c);
  Tensor x = Tensor::zeros({2, 3, 64}, DType::f32);
  std::vector<int32_t> one{0};
  EXPECT_THROW(ops::rope(x, one, table), Error);  // 1 position for 2 tokens
  std::vector<int32_t> two{0, 1};
  Tensor small = Tensor::zeros({2, 3, 32}, DType::f32);
  EXPECT_THROW(ops::rope(small, two, table), Error);  // rotary_dim > head_dim
  Tensor flat = Tensor::zeros({2, 64}, DType::f32);
  EXPECT_THROW(ops::rope(flat, two, table), Error);
  ops::RopeTable empty;
  EXPECT_THROW(ops::rope(x, two, empty), Error);
  ops::RopeConfig odd = c;
  odd.rotary_dim = 7;
  EXPECT_THROW(ops::RopeTable{odd}, Error);
  Tensor cuda = Tensor::view_of(x.raw(), {2, 3, 64}, DType::f32, nullptr, Device::cuda);
  EXPECT_THROW(ops::rope(cuda, two, table), Error);
}

// The attention layer of the store tests: three tokens at positions 4..6 of a ten-row cache, half of
// each 16-value head rotary.
namespace store_layer {
constexpr int64_t n = 3, heads = 4, kv = 2, d = 16, capacity = 10;
const std::vector<int32_t> pos{4, 5, 6};
ops::RopeTable rope_table() {
  ops::RopeConfig c;
  c.head_dim = static_cast<int>(d);
  c.rotary_dim = 8;
  return ops::RopeTable(c);
}
}  // namespace store_layer

// On the CPU the fused op is the four it stands for; their checks all run first and name what does not fit.
TEST(Rope, rope_and_store_is_rope_rope_and_two_stores) {
  using namespace store_layer;
  Rng rng(9);
  const ops::RopeTable table = rope_table();
  const Tensor q0 = test::random_tensor({n, heads, d}, DType::f32, rng), k0 = test::random_tensor({n, kv, d}, DType::f32, rng);
  const Tensor v = test::random_tensor({n, kv * d}, DType::f32, rng), cache0 = test::random_tensor({capacity, kv * d}, DType::f32, rng);
  Tensor qa = q0.clone(), ka = k0.clone(), cka = cache0.clone(), cva = cache0.clone();
  ops::rope(qa, pos, table);
  ops::rope(ka, pos, table);
  Tensor ka2 = ka.reshape({n, kv * d});
  ops::store_rows(ka2, cka, ops::Positions{pos, nullptr});
  ops::store_rows(v, cva, ops::Positions{pos, nullptr});
  Tensor qb = q0.clone(), kb = k0.clone(), ckb = cache0.clone(), cvb = cache0.clone();
  ops::rope_and_store(qb, kb, v, ops::Positions{pos, nullptr}, table, ckb, cvb);
  for (const auto& [x, y] : {std::pair{&qa, &qb}, {&ka, &kb}, {&cka, &ckb}, {&cva, &cvb}})
    EXPECT_EQ(0, std::memcmp(x->raw(), y->raw(), x->nbytes()));
  Tensor short_cache = Tensor::zeros({5, kv * d}, DType::f32);
  Tensor qc = q0.clone(), kc = k0.clone();
  EXPECT_THROW(ops::rope_and_store(qc, kc, v, ops::Positions{pos, nullptr}, table, short_cache, cvb), Error);  // rows 4..6 of 5
  // Every check runs before anything is written: the refused call left q and k as they were.
  EXPECT_EQ(0, std::memcmp(qc.raw(), q0.raw(), q0.nbytes()));
  EXPECT_EQ(0, std::memcmp(kc.raw(), k0.raw(), k0.nbytes()));
  Tensor flat_k = Tensor::zeros({n, kv * d}, DType::f32);
  EXPECT_THROW(ops::rope_and_store(qb, flat_k, v, ops::Positions{pos, nullptr}, table, ckb, cvb), Error);
}

// Gated attention's form: the head norms, then rope_and_store. On the CPU it is those ops; every check
// runs before anything is written, so a refused call leaves q, k and the cache as they were.
TEST(Rope, norm_rope_and_store_is_two_norms_then_rope_and_store) {
  using namespace store_layer;
  Rng rng(10);
  const ops::RopeTable table = rope_table();
  const ops::Positions positions{pos, nullptr};
  // q and its gate interleaved per head, as the gated attention projection leaves them.
  const Tensor qg = test::random_tensor({n, heads, 2 * d}, DType::f32, rng), k0 = test::random_tensor({n, kv, d}, DType::f32, rng);
  const Tensor q_in = qg.slice(2, 0, d).reshape({n * heads, d});
  const Tensor v = test::random_tensor({n, kv * d}, DType::f32, rng), cache0 = test::random_tensor({capacity, kv * d}, DType::f32, rng);
  const Tensor qw = test::random_tensor({d}, DType::f32, rng), kw = test::random_tensor({d}, DType::f32, rng);
  const float eps = 1e-6f, offset = 1.0f;
  Tensor qa = Tensor::zeros({n, heads, d}, DType::f32), ka = k0.clone(), cka = cache0.clone(), cva = cache0.clone();
  Tensor qa_rows = qa.reshape({n * heads, d}), ka_rows = ka.reshape({n * kv, d});
  ops::rms_norm(q_in, qw, eps, qa_rows, offset);
  ops::rms_norm(ka_rows, kw, eps, ka_rows, offset);
  ops::rope_and_store(qa, ka, v, positions, table, cka, cva);
  Tensor qb = Tensor::zeros({n, heads, d}, DType::f32), kb = k0.clone(), ckb = cache0.clone(), cvb = cache0.clone();
  ops::norm_rope_and_store(q_in, qw, kw, eps, offset, qb, kb, v, positions, table, ckb, cvb);
  for (const auto& [x, y] : {std::pair{&qa, &qb}, {&ka, &kb}, {&cka, &ckb}, {&cva, &cvb}})
    EXPECT_EQ(0, std::memcmp(x->raw(), y->raw(), x->nbytes()));
  Tensor short_cache = Tensor::zeros({5, kv * d}, DType::f32);
  Tensor qc = Tensor::zeros({n, heads, d}, DType::f32), kc = k0.clone();
  EXPECT_THROW(ops::norm_rope_and_store(q_in, qw, kw, eps, offset, qc, kc, v, positions, table, short_cache, cvb),
               Error);  // rows 4..6 of 5
  EXPECT_EQ(0, std::memcmp(kc.raw(), k0.raw(), k0.nbytes()));
  for (int64_t i = 0; i < qc.numel(); ++i) EXPECT_EQ(qc.data<float>()[i], 0.0f);
  const Tensor wrong_norm = test::random_tensor({d + 1}, DType::f32, rng);
  EXPECT_THROW(ops::norm_rope_and_store(q_in, wrong_norm, kw, eps, offset, qc, kc, v, positions, table, ckb, cvb), Error);
  EXPECT_THROW(ops::norm_rope_and_store(q_in.slice(0, 0, n), qw, kw, eps, offset, qc, kc, v, positions, table, ckb, cvb),
               Error);  // rows of one token
  EXPECT_EQ(0, std::memcmp(kc.raw(), k0.raw(), k0.nbytes()));
}

}  // namespace
}  // namespace sanctum
