// A prefill's causal GQA attention over a bf16 KV cache: the keys widened and transposed once into
// blocks of the vector width (as many as fit a scratch bound), so that every query's scores against
// a block are accumulators with no horizontal sum per score, and the heads of a kv group share each
// block and each run of value rows. Every score, probability and output element has the bits of the
// decode tasks (attention_decode.cc), which read the cache in rows: a query gets the same result in
// a prefill and in decode, whatever the chunking or thread count.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/attention_kv.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/cpu/attention_common-inl.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"

#ifndef SANCTUM_OPS_CPU_ATTENTION_KV_ARGS_
#define SANCTUM_OPS_CPU_ATTENTION_KV_ARGS_
namespace sanctum::ops::cpu {
// One side of a bf16 cache; strides in bf16s.
struct KvSide {
  const void* data;
  int64_t stride0, stride1;
};
struct AttentionKvArgs {
  const float* q;
  float* out;
  int64_t q_stride0, q_stride1, o_stride0, o_stride1;
  KvSide k, v;
  int64_t n_heads, group, head_dim, q_pos0;
  float scale;
  // bf16 keys [0, kt_blocks * block) of every kv head, widened and transposed (TransposeKeysBf16);
  // the keys past them are read in rows.
  const float* kt;
  int64_t kt_blocks;
};
}  // namespace sanctum::ops::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// q · k_j, head kvh, of bf16 keys: one accumulator, its lanes summed as LaneTreeSum pairs them,
// then the tail's own chain (the decode tasks' order).
HWY_INLINE float KeyDot(const float* HWY_RESTRICT q, const KvSide& k, int64_t j, int64_t kvh, int64_t d) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const hn::Rebind<hwy::bfloat16_t, DF> dbf;
  const auto* kj = static_cast<const hwy::bfloat16_t*>(k.data) + j * k.stride0 + kvh * k.stride1;
  auto acc = hn::Zero(df);
  int64_t c = 0;
  for (; c + N <= d; c += N) acc = hn::MulAdd(hn::LoadU(df, q + c), hn::PromoteTo(df, hn::LoadU(dbf, kj + c)), acc);
  const auto* bits = reinterpret_cast<const uint16_t*>(kj);
  float tail = 0.0f;
  for (; c < d; ++c) tail += q[c] * bf16_to_f32(bits[c]);
  return LaneTreeSum(df, acc) + tail;
}

// KeyDot of q with keys j .. j + 3, each with exactly its own sums (four chains in flight).
HWY_INLINE void KeyDot4Bf16(const float* HWY_RESTRICT q, const KvSide& k, int64_t j, int64_t kvh, int64_t d, float* out) {
  const DF df;
  const hn::Rebind<hwy::bfloat16_t, DF> dbf;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const hwy::bfloat16_t* rows[4];
  decltype(hn::Zero(df)) acc[4];
  for (int r = 0; r < 4; ++r) {
    rows[r] = static_cast<const hwy::bfloat16_t*>(k.data) + (j + r) * k.stride0 + kvh * k.stride1;
    acc[r] = hn::Zero(df);
  }
  int64_t c = 0;
  for (; c + N <= d; c += N) {
    const auto qc = hn::LoadU(df, q + c);
    for (int r = 0; r < 4; ++r) acc[r] = hn::MulAdd(qc, hn::PromoteTo(df, hn::LoadU(dbf, rows[r] + c)), acc[r]);
  }
  for (int r = 0; r < 4; ++r) {
    const auto* bits = reinterpret_cast<const uint16_t*>(rows[r]);
    float tail = 0.0f;
    for (int64_t t = c; t < d; ++t) tail += q[t] * bf16_to_f32(bits[t]);
    out[r] = LaneTreeSum(df, acc[r]) + tail;
  }
}

// The transposed form, for prefill, where every query of a kv head reads the same keys: a block of
// N keys is stored element-major (element c of key l at c * N + l, widened to f32), so N scores are
// N accumulators of broadcast-q FMAs with no horizontal sum per score. Accumulator l takes the
// elements c = l, l + N, ... in order, as lane l of KeyDot's accumulator does, and they are added in
// LaneTreeSum's pairing, then the tail's chain: each score has exactly KeyDot's bits.
constexpr size_t kBlock = hn::MaxLanes(DF());

