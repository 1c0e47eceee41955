#pragma once
// Token selection on the device that holds the logits, so that only token ids leave it: greedy
// argmax and temperature / top-k / top-p / min-p sampling per row, optionally under a mask of the
// allowed tokens (a grammar's). The same semantics as the host Sampler (sampling/sampler.h) without
// penalties: ops/ref/sampling.cc is the scalar twin, and the draw's uniform comes from the caller
// (Sampler::uniform()), so a seed fully determines the tokens.
#include <cstdint>
#include <span>

#include "tensor/tensor.h"

namespace sanctum::ops {

struct RowSampling {
  float temperature = 1.0f;  // > 0
  float top_p = 1.0f;        // (0, 1]; 1: off
  int top_k = 0;             // 0: off
  float min_p = 0.0f;        // [0, 1]; 0: off
};

// Rows sample_rows takes in one call (their uniforms travel with the launch).
inline constexpr int64_t kMaxSampleRows = 64;

// `allowed` (both ops; undefined: every token may be picked): (rows, words) u32, contiguous, on the
// logits' device. Token t of row r may be picked only where bit t % 32 of allowed[r, t / 32] is set
// (ids at or past words * 32 never): the row is read as if every other logit were -inf, which is
// what ref::mask_row writes on the host (a grammar-constrained sequence's rows).

// ids (rows) i32 ← per row of logits (rows, vocab) f32 the index of the largest value. The lowest
// index wins ties, NaN never wins, and a row of only -inf / NaN gives 0: sanctum::argmax exactly.
void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed = Tensor{});
// argmax_rows of one host row, vectorised: what the host Sampler picks greedily.
int32_t argmax_row(std::span<const float> logits);

// ids (rows) i32 ← per row a token drawn from the distribution Sampler::probabilities gives for it
// (temperature, then top-k, min-p and top-p over ids sorted by logit, ties by id), by inverse CDF in
// ascending id order at uniforms[row] in [0, 1). NaN counts as -inf; a row without a finite logit
// gives 0. Up to kMaxSampleRows rows.
void sample_rows(const Tensor& logits, const RowSampling& sampling, std::span<const double> uniforms, Tensor& ids,
                 const Tensor& allowed = Tensor{});

// step (2) i32 ← {picked[0], step[1] + 1}: the input of the next decode step (token, position), made
// where the token was picked, so that a GPU can run that step before the host has seen the token.
void feed_pick(const Tensor& picked, Tensor& step);

}  // namespace sanctum::ops
