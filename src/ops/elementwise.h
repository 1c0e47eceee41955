#pragma once
#include "ops/positions.h"
#include "tensor/tensor.h"

namespace sanctum::ops {

// out = a + b, elementwise f32 of equal shape; out may alias a or b.
void add(const Tensor& a, const Tensor& b, Tensor& out);
// y[r] += bias for every row r of y (n, m) f32; bias: (m) f32/bf16/f16.
void add_bias(Tensor& y, const Tensor& bias);
// Copies src into dst (same shape, both f32 or same dtype; strided allowed).
void copy(const Tensor& src, Tensor& dst);
// dst rows [p, p + n) = src rows [0, n), p = positions.first() (read on the device when
// positions.device is set): a forward's new K/V rows going into the cache. src (n, cols), dst
// (capacity, cols), both f32 with contiguous rows; on a GPU dst may be bf16 (a bf16 KV cache: rounded
// to nearest even, the bytes the CPU's store_kv_rows writes).
void store_rows(const Tensor& src, Tensor& dst, const Positions& positions);
// store_rows()'s checks of its arguments (ops that do its work check with them); returns the device.
Device check_store_rows(const Tensor& src, const Tensor& dst, const Positions& positions);

}  // namespace sanctum::ops
