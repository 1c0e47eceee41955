// A sub-block's input and output forms (model/blocks/block_input.h, block_output.h) where no kernel
// takes the norm apart (here, the CPU): a pending input computes add_rms_norm into x at its first use
// and adds delta to h exactly once, however many projections read it, or at finish() if none did; an
// output offered the residual form writes plain delta. (The GPU's split norm: cuda_ops_test.)
#include <gtest/gtest.h>

#include <cstring>

#include "../ops/op_test_util.h"
#include "model/blocks/block_input.h"
#include "model/blocks/block_output.h"
#include "ops/ops.h"

namespace sanctum {
namespace {

bool same_bits(const Tensor& a, const Tensor& b) { return a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0; }

struct Case {
  test::Rng rng{71};
  Tensor h0 = test::random_tensor({1, 128}, DType::f32, rng), delta = test::random_tensor({1, 128}, DType::f32, rng);
  Tensor norm_w = test::random_tensor({128}, DType::f32, rng);
  Weight w = test::random_quantized(48, 128, 4, 64, DType::bf16, rng);
  // add_rms_norm then matmul, as the decoder ran them before inputs could be pending.
  Tensor want_h = h0.clone(), want_x = Tensor::zeros({1, 128}, DType::f32), want_y = Tensor::zeros({1, 48}, DType::f32);
  Case() {
    ops::add_rms_norm(want_h, delta, norm_w, 1e-6f, want_x, 1.0f);
    ops::matmul(want_x, w, want_y);
  }
};

TEST(BlockInput, pending_input_adds_delta_once_across_projections) {
  Case c;
  Tensor h = c.h0.clone(), x = Tensor::zeros({1, 128}, DType::f32);
  const BlockInput in(h, &c.delta, c.norm_w, 1e-6f, 1.0f, x);
  EXPECT_EQ(in.rows(), 1);
  Tensor y1 = Tensor::zeros({1, 48}, DType::f32), y2 = Tensor::zeros({1, 48}, DType::f32);
  in.matmul(c.w, y1);
  in.matmul(c.w, y2);
  in.finish();
  EXPECT_TRUE(same_bits(h, c.want_h)) << "h + delta, once";
  EXPECT_TRUE(same_bits(x, c.want_x));
  EXPECT_TRUE(same_bits(y1, c.want_y));
  EXPECT_TRUE(same_bits(y2, c.want_y));
  EXPECT_FALSE(in.silu_mul_ok(c.w)) << "no fused SwiGLU on the CPU";
}

TEST(BlockInput, finish_applies_a_delta_no_projection_read) {
  Case c;
  Tensor h = c.h0.clone(), x = Tensor::zeros({1, 128}, DType::f32);
  {
    const BlockInput in(h, &c.delta, c.norm_w, 1e-6f, 1.0f, x);
    in.finish();
    in.finish();
  }
  EXPECT_TRUE(same_bits(h, c.want_h));
  // Without delta: the norm of h alone, h untouched.
  Tensor x2 = Tensor::zeros({1, 128}, DType::f32);
  const BlockInput alone(h, nullptr, c.norm_w, 1e-6f, 1.0f, x2);
  EXPECT_TRUE(same_bits(alone.tensor(), c.want_x));
  EXPECT_TRUE(same_bits(h, c.want_h));
}

TEST(BlockInput, ready_input_is_used_as_it_stands) {
  Case c;
  const BlockInput in(c.want_x);
  Tensor y = Tensor::zeros({1, 48}, DType::f32);
  in.matmul(c.w, y);
  in.finish();
  EXPECT_TRUE(same_bits(y, c.want_y));
  EXPECT_EQ(&in.tensor(), &c.want_x);
}

TEST(BlockOutput, residual_form_offered_on_the_cpu_writes_delta) {
  Case c;
  Tensor u = Tensor::zeros({1, 48}, DType::f32), squares = Tensor::zeros({1, 8}, DType::f32);
  Tensor delta = Tensor::zeros({1, 48}, DType::f32), norm_w = test::random_tensor({48}, DType::f32, c.rng);
  Tensor h48 = Tensor::zeros({1, 48}, DType::f32);
  const BlockOutput out(delta, ops::ResidualNorm{&h48, &norm_w, 0.0f, &u, &squares});
  out.matmul(c.want_x, c.w);
  EXPECT_FALSE(out.into_residual());
  EXPECT_EQ(&out.delta(), &delta);
  EXPECT_TRUE(same_bits(delta, c.want_y));
}

}  // namespace
}  // namespace sanctum
