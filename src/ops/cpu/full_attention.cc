// Bidirectional attention. Long sequences (an image's thousands of patches) go head by head through
// the packed GEMM (gemm_f32.h): k_hᵀ and v_h packed once per kv head, then each block of queries on
// one thread: scores = q_h · k_hᵀ, a softmax per row, out_h = p · v_h, its scores kept in cache.
// Short ones run one (query, head) pair per work item. Either way softmax is in f32 with max
// subtraction, and a row's result does not depend on the thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/full_attention.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/cpu/attention_common-inl.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/encoder_kernels.h"
#include "ops/cpu/gemm_f32.h"
#include "ops/cpu/kernels.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Work items [i0, i1) of (query, head) pairs, head fastest.
void FullAttentionItems(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out, int64_t i0, int64_t i1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t heads = q.dim(1), d = q.dim(2), m = k.dim(0), group = heads / k.dim(1);
  std::vector<float> p(static_cast<size_t>(m + N)), acc(static_cast<size_t>(d));
  for (int64_t item = i0; item < i1; ++item) {
    const int64_t i = item / heads, h = item % heads, kvh = h / group;
    const float* qi = q.data<const float>() + i * q.stride(0) + h * q.stride(1);
    const float* kb = k.data<const float>() + kvh * k.stride(1);
    const float* vb = v.data<const float>() + kvh * v.stride(1);
    float mx = -INFINITY;
    for (int64_t j = 0; j < m; ++j) {
      const float s = AttentionDot(qi, kb + j * k.stride(0), d) * scale;
      p[static_cast<size_t>(j)] = s;
      mx = std::max(mx, s);
    }
    const float inv_sum = ExpScoresInPlace(p.data(), m, mx);
    std::fill(acc.begin(), acc.end(), 0.0f);
    AddWeightedRows(p.data(), m, vb, v.stride(0), d, acc.data());
    float* o = out.data<float>() + i * out.stride(0) + h * out.stride(1);
    for (int64_t c = 0; c < d; ++c) o[c] = acc[static_cast<size_t>(c)] * inv_sum;
  }
}

// Rows [r0, r1) of scores (n, m) contiguous: p = softmax(scale * s), in place.
void SoftmaxScaledRows(Tensor& scores, float scale, int64_t r0, int64_t r1) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), m = scores.dim(1);
  const auto vscale = hn::Set(df, scale);
  HWY_ALIGN float tail[hn::MaxLanes(df)];
  for (int64_t r = r0; r < r1; ++r) {
    float* row = scores.data<float>() + r * m;
    auto vmax = hn::Set(df, -INFINITY);
    int64_t j = 0;
    for (; j + N <= m; j += N) {
      const auto x = hn::Mul(hn::LoadU(df, row + j), vscale);
      hn::StoreU(x, df, row + j);
      vmax = hn::Max(vmax, x);
    }
    float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
    for (int64_t t = j; t < m; ++t) mx = std::max(mx, row[t] *= scale);
    const auto vm = hn::Set(df, mx);
    auto vsum = hn::Zero(df);
    for (j = 0; j + N <= m; j += N) {
      const auto e = hn::Exp(df, hn::Sub(hn::LoadU(df, row + j), vm));
      vsum = hn::Add(vsum, e);
      hn::StoreU(e, df, row + j);
    }
    if (j < m) {  // the tail through one padded vector: -inf lanes give 0
      for (int64_t t = 0; t < N; ++t) tail[t] = j + t < m ? row[j + t] : -INFINITY;
      const auto e = hn::Exp(df, hn::Sub(hn::Load(df, tail), vm));
      vsum = hn::Add(vsum, e);
      hn::Store(e, df, tail);
      for (int64_t t = 0; j + t < m; ++t) row[j + t] = tail[t];
    }
    const auto vinv = hn::Set(df, 1.0f / hn::GetLane(hn::SumOfLanes(df, vsum)));
    for (j = 0; j + N <= m; j += N) hn::StoreU(hn::Mul(hn::LoadU(df, row + j), vinv), df, row + j);
    for (; j < m; ++j) row[j] *= hn::GetLane(vinv);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(FullAttentionItems);
HWY_EXPORT(SoftmaxScaledRows);

namespace {
// Below this many keys the pairs run directly: the packing and the (n, m) scores would cost more than
// the strided reads they save.
constexpr int64_t kGemmKeys = 256;

// Queries per work item: the item's (rows, keys) scores (1 MiB at 4,096 keys) stay in L2 from
// q·kᵀ through the softmax to p·v.
constexpr int64_t kQueryBlock = 64;

void full_attention_by_gemm(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out) {
  const int64_t n = q.dim(0), heads = q.dim(1), d = q.dim(2), m = k.dim(0), group = heads / k.dim(1);
  ThreadPool& pool = compute_pool();
  std::vector<Tensor> scores;  // per thread: (kQueryBlock, m)
  for (int t = 0; t < pool.size(); ++t) scores.push_back(Tensor::zeros({kQueryBlock, m}, DType::f32));
  const int64_t blocks = (n + kQueryBlock - 1) / kQueryBlock;
  PackedGemmB kt, vh;
  for (int64_t h = 0; h < heads; ++h) {
    if (h % group == 0) {
      // k_h's rows are the columns of k_hᵀ; v_h is B as it stands. Both read in place, strided by token,
      // and packed once for all of the group's query blocks.
      const int64_t kvh = h / group;
      kt = pack_gemm_b(d, m, GemmB{k.data<const float>() + kvh * k.stride(1), DType::f32, k.stride(0), true});
      vh = pack_gemm_b(m, d, GemmB{v.data<const float>() + kvh * v.stride(1), DType::f32, v.stride(0), false});
    }
    std::atomic<int64_t> next{0};
    pool.run_on_all([&](int t) {
      Tensor& st = scores[static_cast<size_t>(t)];
      for (int64_t blk; (blk = next.fetch_add(1, std::memory_order_relaxed)) < blocks;) {
        const int64_t i0 = blk * kQueryBlock, rows = std::min(kQueryBlock, n - i0);
        gemm_f32_packed(rows, q.data<const float>() + i0 * q.stride(0) + h * q.stride(1), q.stride(0), kt, st.data<float>(), m);
        HWY_DYNAMIC_DISPATCH(SoftmaxScaledRows)(st, scale, 0, rows);
        gemm_f32_packed(rows, st.data<const float>(), m, vh, out.data<float>() + i0 * out.stride(0) + h * out.stride(1), out.stride(0));
      }
    });
  }
}
}  // namespace

void full_attention(const Tensor& q, const Tensor& k, const Tensor& v, float scale, Tensor& out) {
  if (k.dim(0) >= kGemmKeys) return full_attention_by_gemm(q, k, v, scale, out);
  compute_pool().parallel_for(q.dim(0) * q.dim(1), 4,
                              [&](int64_t i0, int64_t i1) { HWY_DYNAMIC_DISPATCH(FullAttentionItems)(q, k, v, scale, out, i0, i1); });
}

}  // namespace sanctum::ops::cpu
#endif
