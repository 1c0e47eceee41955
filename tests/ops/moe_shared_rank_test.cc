// A MoE block's shared expert run as one more rank of the routed experts (GPU decode): ops::moe_route
// with an appended id and ops::moe_combine_shared_rank, on the CPU, against the plain routing and the
// combine with a separate shared tensor, which they must reproduce bit for bit.
#include <gtest/gtest.h>

#include <cstring>

#include "base/error.h"
#include "op_test_util.h"
#include "ops/moe.h"

namespace sanctum {
namespace {

using test::Rng;

TEST(MoeSharedRank, routing_appends_the_id_after_each_tokens_choices) {
  Rng rng(61);
  for (bool softmax_first : {true, false}) {
    const int64_t n = 5, E = 40, k = 6;
    Tensor logits = test::random_tensor({n, E}, DType::f32, rng);
    const ops::MoeRouting how{k, softmax_first, true};
    Tensor ids = Tensor::zeros({n, k}, DType::i32), w = Tensor::zeros({n, k}, DType::f32);
    Tensor ids_ext = Tensor::zeros({n, k + 1}, DType::i32), w_ext = Tensor::zeros({n, k}, DType::f32);
    ops::moe_route(logits, how, ids, w);
    ops::moe_route(logits, how, ids_ext, w_ext, static_cast<int32_t>(E));
    for (int64_t t = 0; t < n; ++t) {
      for (int64_t r = 0; r < k; ++r) EXPECT_EQ(ids_ext.data<int32_t>()[t * (k + 1) + r], ids.data<int32_t>()[t * k + r]) << t << " " << r;
      EXPECT_EQ(ids_ext.data<int32_t>()[t * (k + 1) + k], E) << t;
    }
    EXPECT_EQ(std::memcmp(w_ext.raw(), w.raw(), w.nbytes()), 0);
    // Sized for k ids per token where k + 1 are asked: refused.
    EXPECT_THROW(ops::moe_route(logits, how, ids, w, static_cast<int32_t>(E)), Error);
  }
}

TEST(MoeSharedRank, combine_with_the_shared_row_inside_equals_the_separate_shared_tensor) {
  Rng rng(62);
  for (int64_t n : {1, 3, 8})
    for (int64_t k : {1, 4, 8}) {
      const int64_t d = 37;
      Tensor routed = test::random_tensor({n * k, d}, DType::f32, rng), shared = test::random_tensor({n, d}, DType::f32, rng);
      Tensor w = test::random_tensor({n, k}, DType::f32, rng), logit = test::random_tensor({n, 1}, DType::f32, rng);
      Tensor inside = Tensor::zeros({n * (k + 1), d}, DType::f32);
      for (int64_t t = 0; t < n; ++t) {
        for (int64_t r = 0; r < k; ++r)
          std::memcpy(inside.data<float>() + (t * (k + 1) + r) * d, routed.data<float>() + (t * k + r) * d, d * sizeof(float));
        std::memcpy(inside.data<float>() + (t * (k + 1) + k) * d, shared.data<float>() + t * d, d * sizeof(float));
      }
      Tensor want = Tensor::zeros({n, d}, DType::f32), got = Tensor::zeros({n, d}, DType::f32);
      ops::moe_combine(routed, w, &shared, &logit, want);
      ops::moe_combine_shared_rank(inside, w, logit, got);
      EXPECT_EQ(std::memcmp(got.raw(), want.raw(), want.nbytes()), 0) << "n " << n << " k " << k;
      EXPECT_THROW(ops::moe_combine_shared_rank(routed, w, logit, got), Error);  // no shared rows
    }
}

}  // namespace
}  // namespace sanctum