// The scores of R queries (heads sharing the kv head) against one transposed block, into out[r]
// lanes. Accumulator class l is finished before the next (so few registers are live) and each
// block row loaded once serves all R queries.
template <int R>
HWY_INLINE void BlockScores(const float* const* HWY_RESTRICT q, const float* HWY_RESTRICT kt, int64_t d, float* HWY_RESTRICT out) {
  const DF df;
  constexpr int64_t n = static_cast<int64_t>(kBlock);
  const int64_t whole = d / n * n;
  HWY_ALIGN float sums[R][kBlock][kBlock];  // [query][accumulator class][key]
  for (int64_t l = 0; l < n; ++l) {
    hn::Vec<DF> acc[R];
    for (int r = 0; r < R; ++r) acc[r] = hn::Zero(df);
    for (int64_t c = l; c < whole; c += n) {
      const auto k = hn::LoadU(df, kt + c * n);
      for (int r = 0; r < R; ++r) acc[r] = hn::MulAdd(hn::Set(df, q[r][c]), k, acc[r]);
    }
    for (int r = 0; r < R; ++r) hn::Store(acc[r], df, sums[r][l]);
  }
  for (int r = 0; r < R; ++r) {
    hn::Vec<DF> v[kBlock];
    for (size_t l = 0; l < kBlock; ++l) v[l] = hn::Load(df, sums[r][l]);
    for (size_t w = kBlock / 2; w >= 1; w /= 2)
      for (size_t l = 0; l < w; ++l) v[l] = hn::Add(v[l], v[l + w]);
    auto tail = hn::Zero(df);
    for (int64_t c = whole; c < d; ++c) tail = hn::Add(tail, hn::Mul(hn::Set(df, q[r][c]), hn::LoadU(df, kt + c * n)));
    hn::StoreU(hn::Add(v[0], tail), df, out + r * n);
  }
}

int64_t KeyBlock() { return static_cast<int64_t>(kBlock); }

// Blocks [b0, b1) of the transposed keys, numbered kv head major (blocks of them per head).
void TransposeKeysBf16(const AttentionKvArgs& a, float* kt, int64_t blocks, int64_t b0, int64_t b1) {
  const int64_t d = a.head_dim, n = static_cast<int64_t>(kBlock);
  for (int64_t item = b0; item < b1; ++item) {
    const int64_t kvh = item / blocks, b = item % blocks;
    float* dst = kt + item * d * n;
    for (int64_t l = 0; l < n; ++l) {
      const auto* row = static_cast<const uint16_t*>(a.k.data) + (b * n + l) * a.k.stride0 + kvh * a.k.stride1;
      for (int64_t c = 0; c < d; ++c) dst[c * n + l] = bf16_to_f32(row[c]);
    }
  }
}

// Scores of keys [j, n_keys) in rows (KeyDot's order), after the transposed blocks before j.
HWY_INLINE void RowScoresBf16(const float* HWY_RESTRICT qi, const KvSide& k, int64_t j, int64_t n_keys, int64_t kvh, int64_t d, float scale,
                              float* HWY_RESTRICT p) {
  for (; j + 4 <= n_keys; j += 4) {
    float dots[4];
    KeyDot4Bf16(qi, k, j, kvh, d, dots);
    for (int r = 0; r < 4; ++r) p[j + r] = dots[r] * scale;
  }
  for (; j < n_keys; ++j) p[j] = KeyDot(qi, k, j, kvh, d) * scale;
}

