// Causal GQA attention, two-pass softmax in f32, one (query, head) pair per work item. A pair's
// result depends only on its own inputs, so it is the same for any n, chunking or thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/cpu/attention_common-inl.h"

#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"

#ifndef SANCTUM_OPS_CPU_ATTENTION_ARGS_
#define SANCTUM_OPS_CPU_ATTENTION_ARGS_
namespace sanctum::ops::cpu {
struct AttentionArgs {
  const float* q;
  const float* k;
  const float* v;
  float* out;
  int64_t q_stride0, q_stride1, k_stride0, k_stride1, v_stride0, v_stride1, o_stride0, o_stride1;
  int64_t n_heads, group, head_dim, q_pos0;
  float scale;
};

}  // namespace sanctum::ops::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Queries i0, i0 + step, ... < i1, heads [h0, h1) of each; head fastest so neighbours share a kv head.
void AttentionItems(const AttentionArgs& a, int64_t i0, int64_t i1, int64_t step, int64_t h0, int64_t h1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), d = a.head_dim;
  const int64_t max_keys = a.q_pos0 + i1;
  std::vector<float> p(static_cast<size_t>(max_keys + N));  // scores, then probabilities
  std::vector<float> acc(static_cast<size_t>(d));           // (head_dim) running p·V
  for (int64_t i = i0; i < i1; i += step)
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t kvh = h / a.group;
      const int64_t n_keys = a.q_pos0 + i + 1;
      const float* qi = a.q + i * a.q_stride0 + h * a.q_stride1;
      const float* kb = a.k + kvh * a.k_stride1;
      const float* vb = a.v + kvh * a.v_stride1;
      float mx = -INFINITY;
      int64_t j = 0;
      for (; j + 4 <= n_keys; j += 4) {
        const float* rows[4] = {kb + j * a.k_stride0, kb + (j + 1) * a.k_stride0, kb + (j + 2) * a.k_stride0, kb + (j + 3) * a.k_stride0};
        float dots[4];
        AttentionDot4(qi, rows, d, dots);
        for (int r = 0; r < 4; ++r) {
          const float s = dots[r] * a.scale;
          p[static_cast<size_t>(j + r)] = s;
          mx = std::max(mx, s);
        }
      }
      for (; j < n_keys; ++j) {
        const float s = AttentionDot(qi, kb + j * a.k_stride0, d) * a.scale;
        p[static_cast<size_t>(j)] = s;
        mx = std::max(mx, s);
      }
      const float inv_sum = ExpScoresInPlace(p.data(), n_keys, mx);
      std::fill(acc.begin(), acc.end(), 0.0f);
      AddWeightedRows(p.data(), n_keys, vb, a.v_stride0, d, acc.data());
      float* o = a.out + i * a.o_stride0 + h * a.o_stride1;
      const auto vinv = hn::Set(df, inv_sum);
      int64_t c = 0;
      for (; c + N <= d; c += N) hn::StoreU(hn::Mul(hn::LoadU(df, acc.data() + c), vinv), df, o + c);
      for (; c < d; ++c) o[c] = acc[static_cast<size_t>(c)] * inv_sum;
    }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(AttentionItems);

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, float scale, Tensor& out) {
  const int64_t n = q.dim(0), n_heads = q.dim(1);
  const AttentionArgs args{q.data<const float>(),
                           k.data<const float>(),
                           v.data<const float>(),
                           out.data<float>(),
                           q.stride(0),
                           q.stride(1),
                           k.stride(0),
                           k.stride(1),
                           v.stride(0),
                           v.stride(1),
                           out.stride(0),
                           out.stride(1),
                           n_heads,
                           n_heads / k.dim(1),
                           q.dim(2),
                           q_pos0,
                           scale};
  ThreadPool& pool = compute_pool();
  if (n < pool.size()) {  // decode: split the heads
    compute_pool().parallel_for(n_heads, 1, [&](int64_t h0, int64_t h1) { HWY_DYNAMIC_DISPATCH(AttentionItems)(args, 0, n, 1, h0, h1); });
    return;
  }
  // prefill: queries dealt round-robin, since causal rows grow in cost with i
  const int64_t threads = pool.size();
  pool.run_on_all([&](int t) { HWY_DYNAMIC_DISPATCH(AttentionItems)(args, t, n, threads, 0, n_heads); });
}

}  // namespace sanctum::ops::cpu
#endif
