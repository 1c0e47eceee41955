#pragma once
// Scalar references for the GatedDeltaNet ops (the truth in tests): plain loops in the order the
// maths is written, f32 throughout. Same contracts as ops/gated_delta.h; no argument checks.
#include "ops/gated_delta.h"
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void causal_conv1d_silu(const Tensor& x, Tensor& state, const Tensor& weight, Tensor& out);

// The token-by-token recurrence (whatever `shape` says; the algorithm choice does not apply).
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out);

void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out);

}  // namespace sanctum::ops::ref