// AddWeightedRows for R heads over the same f32 rows: acc[r][c] += p[r][j] * rows[j][c], each
// element's chain in row order exactly as there, with R * NV accumulators in flight (one head's
// few accumulators would wait on their own FMA latency at every row).
template <int R, int NV>
HWY_INLINE void AddWeightedRowsChunkR(const float* const* HWY_RESTRICT p, int64_t n, const float* HWY_RESTRICT rows, int64_t stride,
                                      float* const* HWY_RESTRICT acc, int64_t c0) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<DF> a[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = hn::LoadU(df, acc[r] + c0 + v * N);
  for (int64_t j = 0; j < n; ++j) {
    const float* row = rows + j * stride + c0;
    for (int r = 0; r < R; ++r) {
      const auto pj = hn::Set(df, p[r][j]);
      for (int v = 0; v < NV; ++v) a[r][v] = hn::MulAdd(pj, hn::LoadU(df, row + v * N), a[r][v]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) hn::StoreU(a[r][v], df, acc[r] + c0 + v * N);
}

template <int R>
HWY_INLINE void AddWeightedRowsR(const float* const* HWY_RESTRICT p, int64_t n, const float* HWY_RESTRICT rows, int64_t stride, int64_t d,
                                 float* const* HWY_RESTRICT acc) {
  constexpr int kChunk = R >= 3 ? 4 : 8;  // vectors per head at once: at most 16 accumulators
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF())), whole = d / N;
  int64_t v0 = 0;
  for (; v0 + kChunk <= whole; v0 += kChunk) AddWeightedRowsChunkR<R, kChunk>(p, n, rows, stride, acc, v0 * N);
  switch (whole - v0) {
    case 7: AddWeightedRowsChunkR<R, 7>(p, n, rows, stride, acc, v0 * N); break;
    case 6: AddWeightedRowsChunkR<R, 6>(p, n, rows, stride, acc, v0 * N); break;
    case 5: AddWeightedRowsChunkR<R, 5>(p, n, rows, stride, acc, v0 * N); break;
    case 4: AddWeightedRowsChunkR<R, 4>(p, n, rows, stride, acc, v0 * N); break;
    case 3: AddWeightedRowsChunkR<R, 3>(p, n, rows, stride, acc, v0 * N); break;
    case 2: AddWeightedRowsChunkR<R, 2>(p, n, rows, stride, acc, v0 * N); break;
    case 1: AddWeightedRowsChunkR<R, 1>(p, n, rows, stride, acc, v0 * N); break;
    default: break;
  }
  for (int r = 0; r < R; ++r)
    for (int64_t c = whole * N; c < d; ++c) {
      float s = acc[r][c];
      for (int64_t j = 0; j < n; ++j) s += p[r][j] * rows[j * stride + c];
      acc[r][c] = s;
    }
}

