#include "ops/ref/sampling.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <utility>

#include "ops/op_util.h"

namespace sanctum::ops::ref {

int32_t argmax_row(std::span<const float> logits) {
  int32_t best = 0;
  float best_value = -INFINITY;
  for (size_t i = 0; i < logits.size(); ++i) {
    if (logits[i] > best_value) {  // false for NaN
      best_value = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best;
}

namespace {

float finite_or_neg_inf(float v) { return std::isnan(v) ? -INFINITY : v; }  // NaN is never picked

// A key whose ascending order is the full order (logit descending, then id): the logit's bits made
// order-preserving and inverted above the id. -0 counts as +0, as the comparison below has it.
uint64_t order_key(float logit, size_t id) {
  uint32_t bits = std::bit_cast<uint32_t>(logit == 0.0f ? 0.0f : logit);
  bits = (bits & 0x80000000u) ? ~bits : bits | 0x80000000u;  // ascending as the float
  return (static_cast<uint64_t>(~bits) << 32) | static_cast<uint64_t>(id);
}

// Candidates (scaled logit, id) in the full order: logit descending, then id.
bool by_logit(const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

// The first `keep` candidates of the full order, sorted: softmax over them, then min-p, then top-p,
// every sum in that order.
std::vector<float> filter_top_k(std::span<const float> logits, const RowSampling& s) {
  std::vector<std::pair<float, int32_t>> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {finite_or_neg_inf(logits[i]) / s.temperature, static_cast<int32_t>(i)};
  const auto keep = static_cast<std::ptrdiff_t>(s.top_k);
  std::partial_sort(c.begin(), c.begin() + keep, c.end(), by_logit);  // a total order: exactly a full sort's first k
  c.resize(static_cast<size_t>(keep));
  const float max_logit = c.front().first;
  double total = 0.0;
  for (auto& [l, id] : c) {
    l = std::exp(l - max_logit);
    total += l;
  }
  for (auto& [l, id] : c) l = static_cast<float>(l / total);
  if (s.min_p > 0.0f) {  // relative to the most likely token
    const float threshold = s.min_p * c.front().first;
    while (c.size() > 1 && c.back().first < threshold) c.pop_back();
  }
  if (s.top_p < 1.0f) {  // the smallest prefix whose mass reaches top_p
    double mass = 0.0;
    size_t n = 0;
    while (n < c.size()) {
      mass += c[n].first;
      ++n;
      if (mass >= s.top_p) break;
    }
    c.resize(n);
  }
  std::vector<float> p(logits.size(), 0.0f);
  double kept = 0.0;
  for (const auto& [prob, id] : c) kept += prob;
  for (const auto& [prob, id] : c) p[static_cast<size_t>(id)] = static_cast<float>(prob / kept);
  return p;
}

// Every id a candidate (no top-k): the softmax and min-p's cut run in id order, and only the prefix
// top-p may keep is ever sorted. The ids whose weight reaches a threshold are always a prefix of the
// full order (weights fall along it), so the threshold falls until the sorted prefix holds top_p's
// mass: a peaked distribution sorts a few ids, a flat one what it must (a full sort cost 10-20 ms a
// token at 152k ids).
std::vector<float> filter_all(std::span<const float> logits, const RowSampling& s) {
  const size_t n = logits.size();
  std::vector<float> scaled(n), p(n);
  size_t top = 0;
  for (size_t i = 0; i < n; ++i) {
    scaled[i] = finite_or_neg_inf(logits[i]) / s.temperature;
    if (scaled[i] > scaled[top]) top = i;
  }
  double total = 0.0;
  for (size_t i = 0; i < n; ++i) {
    p[i] = std::exp(scaled[i] - scaled[top]);
    total += p[i];
  }
  for (float& x : p) x = static_cast<float>(x / total);
  // min-p, relative to the most likely token: the ids below it leave (the most likely stays).
  const float floor = s.min_p > 0.0f ? s.min_p * p[top] : 0.0f;
  auto kept_after_min_p = [&](size_t i) { return p[i] >= floor && (p[i] > 0.0f || i == top); };
  std::vector<int32_t> chosen;
  if (s.top_p < 1.0f) {
    size_t eligible = 0;
    for (size_t i = 0; i < n; ++i) eligible += kept_after_min_p(i);
    std::vector<uint64_t> prefix;  // order_key: ascending is the full order
    for (float tau = p[top];; tau /= 16.0f) {
      prefix.clear();
      for (size_t i = 0; i < n; ++i)
        if (kept_after_min_p(i) && p[i] >= tau) prefix.push_back(order_key(scaled[i], i));
      std::sort(prefix.begin(), prefix.end());
      double mass = 0.0;
      size_t m = 0;
      while (m < prefix.size() && mass < s.top_p) mass += p[prefix[m++] & 0xFFFFFFFFu];
      if (mass >= s.top_p || prefix.size() == eligible || tau == 0.0f) {
        for (size_t j = 0; j < m; ++j) chosen.push_back(static_cast<int32_t>(prefix[j] & 0xFFFFFFFFu));  // in the full order
        break;
      }
    }
  } else {
    for (size_t i = 0; i < n; ++i)
      if (kept_after_min_p(i)) chosen.push_back(static_cast<int32_t>(i));
  }
  double kept = 0.0;
  for (int32_t id : chosen) kept += p[static_cast<size_t>(id)];
  std::vector<float> out(n, 0.0f);
  for (int32_t id : chosen) out[static_cast<size_t>(id)] = static_cast<float>(p[static_cast<size_t>(id)] / kept);
  return out;
}

}  // namespace

// The one implementation of the host's filtered distribution: Sampler::probabilities (after its
// penalties) calls it too, so the device sampler's truth and the host sampler cannot drift apart.
std::vector<float> sample_weights(std::span<const float> logits, const RowSampling& s) {
  auto logit = [&](size_t i) { return finite_or_neg_inf(logits[i]); };
  if (logits.empty()) return {};
  bool any_finite = false;
  for (size_t i = 0; i < logits.size() && !any_finite; ++i) any_finite = logit(i) != -INFINITY;
  if (!any_finite) {  // nothing to weigh: token 0, as argmax gives
    std::vector<float> p(logits.size(), 0.0f);
    p[0] = 1.0f;
    return p;
  }
  if (s.top_k == 0 && s.top_p >= 1.0f && s.min_p <= 0.0f) {  // plain softmax, no sort
    std::vector<float> p(logits.size(), 0.0f);
    float max_logit = -INFINITY;
    for (size_t i = 0; i < logits.size(); ++i) max_logit = std::max(max_logit, logit(i));
    double total = 0.0;
    for (size_t i = 0; i < logits.size(); ++i) {
      p[i] = std::exp((logit(i) - max_logit) / s.temperature);
      total += p[i];
    }
    for (float& x : p) x = static_cast<float>(x / total);
    return p;
  }
  if (s.top_k > 0 && static_cast<size_t>(s.top_k) < logits.size()) return filter_top_k(logits, s);
  return filter_all(logits, s);
}

// Inverse CDF over ids in ascending order: deterministic for a given u. The total is summed first
// so a distribution that is not exactly normalised is still sampled correctly.
int32_t draw_row(const std::vector<float>& weights, double u01) {
  double total = 0.0;
  for (float x : weights) total += x;
  const double u = u01 * total;
  double acc = 0.0;
  int32_t last_nonzero = 0;
  for (size_t i = 0; i < weights.size(); ++i) {
    if (weights[i] <= 0.0f) continue;
    acc += weights[i];
    last_nonzero = static_cast<int32_t>(i);
    if (u < acc) return static_cast<int32_t>(i);
  }
  return last_nonzero;
}

int32_t sample_row(std::span<const float> logits, const RowSampling& sampling, double u) {
  return draw_row(sample_weights(logits, sampling), u);
}

// Masks are mostly empty words (a JSON grammar state allows a few hundred of 150k+ tokens), so whole
// words are filled at once.
void mask_row(std::span<float> row, std::span<const uint32_t> allowed) {
  const size_t n = std::min(row.size(), allowed.size() * 32);
  for (size_t w = 0; w * 32 < n; ++w) {
    const uint32_t bits = allowed[w];
    const size_t begin = w * 32, end = std::min(n, begin + 32);
    if (bits == ~0u) continue;
    if (bits == 0) {
      std::fill(row.begin() + static_cast<std::ptrdiff_t>(begin), row.begin() + static_cast<std::ptrdiff_t>(end), -INFINITY);
      continue;
    }
    for (size_t i = begin; i < end; ++i)
      if (!((bits >> (i - begin)) & 1)) row[i] = -INFINITY;
  }
  std::fill(row.begin() + static_cast<std::ptrdiff_t>(n), row.end(), -INFINITY);
}

namespace {
// Row r of logits, through `allowed`'s row r when it is defined (masked in `scratch`).
std::span<const float> row_of(const Tensor& logits, int64_t r, const Tensor& allowed, std::vector<float>& scratch) {
  const std::span<const float> row{detail::row_ptr<float>(logits, r), static_cast<size_t>(logits.dim(1))};
  if (!allowed) return row;
  scratch.assign(row.begin(), row.end());
  mask_row(scratch, {detail::row_ptr<uint32_t>(allowed, r), static_cast<size_t>(allowed.dim(1))});
  return scratch;
}
}  // namespace

void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed) {
  std::vector<float> scratch;
  for (int64_t r = 0; r < logits.dim(0); ++r) ids.data<int32_t>()[r * ids.stride(0)] = argmax_row(row_of(logits, r, allowed, scratch));
}

void sample_rows(const Tensor& logits, const RowSampling& sampling, std::span<const double> uniforms, Tensor& ids, const Tensor& allowed) {
  std::vector<float> scratch;
  for (int64_t r = 0; r < logits.dim(0); ++r)
    ids.data<int32_t>()[r * ids.stride(0)] = sample_row(row_of(logits, r, allowed, scratch), sampling, uniforms[static_cast<size_t>(r)]);
}

}  // namespace sanctum::ops::ref
