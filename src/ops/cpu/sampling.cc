// Greedy pick over a row of logits (151,936 of them for Qwen), vectorised: one pass for the largest
// value among the allowed ones, a second for the first index holding it. That is ref::argmax_row's
// answer exactly: the lowest index wins ties (-0 and +0 are one value), NaN never wins, and a row
// with nothing above -inf gives 0.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/sampling.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// The lanes [base, base + N) of allowed's bits (N <= 32 and dividing 32, base a multiple of N).
HWY_INLINE hn::Mask<DF> AllowedLanes(DF df, const uint32_t* allowed, int64_t base) {
  const size_t n = hn::Lanes(df);
  const uint64_t bits = (allowed[base / 32] >> (base % 32)) & (n >= 32 ? ~0ull : (1ull << n) - 1);
  uint8_t bytes[8] = {};
  for (size_t i = 0; i < 8; ++i) bytes[i] = static_cast<uint8_t>(bits >> (8 * i));
  return hn::LoadMaskBits(df, bytes);
}

// The largest allowed non-NaN value, -inf if none; allowed null: every index of [0, n).
float LargestOf(const float* HWY_RESTRICT x, int64_t n, const uint32_t* HWY_RESTRICT allowed) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto lt_take = [](hn::Vec<DF> m, hn::Vec<DF> v) { return hn::IfThenElse(hn::Lt(m, v), v, m); };  // NaN never taken
  auto m0 = hn::Set(df, -INFINITY), m1 = m0, m2 = m0, m3 = m0;
  int64_t i = 0;
  if (allowed == nullptr) {
    for (; i + 4 * N <= n; i += 4 * N) {
      m0 = lt_take(m0, hn::LoadU(df, x + i));
      m1 = lt_take(m1, hn::LoadU(df, x + i + N));
      m2 = lt_take(m2, hn::LoadU(df, x + i + 2 * N));
      m3 = lt_take(m3, hn::LoadU(df, x + i + 3 * N));
    }
    for (; i + N <= n; i += N) m0 = lt_take(m0, hn::LoadU(df, x + i));
  } else {
    for (; i + N <= n; i += N) {
      if (allowed[i / 32] == 0) {  // a grammar allows few tokens: skip the rest of an empty word
        i = (i / 32 + 1) * 32 - N;
        continue;
      }
      const auto v = hn::LoadU(df, x + i);
      m0 = hn::IfThenElse(hn::And(AllowedLanes(df, allowed, i), hn::Lt(m0, v)), v, m0);
    }
  }
  HWY_ALIGN float lanes[4 * hn::MaxLanes(DF())];
  hn::Store(m0, df, lanes);
  hn::Store(m1, df, lanes + N);
  hn::Store(m2, df, lanes + 2 * N);
  hn::Store(m3, df, lanes + 3 * N);
  float best = -INFINITY;
  for (int64_t l = 0; l < 4 * N; ++l) best = std::max(best, lanes[l]);
  for (; i < n; ++i)
    if ((allowed == nullptr || (allowed[i / 32] >> (i % 32) & 1)) && best < x[i]) best = x[i];
  return best;
}

// The first allowed index holding `value` (not NaN, found by LargestOf).
int64_t FirstAt(const float* HWY_RESTRICT x, int64_t n, const uint32_t* HWY_RESTRICT allowed, float value) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto v = hn::Set(df, value);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    auto hit = hn::Eq(hn::LoadU(df, x + i), v);
    if (allowed != nullptr) hit = hn::And(hit, AllowedLanes(df, allowed, i));
    const intptr_t at = hn::FindFirstTrue(df, hit);
    if (at >= 0) return i + at;
  }
  for (; i < n; ++i)
    if ((allowed == nullptr || (allowed[i / 32] >> (i % 32) & 1)) && x[i] == value) return i;
  return 0;
}

int32_t ArgmaxRow(const float* x, int64_t n, const uint32_t* allowed, int64_t words) {
  if (allowed != nullptr) n = std::min(n, words * 32);  // ids past the mask are never picked
  const float best = LargestOf(x, n, allowed);
  if (!(best > -INFINITY)) return 0;
  return static_cast<int32_t>(FirstAt(x, n, allowed, best));
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(ArgmaxRow);

int32_t argmax_row(std::span<const float> logits, const uint32_t* allowed, int64_t words) {
  return HWY_DYNAMIC_DISPATCH(ArgmaxRow)(logits.data(), static_cast<int64_t>(logits.size()), allowed, words);
}

void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), words = allowed ? allowed.dim(1) : 0;
  int32_t* out = ids.data<int32_t>();
  // rows are independent; a pool dispatch pays from two rows on
  compute_pool().parallel_for(rows, 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const std::span<const float> row{logits.data<const float>() + r * logits.stride(0), static_cast<size_t>(vocab)};
      out[r * ids.stride(0)] = argmax_row(row, allowed ? allowed.data<const uint32_t>() + r * allowed.stride(0) : nullptr, words);
    }
  });
}

}  // namespace sanctum::ops::cpu
#endif
