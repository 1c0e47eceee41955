#pragma once
// What both gated-delta-rule kernels read (the sequential walk in gated_delta.cu, the chunked form in
// gated_delta_chunked.cu), filled once from the op's tensors; each kernel adds its own dims and flags.
#include <cmath>

#include "ops/cuda/common.cuh"
#include "ops/gated_delta.h"

namespace sanctum::ops::cuda {

struct RuleInputs {
  Rows<const float> q, k, v, a, b;
  const void* a_log;
  const void* dt_bias;
  FloatKind a_log_kind, dt_bias_kind;
  float* state;
  Rows<float> out;
  float q_scale;  // 1 / sqrt(Dk)
};

inline RuleInputs rule_inputs(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                              const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out) {
  RuleInputs r;
  r.q = rows_of<const float>(q, "gated_delta_rule");
  r.k = rows_of<const float>(k, "gated_delta_rule");
  r.v = rows_of<const float>(v, "gated_delta_rule");
  r.a = rows_of<const float>(a, "gated_delta_rule");
  r.b = rows_of<const float>(b, "gated_delta_rule");
  r.a_log = a_log.raw();
  r.dt_bias = dt_bias.raw();
  r.a_log_kind = float_kind(a_log);
  r.dt_bias_kind = float_kind(dt_bias);
  r.state = state.data<float>();
  r.out = rows_of<float>(out, "gated_delta_rule");
  r.q_scale = 1.0f / std::sqrt(static_cast<float>(shape.key_dim));
  return r;
}

}  // namespace sanctum::ops::cuda
