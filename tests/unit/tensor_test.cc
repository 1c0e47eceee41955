#include "tensor/tensor.h"

#include <gtest/gtest.h>

#include <cmath>

#include "base/error.h"
#include "tensor/dtype.h"

namespace sanctum {

TEST(Tensor, slice_and_row_are_views_with_strides) {
  Tensor t = Tensor::zeros({3, 4}, DType::f32);
  for (int i = 0; i < 12; ++i) t.data<float>()[i] = static_cast<float>(i);
  Tensor col = t.slice(1, 1, 3);
  EXPECT_EQ(col.dim(0), 3);
  EXPECT_EQ(col.dim(1), 2);
  EXPECT_FALSE(col.is_contiguous());
  EXPECT_EQ(col.data<float>()[col.stride(0) * 2 + 1], 10.0f);
  Tensor c = col.clone();
  EXPECT_TRUE(c.is_contiguous());
  EXPECT_EQ(c.data<float>()[5], 10.0f);
  EXPECT_EQ(t.row(2).data<float>()[0], 8.0f);
}

TEST(Tensor, reshape_infers_and_rejects_bad_counts) {
  Tensor t = Tensor::zeros({2, 6}, DType::bf16);
  EXPECT_EQ(t.reshape({3, -1}).dim(1), 4);
  EXPECT_THROW(t.reshape({5, -1}), Error);
  EXPECT_THROW(t.slice(0, 1, 3), Error);
}

// A column slice of a stacked projection's output reshapes into heads as a view; a reshape that
// would need the sliced-off columns, or to merge a strided dim, is refused.
TEST(Tensor, strided_reshape_splits_and_merges_runs_of_contiguous_dims) {
  Tensor t = Tensor::zeros({4, 16}, DType::f32);
  for (int i = 0; i < 64; ++i) t.data<float>()[i] = static_cast<float>(i);
  const Tensor cols = t.slice(1, 8, 16);  // (4, 8), strides (16, 1)
  const Tensor heads = cols.reshape({4, 2, 4});
  EXPECT_EQ(heads.stride(0), 16);
  EXPECT_EQ(heads.stride(1), 4);
  EXPECT_EQ(heads.stride(2), 1);
  for (int r = 0; r < 4; ++r)
    for (int h = 0; h < 2; ++h)
      for (int d = 0; d < 4; ++d)
        EXPECT_EQ(heads.data<float>()[r * heads.stride(0) + h * heads.stride(1) + d], static_cast<float>(16 * r + 8 + 4 * h + d));
  const Tensor back = heads.reshape({4, 8});  // merges the run (2, 4) again
  EXPECT_EQ(back.stride(0), 16);
  EXPECT_EQ(back.stride(1), 1);
  const Tensor unit = cols.reshape({4, 1, 8, 1});
  EXPECT_EQ(unit.stride(2), 1);
  EXPECT_EQ(unit.data<float>()[3 * unit.stride(0) + 7], 63.0f);
  EXPECT_THROW(cols.reshape({32}), Error);                 // rows 16 apart cannot merge into one dim
  EXPECT_THROW(cols.reshape({2, 16}), Error);              // nor into rows of 16
  EXPECT_EQ(t.slice(0, 1, 3).reshape({32}).stride(0), 1);  // a row slice stays contiguous
}

TEST(DType, bf16_round_trip_rounds_to_nearest_even) {
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.0f)), 1.0f);
  // 1 + 2^-8 is exactly halfway between two bf16 values: ties to even (1.0).
  EXPECT_EQ(bf16_to_f32(f32_to_bf16(1.00390625f)), 1.0f);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(NAN))));
}

TEST(DType, f16_round_trip_covers_normals_subnormals_and_inf) {
  for (float v : {0.0f, -0.0f, 1.0f, -2.5f, 65504.0f, 6.1035156e-05f, 5.9604645e-08f}) {
    EXPECT_EQ(f16_to_f32(f32_to_f16(v)), v) << v;
  }
  EXPECT_TRUE(std::isinf(f16_to_f32(f32_to_f16(1e6f))));
  // Every f16 bit pattern survives f16 -> f32 -> f16.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t bits = static_cast<uint16_t>(h);
    float f = f16_to_f32(bits);
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), bits) << h;
  }
}

}  // namespace sanctum
