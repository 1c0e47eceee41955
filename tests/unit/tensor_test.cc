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
