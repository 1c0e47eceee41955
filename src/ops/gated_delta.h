#pragma once
// Ops of the GatedDeltaNet (linear attention) mixer of Qwen3.5 / Qwen3-Next.
#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace sanctum::ops {

// Causal depthwise conv1d over time with a rolling state, then SiLU.
//   x:      (n, channels) f32, rows may be strided — the new inputs
//   state:  (kernel - 1, channels) f32 — the previous kernel-1 inputs (zeros at sequence start);
//           updated in place to the last kernel-1 rows of [state; x]
//   weight: (channels, kernel) f32/bf16/f16 — tap j of channel c multiplies input t - (kernel-1) + j
//   out:    (n, channels) f32, must not alias x
void causal_conv1d_silu(const Tensor& x, Tensor& state, const Tensor& weight, Tensor& out);

// The same conv with the weight rearranged once at load time: taps = conv1d_taps(weight) is
// (kernel, channels) f32, tap-major, so decode does not convert and transpose the weight per call.
Tensor conv1d_taps(const Tensor& weight);
void causal_conv1d_silu_taps(const Tensor& x, Tensor& state, const Tensor& taps, Tensor& out);

// One token for each of several sequences in one call (a decode step of a batch): row rows[i] of x
// and of out belongs to the sequence whose conv state is states[i]. Each row's output and new state
// are bit for bit those of causal_conv1d_silu_taps on that row alone. Rows and states distinct.
void causal_conv1d_silu_taps_rows(const Tensor& x, std::span<const int64_t> rows, std::span<Tensor* const> states, const Tensor& taps,
                                  Tensor& out);

struct GatedDeltaShape {
  int64_t n_key_heads = 0, key_dim = 0;      // Hk, Dk
  int64_t n_value_heads = 0, value_dim = 0;  // Hv, Dv (Hv a multiple of Hk)
};

enum class GatedDeltaAlgorithm { automatic, sequential, chunked };

// The gated delta rule over n tokens, all value heads, state in f32.
//   q, k:   (n, Hk*Dk) f32, rows may be strided — raw (post-conv) values; L2-normalised here
//           (x / sqrt(sum x^2 + 1e-6)), and q is also scaled by 1/sqrt(Dk)
//   v:      (n, Hv*Dv) f32, rows may be strided
//   a, b:   (n, Hv) f32 — raw projections; beta = sigmoid(b), decay g = exp(-exp(A_log) * softplus(a + dt_bias))
//   a_log, dt_bias: (Hv) f32/bf16/f16
//   state:  (Hv, Dv, Dk) f32, updated in place
//   out:    (n, Hv*Dv) f32
// Per token and value head h (key head h / (Hv/Hk), never copied):
//   S = g*S;  delta = beta*(v - S k);  S = S + delta ⊗ k;  y = S q
// `chunked` evaluates the same recurrence in chunks of 64 tokens (WY / UT form); `automatic` picks.
// On the CPU with ops::matmul_precision() other than f32 (and AVX512_BF16), `chunked` multiplies
// bf16-rounded operands with f32 accumulation, state in f32: about 2^-9 relative error per product.
void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out,
                      GatedDeltaAlgorithm algorithm = GatedDeltaAlgorithm::automatic);

// The rule for one token of each of several sequences (a decode step of a batch): row rows[i] of
// q, k, v, a, b and out belongs to the sequence whose recurrent state is states[i]. Each row's output
// and new state are bit for bit those of gated_delta_rule (sequential) on that row alone.
void gated_delta_rule_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                           const Tensor& dt_bias, const GatedDeltaShape& shape, std::span<const int64_t> rows,
                           std::span<Tensor* const> states, Tensor& out);

// out = rms_norm(x over each head's d values, weight, eps) * silu(z), elementwise.
//   x, z, out: (n, H*d) f32 (rows may be strided); weight: (d) f32/bf16/f16. out may alias x.
void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out);

}  // namespace sanctum::ops
