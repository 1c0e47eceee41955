#pragma once
// CPU kernels of the GatedDeltaNet ops (Highway, dynamic dispatch), parallel over value heads (the
// recurrence), channel blocks (conv) or rows (norm). Arguments are checked by ops/gated_delta.cc.
// Results never depend on the thread count: work is split only where no reduction crosses the split.
#include <span>

#include "ops/gated_delta.h"
#include "tensor/tensor.h"

namespace sanctum::ops::cpu {

void causal_conv1d_silu(const Tensor& x, Tensor& state, const Tensor& weight, Tensor& out);
// taps: (kernel, channels) f32, inner dim contiguous (conv1d_taps).
void causal_conv1d_silu_taps(const Tensor& x, Tensor& state, const Tensor& taps, Tensor& out);
// One row per sequence, each with its own state, parallel over (sequence, channel block).
void causal_conv1d_silu_taps_rows(const Tensor& x, std::span<const int64_t> rows, std::span<Tensor* const> states, const Tensor& taps,
                                  Tensor& out);

// Token by token: one fused sweep over each state row per token (the decode kernel; n tokens of it
// give bit-identical results to n calls of one token).
void gated_delta_sequential(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                            const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out);

// One token of each of several sequences (row rows[i] with states[i]), parallel over (sequence, value
// head): each row runs the token-by-token kernel on its own, so its bits are a one-row call's.
void gated_delta_sequential_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                                 const Tensor& dt_bias, const GatedDeltaShape& shape, std::span<const int64_t> rows,
                                 std::span<Tensor* const> states, Tensor& out);

// Chunks of kGatedDeltaChunk tokens in WY / UT form (the last chunk may be shorter).
constexpr int64_t kGatedDeltaChunk = 64;
void gated_delta_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                         const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out);

void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out);

}  // namespace sanctum::ops::cpu
