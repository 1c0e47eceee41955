#pragma once
// Scalar twins of ops/sampling.h: the truth in the tests, the CPU implementation of the ops, and what
// the host Sampler (sampling/sampler.h) computes with.
#include <cstdint>
#include <span>
#include <vector>

#include "ops/sampling.h"

namespace sanctum::ops::ref {

// Lowest index of the largest value; NaN never wins; 0 when no value is larger than -inf.
int32_t argmax_row(std::span<const float> logits);

// The filtered distribution over ids (zeros outside the kept set): temperature, top-k, softmax,
// min-p, top-p; NaN logits count as -inf, and a row with no finite logit is token 0.
std::vector<float> sample_weights(std::span<const float> logits, const RowSampling& sampling);

// Inverse CDF over `weights` in ascending id order at u in [0, 1).
int32_t draw_row(const std::vector<float>& weights, double u);

// Sets to -inf the logits of the tokens `allowed` leaves out (bit t % 32 of word t / 32 clear, and
// every id at or past allowed.size() * 32): what the ops' `allowed` argument means.
void mask_row(std::span<float> row, std::span<const uint32_t> allowed);

// sample_weights then draw_row; a row without a finite logit gives 0.
int32_t sample_row(std::span<const float> logits, const RowSampling& sampling, double u);

void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed = Tensor{});
void sample_rows(const Tensor& logits, const RowSampling& sampling, std::span<const double> uniforms, Tensor& ids,
                 const Tensor& allowed = Tensor{});

}  // namespace sanctum::ops::ref
