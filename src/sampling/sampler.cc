#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "ops/ref/sampling.h"
#include "ops/sampling.h"

namespace sanctum {

void RecentTokens::push(int32_t token) {
  tokens_.push_back(token);
  counts_[token]++;
  while (static_cast<int>(tokens_.size()) > window_) {
    int32_t old = tokens_.front();
    tokens_.pop_front();
    if (--counts_[old] == 0) counts_.erase(old);
  }
}

int32_t argmax(std::span<const float> values) { return ops::argmax_row(values); }

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {
  check(params.temperature >= 0.0f, ErrorKind::invalid_argument, "temperature must be >= 0");
  check(params.top_p > 0.0f && params.top_p <= 1.0f, ErrorKind::invalid_argument, "top_p must be in (0, 1]");
  check(params.top_k >= 0, ErrorKind::invalid_argument, "top_k must be >= 0");
  check(params.min_p >= 0.0f && params.min_p <= 1.0f, ErrorKind::invalid_argument, "min_p must be in [0, 1]");
  check(params.repetition_penalty > 0.0f, ErrorKind::invalid_argument, "repetition_penalty must be > 0");
}

void Sampler::apply_penalties(std::span<float> logits, const RecentTokens& recent) const {
  if (!params_.has_penalties()) return;
  for (const auto& [token, count] : recent.counts()) {
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) continue;
    float& l = logits[static_cast<size_t>(token)];
    if (params_.repetition_penalty != 1.0f) l = l > 0 ? l / params_.repetition_penalty : l * params_.repetition_penalty;
    l -= params_.presence_penalty + params_.frequency_penalty * static_cast<float>(count);
  }
}

std::vector<float> Sampler::probabilities(std::span<float> logits, const RecentTokens& recent) const {
  apply_penalties(logits, recent);
  if (params_.greedy()) {  // nothing to weigh: the argmax
    std::vector<float> p(logits.size(), 0.0f);
    if (!p.empty()) p[static_cast<size_t>(argmax(logits))] = 1.0f;
    return p;
  }
  return ops::ref::sample_weights(logits, {params_.temperature, params_.top_p, params_.top_k, params_.min_p});
}

int32_t Sampler::sample(std::span<float> logits, const RecentTokens& recent) {
  if (params_.greedy()) {
    apply_penalties(logits, recent);
    return argmax(logits);
  }
  return draw(probabilities(logits, recent));
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

std::vector<double> Sampler::uniforms_ahead(size_t n) const {
  Sampler ahead = *this;
  std::vector<double> u(n);
  for (double& x : u) x = ahead.uniform();
  return u;
}

void Sampler::skip_uniforms(size_t n) {
  for (size_t i = 0; i < n; ++i) uniform();
}

int32_t Sampler::draw_at(const std::vector<float>& p, double u01) { return ops::ref::draw_row(p, u01); }

}  // namespace sanctum