// Queries i0, i0 + step, ... < i1 with the keys transposed (a.kt): the heads of a query that share a
// kv head go together, so that each block of keys and each run of value rows comes from memory
// once for all of them and is reused from L1.
void GroupItems(const AttentionKvArgs& a, int64_t i0, int64_t i1, int64_t step) {
  const DF df;
  const int64_t n = static_cast<int64_t>(kBlock), d = a.head_dim, group = a.group, kv_heads = a.n_heads / a.group;
  constexpr int64_t kRun = 32;  // value rows per pass over the group's accumulators
  const int64_t stride = a.q_pos0 + i1 + n;
  std::vector<float> p(static_cast<size_t>(group * stride)), acc(static_cast<size_t>(group * d)), inv_sum(static_cast<size_t>(group));
  std::vector<float> run(static_cast<size_t>(kRun * d));
  const auto vscale = hn::Set(df, a.scale);
  for (int64_t i = i0; i < i1; i += step) {
    const int64_t n_keys = a.q_pos0 + i + 1, blocks = std::min(n_keys / n, a.kt_blocks);
    for (int64_t g = 0; g < kv_heads; ++g) {
      const float* kt = a.kt + g * a.kt_blocks * d * n;
      const float* q0 = a.q + i * a.q_stride0 + g * group * a.q_stride1;
      for (int64_t b = 0; b < blocks; ++b)
        for (int64_t r0 = 0; r0 < group; r0 += 4) {  // up to four heads at a time
          const float* qs[4];
          const int64_t rn = std::min<int64_t>(4, group - r0);
          for (int64_t r = 0; r < rn; ++r) qs[r] = q0 + (r0 + r) * a.q_stride1;
          HWY_ALIGN float block[4 * kBlock];
          const float* ktb = kt + b * d * n;
          switch (rn) {
            case 4: BlockScores<4>(qs, ktb, d, block); break;
            case 3: BlockScores<3>(qs, ktb, d, block); break;
            case 2: BlockScores<2>(qs, ktb, d, block); break;
            default: BlockScores<1>(qs, ktb, d, block); break;
          }
          for (int64_t r = 0; r < rn; ++r)
            hn::StoreU(hn::Mul(hn::Load(df, block + r * n), vscale), df, p.data() + (r0 + r) * stride + b * n);
        }
      for (int64_t r = 0; r < group; ++r) {
        float* pr = p.data() + r * stride;
        RowScoresBf16(q0 + r * a.q_stride1, a.k, blocks * n, n_keys, g, d, a.scale, pr);
        auto vmax = hn::Set(df, -INFINITY);
        int64_t j = 0;
        for (; j + n <= n_keys; j += n) vmax = hn::Max(vmax, hn::LoadU(df, pr + j));
        float mx = hn::GetLane(hn::MaxOfLanes(df, vmax));
        for (; j < n_keys; ++j) mx = std::max(mx, pr[j]);
        inv_sum[static_cast<size_t>(r)] = ExpScoresInPlace(pr, n_keys, mx);
      }
      std::fill(acc.begin(), acc.end(), 0.0f);
      const auto* v = static_cast<const uint16_t*>(a.v.data) + g * a.v.stride1;
      for (int64_t j = 0; j < n_keys; j += kRun) {  // each run widened once (exactly) for all the heads
        const int64_t len = std::min(kRun, n_keys - j);
        for (int64_t t = 0; t < len; ++t)
          for (int64_t c = 0; c < d; ++c) run[static_cast<size_t>(t * d + c)] = bf16_to_f32(v[(j + t) * a.v.stride0 + c]);
        for (int64_t r0 = 0; r0 < group; r0 += 4) {
          const float* ps[4];
          float* accs[4];
          const int64_t rn = std::min<int64_t>(4, group - r0);
          for (int64_t r = 0; r < rn; ++r) ps[r] = p.data() + (r0 + r) * stride + j, accs[r] = acc.data() + (r0 + r) * d;
          switch (rn) {
            case 4: AddWeightedRowsR<4>(ps, len, run.data(), d, d, accs); break;
            case 3: AddWeightedRowsR<3>(ps, len, run.data(), d, d, accs); break;
            case 2: AddWeightedRowsR<2>(ps, len, run.data(), d, d, accs); break;
            default: AddWeightedRowsR<1>(ps, len, run.data(), d, d, accs); break;
          }
        }
      }
      for (int64_t r = 0; r < group; ++r) {
        float* o = a.out + i * a.o_stride0 + (g * group + r) * a.o_stride1;
        // + 0.0f as the decode tasks add their (zero) bias: the same sign of zero
        for (int64_t c = 0; c < d; ++c) o[c] = (acc[static_cast<size_t>(r * d + c)] + 0.0f) * inv_sum[static_cast<size_t>(r)];
      }
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(GroupItems);
HWY_EXPORT(KeyBlock);
HWY_EXPORT(TransposeKeysBf16);

namespace {
KvSide side_of(const KvRows& r) { return KvSide{r.data.raw(), r.data.stride(0), r.data.stride(1)}; }
}  // namespace

void attention_kv_transposed(const AttentionSeq& seq, float scale, int64_t max_transposed_bytes) {
  const Tensor& q = seq.q;
  const int64_t n = q.dim(0), n_heads = q.dim(1), kv_heads = seq.k.kv_heads(), d = q.dim(2);
  AttentionKvArgs args{q.data<const float>(),
                       seq.out.data<float>(),
                       q.stride(0),
                       q.stride(1),
                       seq.out.stride(0),
                       seq.out.stride(1),
                       side_of(seq.k),
                       side_of(seq.v),
                       n_heads,
                       n_heads / kv_heads,
                       d,
                       seq.q_pos0,
                       scale,
                       nullptr,
                       0};
  ThreadPool& pool = compute_pool();
  // as many blocks of keys as fit the scratch bound; the rest are read in rows, with the same bits
  const int64_t block = HWY_DYNAMIC_DISPATCH(KeyBlock)();
  const int64_t fit = max_transposed_bytes / static_cast<int64_t>(sizeof(float) * kv_heads * d * block);
  args.kt_blocks = std::min((seq.q_pos0 + n) / block, fit);
  std::vector<float> kt(static_cast<size_t>(kv_heads * args.kt_blocks * d * block));
  args.kt = kt.data();
  pool.parallel_for(kv_heads * args.kt_blocks, 1,
                    [&](int64_t b0, int64_t b1) { HWY_DYNAMIC_DISPATCH(TransposeKeysBf16)(args, kt.data(), args.kt_blocks, b0, b1); });
  // queries dealt round-robin, since causal rows grow in cost with i
  const int64_t threads = pool.size();
  pool.run_on_all([&](int t) { HWY_DYNAMIC_DISPATCH(GroupItems)(args, t, n, threads); });
}

}  // namespace sanctum::ops::cpu
#endif
