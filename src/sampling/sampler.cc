#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

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

int32_t argmax(std::span<const float> values) {
  int32_t best = 0;
  float best_value = -INFINITY;
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] > best_value) {
      best_value = values[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

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
  std::vector<float> p(logits.size(), 0.0f);
  bool any_finite = false;
  for (float& l : logits) {
    if (std::isnan(l)) l = -INFINITY;  // as argmax sees it: never picked
    any_finite = any_finite || l != -INFINITY;
  }
  if (params_.greedy() || !any_finite) {  // nothing to weigh: the argmax (0 when all are -inf)
    p[static_cast<size_t>(argmax(logits))] = 1.0f;
    return p;
  }
  if (params_.top_k == 0 && params_.top_p >= 1.0f && params_.min_p <= 0.0f) {  // plain softmax, no sort
    float max_logit = -INFINITY;
    for (float l : logits) max_logit = std::max(max_logit, l);
    double total = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
      p[i] = std::exp((logits[i] - max_logit) / params_.temperature);
      total += p[i];
    }
    for (float& x : p) x = static_cast<float>(x / total);
    return p;
  }
  // Candidates sorted by logit (descending, then by id), filtered by top-k, then softmax.
  std::vector<std::pair<float, int32_t>> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {logits[i] / params_.temperature, static_cast<int32_t>(i)};
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = c.size();
  if (params_.top_k > 0 && static_cast<size_t>(params_.top_k) < keep) {
    keep = static_cast<size_t>(params_.top_k);
    std::partial_sort(c.begin(), c.begin() + static_cast<std::ptrdiff_t>(keep), c.end(), by_logit);
    c.resize(keep);
  } else {
    std::sort(c.begin(), c.end(), by_logit);
  }
  float max_logit = c.front().first;
  double total = 0.0;
  for (auto& [l, id] : c) {
    l = std::exp(l - max_logit);
    total += l;
  }
  for (auto& [l, id] : c) l = static_cast<float>(l / total);
  // min-p: relative to the most likely token.
  if (params_.min_p > 0.0f) {
    float threshold = params_.min_p * c.front().first;
    while (c.size() > 1 && c.back().first < threshold) c.pop_back();
  }
  // top-p: the smallest prefix whose mass reaches top_p.
  if (params_.top_p < 1.0f) {
    double mass = 0.0;
    size_t n = 0;
    while (n < c.size()) {
      mass += c[n].first;
      ++n;
      if (mass >= params_.top_p) break;
    }
    c.resize(n);
  }
  double kept = 0.0;
  for (const auto& [prob, id] : c) kept += prob;
  for (const auto& [prob, id] : c) p[static_cast<size_t>(id)] = static_cast<float>(prob / kept);
  return p;
}

int32_t Sampler::sample(std::span<float> logits, const RecentTokens& recent) {
  if (params_.greedy()) {
    apply_penalties(logits, recent);
    return argmax(logits);
  }
  return draw(probabilities(logits, recent));
}

double Sampler::uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

int32_t Sampler::draw_at(const std::vector<float>& p, double u01) {
  // Inverse CDF over token ids in ascending order: deterministic for a given seed. The total is
  // summed first so a distribution that is not exactly normalised is still sampled correctly.
  double total = 0.0;
  for (float x : p) total += x;
  const double u = u01 * total;
  double acc = 0.0;
  int32_t last_nonzero = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0.0f) continue;
    acc += p[i];
    last_nonzero = static_cast<int32_t>(i);
    if (u < acc) return static_cast<int32_t>(i);
  }
  return last_nonzero;
}

int32_t Sampler::sample_against_draft(std::span<float> logits, const RecentTokens& recent, int32_t draft, bool& accepted) {
  if (params_.greedy()) {
    int32_t token = sample(logits, recent);
    accepted = token == draft;
    return token;
  }
  std::vector<float> p = probabilities(logits, recent);
  const bool in_vocab = draft >= 0 && static_cast<size_t>(draft) < p.size();
  const double p_draft = in_vocab ? p[static_cast<size_t>(draft)] : 0.0;
  if (uniform() < p_draft) {
    accepted = true;
    return draft;
  }
  accepted = false;
  if (in_vocab) p[static_cast<size_t>(draft)] = 0.0f;  // the residual (p - q)+ for a one-hot draft q
  return draw(p);
}

}  // namespace sanctum
