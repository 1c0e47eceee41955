#pragma once
// The part of gated attention that every cache form shares (ops/attention.h over f32 rows,
// ops/kv_cache_ops.h over a stored format).
#include <functional>

#include "tensor/tensor.h"

namespace sanctum::ops::detail {

// Checks q, gate and out of a gated attention, then runs `attend` (the attention into out): with the
// gate where a GPU applies it on the way out (decode), else with none and then out = out *
// sigmoid(gate) as sigmoid_mul computes it.
void gate_attention_output(const Tensor& q, const Tensor& gate, Tensor& out, const std::function<void(const Tensor* gate)>& attend);

}  // namespace sanctum::ops::detail
