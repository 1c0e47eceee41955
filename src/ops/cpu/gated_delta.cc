// GatedDeltaNet CPU kernels: causal depthwise conv1d + SiLU, the gated delta rule (a fused
// sequential sweep and the chunked WY / UT form) and the gated RMSNorm. Highway dynamic dispatch;
// every reduction runs in f32 in an order fixed by the shapes alone (never by the thread count).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/gated_delta.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"
#include "hwy/aligned_allocator.h"
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/thread_pool.h"
#include "ops/cpu/gated_delta.h"
#include "ops/op_util.h"

#ifndef SANCTUM_OPS_CPU_GATED_DELTA_ARGS_
#define SANCTUM_OPS_CPU_GATED_DELTA_ARGS_
namespace sanctum::ops::cpu {
// What the recurrence kernels share (one call of gated_delta_rule).
struct GdnArgs {
  const Tensor *q, *k, *v, *a, *b;
  const float* decay_rate;  // (Hv) exp(A_log)
  const float* dt_bias;     // (Hv)
  GatedDeltaShape shape;
  float* state;  // (Hv, Dv, Dk)
  Tensor* out;
};
}  // namespace sanctum::ops::cpu
#endif

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// Scratch rows are padded with zeros to a multiple of kPad floats (at least the widest x86 vector),
// so vector loops over them need no tails and the padding stays zero through every product.
constexpr int64_t kPad = 16;
inline int64_t Padded(int64_t n) { return (n + kPad - 1) / kPad * kPad; }

// Zero-filled aligned scratch of n floats.
inline hwy::AlignedFreeUniquePtr<float[]> Scratch(int64_t n) {
  auto p = hwy::AllocateAligned<float>(static_cast<size_t>(std::max<int64_t>(n, 1)));
  std::memset(p.get(), 0, static_cast<size_t>(std::max<int64_t>(n, 1)) * sizeof(float));
  return p;
}

inline float Sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// torch's softplus (threshold 20); mlx's logaddexp(x, 0) agrees to rounding.
inline float Softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// Per-token log decay of value head h: -exp(A_log) * softplus(a + dt_bias).
inline float LogDecay(const GdnArgs& p, int64_t t, int64_t h) {
  return -p.decay_rate[h] * Softplus(detail::row_ptr<const float>(*p.a, t)[h] + p.dt_bias[h]);
}
inline float Beta(const GdnArgs& p, int64_t t, int64_t h) { return Sigmoid(detail::row_ptr<const float>(*p.b, t)[h]); }

// silu(x) = x / (1 + exp(-x)); Highway's Exp is specified up to +104 and silu(x < -88) is 0 in f32.
HWY_INLINE hn::Vec<DF> Silu(DF df, hn::Vec<DF> x) {
  const auto e = hn::Exp(df, hn::Min(hn::Neg(x), hn::Set(df, 88.0f)));
  return hn::Div(x, hn::Add(hn::Set(df, 1.0f), e));
}

// exp(x), flushed to 0 below -80 (exp(-80) ~ 1.8e-35): keeps denormals out of the products.
HWY_INLINE hn::Vec<DF> ExpFlush(DF df, hn::Vec<DF> x) {
  const auto lo = hn::Set(df, -80.0f);
  return hn::IfThenZeroElse(hn::Lt(x, lo), hn::Exp(df, hn::Max(x, lo)));
}
inline float ExpFlush(float x) { return x < -80.0f ? 0.0f : std::exp(x); }

// Sum over d of a[i] * b[i]: lanes in vector order, then the tail.
HWY_INLINE float Dot(const float* HWY_RESTRICT a, const float* HWY_RESTRICT b, int64_t d) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto acc = hn::Zero(df);
  int64_t c = 0;
  for (; c + N <= d; c += N) acc = hn::MulAdd(hn::LoadU(df, a + c), hn::LoadU(df, b + c), acc);
  float s = hn::GetLane(hn::SumOfLanes(df, acc));
  for (; c < d; ++c) s += a[c] * b[c];
  return s;
}

// out[0..d) = x * scale / sqrt(sum x^2 + 1e-6); out[d..dp) = 0.
HWY_INLINE void L2Normalize(const float* HWY_RESTRICT x, int64_t d, int64_t dp, float scale, float* HWY_RESTRICT out) {
  const float inv = scale / std::sqrt(Dot(x, x, d) + 1e-6f);
  for (int64_t c = 0; c < d; ++c) out[c] = x[c] * inv;
  for (int64_t c = d; c < dp; ++c) out[c] = 0.0f;
}

// Brings [p, p + count) floats towards L1, one request per cache line.
HWY_INLINE void Prefetch(const float* p, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) hwy::Prefetch(p + i);
}

// ---------------------------------------------------------------- conv

// Channels [c0, c1) of the conv (c0 a multiple of the block size, so tails fall only at the end of
// the row whatever the thread split). wt: (kernel, width) f32, tap j of channel c0 + i at j*width + i.
void ConvChannels(const float* const* rows, int64_t n, int64_t hist, const float* HWY_RESTRICT taps, int64_t ldw,
                  int64_t first, const Tensor& out, int64_t c0, int64_t c1) {
  // rows: the n + hist row pointers of [state; x]; taps: (hist + 1, ldw) f32, tap j of channel c at
  // taps[j * ldw + c - first]; out rows get channels [c0, c1).
  const float* wt = taps - first + c0;  // now tap j of channel c0 + i at wt[j * ldw + i]
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), kernel = hist + 1;
  HWY_ALIGN float tw[hn::MaxLanes(df)];
  HWY_ALIGN float tx[hn::MaxLanes(df)];
  for (int64_t t = 0; t < n; ++t) {
    float* o = detail::row_ptr<float>(out, t);
    const float* const* in = rows + t;
    int64_t c = c0;
    for (; c + N <= c1; c += N) {
      auto acc = hn::Zero(df);
      for (int64_t j = 0; j < kernel; ++j) acc = hn::MulAdd(hn::LoadU(df, wt + j * ldw + (c - c0)), hn::LoadU(df, in[j] + c), acc);
      hn::StoreU(Silu(df, acc), df, o + c);
    }
    if (c < c1) {  // tail through one zero-padded vector, so every channel takes the same path
      auto acc = hn::Zero(df);
      for (int64_t j = 0; j < kernel; ++j) {
        for (int64_t i = 0; i < N; ++i) {
          tw[i] = c + i < c1 ? wt[j * ldw + (c - c0) + i] : 0.0f;
          tx[i] = c + i < c1 ? in[j][c + i] : 0.0f;
        }
        acc = hn::MulAdd(hn::Load(df, tw), hn::Load(df, tx), acc);
      }
      hn::Store(Silu(df, acc), df, tx);
      for (int64_t i = 0; c + i < c1; ++i) o[c + i] = tx[i];
    }
  }
}

// ---------------------------------------------------------------- gated RMSNorm

void GatedNormRows(const Tensor& x, const Tensor& z, const float* HWY_RESTRICT w, int64_t d, float eps, Tensor& out,
                   int64_t r0, int64_t r1) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), heads = x.dim(1) / d;
  HWY_ALIGN float tx[hn::MaxLanes(df)];
  HWY_ALIGN float tz[hn::MaxLanes(df)];
  HWY_ALIGN float tw[hn::MaxLanes(df)];
  for (int64_t r = r0; r < r1; ++r) {
    for (int64_t h = 0; h < heads; ++h) {
      const float* xr = detail::row_ptr<const float>(x, r) + h * d;
      const float* zr = detail::row_ptr<const float>(z, r) + h * d;
      float* o = detail::row_ptr<float>(out, r) + h * d;
      const float inv = 1.0f / std::sqrt(Dot(xr, xr, d) / static_cast<float>(d) + eps);
      const auto vinv = hn::Set(df, inv);
      int64_t c = 0;
      for (; c + N <= d; c += N) {
        const auto y = hn::Mul(hn::Mul(hn::LoadU(df, xr + c), vinv), hn::LoadU(df, w + c));
        hn::StoreU(hn::Mul(y, Silu(df, hn::LoadU(df, zr + c))), df, o + c);
      }
      if (c < d) {  // tail through one padded vector (same path for every element)
        for (int64_t i = 0; i < N; ++i) {
          tx[i] = c + i < d ? xr[c + i] : 0.0f;
          tz[i] = c + i < d ? zr[c + i] : 0.0f;
          tw[i] = c + i < d ? w[c + i] : 0.0f;
        }
        const auto y = hn::Mul(hn::Mul(hn::Load(df, tx), vinv), hn::Load(df, tw));
        hn::Store(hn::Mul(y, Silu(df, hn::Load(df, tz))), df, tx);
        for (int64_t i = 0; c + i < d; ++i) o[c + i] = tx[i];
      }
    }
  }
}

// ---------------------------------------------------------------- sequential recurrence
//
// Per token t and state row r (Dk values; rows are independent):
//   a = S_r.k_t, c = S_r.q_t                    (the state before token t)
//   d_r = beta_t (v_t[r] - g_t a)               (delta, with S decayed by g_t first)
//   y_t[r] = g_t c + d_r (k_t.q_t)              (= S_r'.q_t, S_r' = g_t S_r + d_r k_t)
// and the update S_r' = g_t S_r + d_r k_t is folded into the sweep that reads S_r for token t+1,
// so one pass over the state serves each token. The update of the last token is applied at the end.

// Tokens per block: their normalised q and k (2 x 16 x Dk floats) stay in L1 while each state row
// sweeps through them; the row itself stays in L1 across the block.
constexpr int64_t kSeqBlock = 16;

// One sweep over R consecutive state rows (row stride dk): applies each row's owed update (if any)
// and returns S_r.k and S_r.q. Rows share the loads of k, q and the owed key, and their independent
// dependency chains (dot, horizontal sum, delta, next token's dot) overlap. Each row's arithmetic is
// the same whatever R, so results do not depend on how rows are grouped.
template <int R>
HWY_INLINE void Sweep(float* HWY_RESTRICT s, int64_t dk, bool owed, float g, const float* HWY_RESTRICT d,
                      const float* HWY_RESTRICT kp, const float* HWY_RESTRICT k, const float* HWY_RESTRICT q,
                      float* HWY_RESTRICT dot_k, float* HWY_RESTRICT dot_q) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<DF> ak[R], aq[R];
  for (int r = 0; r < R; ++r) ak[r] = aq[r] = hn::Zero(df);
  int64_t c = 0;
  if (owed) {
    const auto vg = hn::Set(df, g);
    hn::Vec<DF> vd[R];
    for (int r = 0; r < R; ++r) vd[r] = hn::Set(df, d[r]);
    for (; c + N <= dk; c += N) {
      const auto vkp = hn::LoadU(df, kp + c), vk = hn::LoadU(df, k + c), vq = hn::LoadU(df, q + c);
      for (int r = 0; r < R; ++r) {
        float* sr = s + r * dk + c;
        const auto x = hn::MulAdd(vd[r], vkp, hn::Mul(hn::LoadU(df, sr), vg));
        hn::StoreU(x, df, sr);
        ak[r] = hn::MulAdd(x, vk, ak[r]);
        aq[r] = hn::MulAdd(x, vq, aq[r]);
      }
    }
  } else {
    for (; c + N <= dk; c += N) {
      const auto vk = hn::LoadU(df, k + c), vq = hn::LoadU(df, q + c);
      for (int r = 0; r < R; ++r) {
        const auto x = hn::LoadU(df, s + r * dk + c);
        ak[r] = hn::MulAdd(x, vk, ak[r]);
        aq[r] = hn::MulAdd(x, vq, aq[r]);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    float sk = hn::GetLane(hn::SumOfLanes(df, ak[r])), sq = hn::GetLane(hn::SumOfLanes(df, aq[r]));
    float* sr = s + r * dk;
    for (int64_t t = c; t < dk; ++t) {  // Dk not a multiple of the vector width: scalar tail, same maths
      if (owed) sr[t] = sr[t] * g + d[r] * kp[t];
      sk += sr[t] * k[t];
      sq += sr[t] * q[t];
    }
    dot_k[r] = sk;
    dot_q[r] = sq;
  }
}

// Rows [r0, r0 + R) of head h through the token block: one sweep per token.
template <int R>
HWY_INLINE void SweepBlock(const GdnArgs& p, int64_t h, float* HWY_RESTRICT S, int64_t r0, int64_t t0, int64_t tb,
                           bool owed, float gprev, const float* kprev, float* HWY_RESTRICT dprev, const float* kb,
                           const float* qb, int64_t dkp, const float* gb, const float* bb, const float* kq,
                           const float* const* vrow, float* const* yrow) {
  const int64_t dk = p.shape.key_dim;
  float d[R], dot_k[R], dot_q[R];
  for (int r = 0; r < R; ++r) d[r] = owed ? dprev[r0 + r] : 0.0f;
  bool ow = owed;
  float g = gprev;
  const float* kp = kprev;
  for (int64_t i = 0; i < tb; ++i) {
    Sweep<R>(S + r0 * dk, dk, ow, g, d, kp, kb + i * dkp, qb + i * dkp, dot_k, dot_q);
    const float* v = vrow[i] + r0;  // this head's v and out columns of token t0 + i
    float* y = yrow[i] + r0;
    for (int r = 0; r < R; ++r) {
      d[r] = bb[i] * (v[r] - gb[i] * dot_k[r]);
      y[r] = gb[i] * dot_q[r] + d[r] * kq[i];
    }
    ow = true;
    g = gb[i];
    kp = kb + i * dkp;
  }
  for (int r = 0; r < R; ++r) dprev[r0 + r] = d[r];
}

HWY_INLINE void ApplyUpdate(float* HWY_RESTRICT s, int64_t dk, float g, float d, const float* HWY_RESTRICT kp) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const auto vg = hn::Set(df, g), vd = hn::Set(df, d);
  int64_t c = 0;
  for (; c + N <= dk; c += N)
    hn::StoreU(hn::MulAdd(vd, hn::LoadU(df, kp + c), hn::Mul(hn::LoadU(df, s + c), vg)), df, s + c);
  for (; c < dk; ++c) s[c] = s[c] * g + d * kp[c];
}

void SequentialHeads(const GdnArgs& p, int64_t h0, int64_t h1) {
  const int64_t n = p.q->dim(0), dk = p.shape.key_dim, dv = p.shape.value_dim, dkp = Padded(dk),
                group = p.shape.n_value_heads / p.shape.n_key_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  auto buf = Scratch((2 * kSeqBlock + 1) * dkp + dv);
  float* kb = buf.get();                // (kSeqBlock, dkp) normalised keys of the block
  float* qb = kb + kSeqBlock * dkp;     // (kSeqBlock, dkp) normalised, scaled queries
  float* kprev = qb + kSeqBlock * dkp;  // (dkp) key of the last token of the previous block
  float* dprev = kprev + dkp;           // (dv) its per-row delta: the update each row still owes
  float gb[kSeqBlock], bb[kSeqBlock], kq[kSeqBlock];
  const float* vrow[kSeqBlock];
  float* yrow[kSeqBlock];
  for (int64_t h = h0; h < h1; ++h) {
    const int64_t kh = h / group;
    float* S = p.state + h * dv * dk;
    bool owed = false;
    float gprev = 1.0f;
    for (int64_t t0 = 0; t0 < n; t0 += kSeqBlock) {
      const int64_t tb = std::min(kSeqBlock, n - t0);
      for (int64_t i = t0 + kSeqBlock; i < std::min(n, t0 + 2 * kSeqBlock); ++i) {
        Prefetch(detail::row_ptr<const float>(*p.q, i) + kh * dk, dk);
        Prefetch(detail::row_ptr<const float>(*p.k, i) + kh * dk, dk);
        Prefetch(detail::row_ptr<const float>(*p.v, i) + h * dv, dv);
      }
      for (int64_t i = 0; i < tb; ++i) {
        L2Normalize(detail::row_ptr<const float>(*p.q, t0 + i) + kh * dk, dk, dkp, q_scale, qb + i * dkp);
        L2Normalize(detail::row_ptr<const float>(*p.k, t0 + i) + kh * dk, dk, dkp, 1.0f, kb + i * dkp);
        kq[i] = Dot(kb + i * dkp, qb + i * dkp, dk);
        gb[i] = std::exp(LogDecay(p, t0 + i, h));
        bb[i] = Beta(p, t0 + i, h);
        vrow[i] = detail::row_ptr<const float>(*p.v, t0 + i) + h * dv;
        yrow[i] = detail::row_ptr<float>(*p.out, t0 + i) + h * dv;
      }
      constexpr int64_t kRows = 4;
      int64_t r = 0;
      for (; r + kRows <= dv; r += kRows)
        SweepBlock<kRows>(p, h, S, r, t0, tb, owed, gprev, kprev, dprev, kb, qb, dkp, gb, bb, kq, vrow, yrow);
      for (; r < dv; ++r) SweepBlock<1>(p, h, S, r, t0, tb, owed, gprev, kprev, dprev, kb, qb, dkp, gb, bb, kq, vrow, yrow);
      // Every row owes the update of the block's last token: keep its key past the next block.
      std::memcpy(kprev, kb + (tb - 1) * dkp, static_cast<size_t>(dkp) * sizeof(float));
      gprev = gb[tb - 1];
      owed = true;
    }
    if (owed)
      for (int64_t r = 0; r < dv; ++r) ApplyUpdate(S + r * dk, dk, gprev, dprev[r], kprev);
  }
}

// ---------------------------------------------------------------- chunked recurrence (WY / UT form)
//
// Per value head, chunk of L tokens, carried state S0 (Dv, Dk) kept transposed as St = S0^T
// (Dk, Dv) so every product below is a row-major GEMM with a broadcast A and vector rows of B.
// G_i = sum_{t<=i} log g_t (in f64: differences of large cumulative sums must not cancel).
//   M[i][j] = beta_i exp(G_i - G_j) k_i.k_j (j < i),  (I + M) [U | W] = [beta v | beta exp(G) k]
//   u   = U - W St                           (the deltas, L x Dv)
//   out = (q exp(G)) St + P u,  P[i][j] = exp(G_i - G_j) q_i.k_j (j <= i)
//   St  = exp(G_last) St + (K diag(exp(G_last - G)))^T u
// Solving (I + M) X = B by forward substitution is the UT transform T = (I + M)^-1 applied to B.

enum class Acc { set, add, sub };

// C (MR x NV vectors) = / += / -= A (MR x kk) B (kk x NV vectors), row-major with leading dims.
template <int MR, int NV>
HWY_INLINE void Tile(const float* HWY_RESTRICT A, int64_t lda, const float* HWY_RESTRICT B, int64_t ldb,
                     float* HWY_RESTRICT C, int64_t ldc, int64_t kk, Acc acc) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<DF> c[MR][NV];
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) c[r][v] = hn::Zero(df);
  for (int64_t p = 0; p < kk; ++p) {
    hn::Vec<DF> b[NV];
    for (int v = 0; v < NV; ++v) b[v] = hn::LoadU(df, B + p * ldb + v * N);
    for (int r = 0; r < MR; ++r) {
      const auto a = hn::Set(df, A[r * lda + p]);
      for (int v = 0; v < NV; ++v) c[r][v] = hn::MulAdd(a, b[v], c[r][v]);
    }
  }
  for (int r = 0; r < MR; ++r)
    for (int v = 0; v < NV; ++v) {
      float* cp = C + r * ldc + v * N;
      if (acc == Acc::set) hn::StoreU(c[r][v], df, cp);
      else if (acc == Acc::add) hn::StoreU(hn::Add(hn::LoadU(df, cp), c[r][v]), df, cp);
      else hn::StoreU(hn::Sub(hn::LoadU(df, cp), c[r][v]), df, cp);
    }
}

template <int MR>
HWY_INLINE void TileRows(int nv, const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t ldc,
                         int64_t kk, Acc acc) {
  switch (nv) {
    case 1: return Tile<MR, 1>(A, lda, B, ldb, C, ldc, kk, acc);
    case 2: return Tile<MR, 2>(A, lda, B, ldb, C, ldc, kk, acc);
    case 3: return Tile<MR, 3>(A, lda, B, ldb, C, ldc, kk, acc);
    default: return Tile<MR, 4>(A, lda, B, ldb, C, ldc, kk, acc);
  }
}

// Column tile width in vectors: 4 rows x kNV accumulators plus kNV rows of B fit the register file
// (32 vector registers with AVX-512, 16 below it).
#if HWY_TARGET <= HWY_AVX3
constexpr int kNV = 4;
#else
constexpr int kNV = 2;
#endif

// C (m x n) =/+=/-= A (m x kk) B (kk x n); n a multiple of the vector width (padded scratch).
// lower_a: A[i][p] = 0 for p > i, so a row block stops its reduction after its last row.
// lower_c: only C[i][j] for j <= i is wanted (other entries are left unspecified).
void Gemm(int64_t m, int64_t n, int64_t kk, const float* A, int64_t lda, const float* B, int64_t ldb, float* C,
          int64_t ldc, Acc acc, bool lower_a = false, bool lower_c = false) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), nvec = n / N;
  constexpr int64_t MR = 4;
  for (int64_t i0 = 0; i0 < m; i0 += MR) {
    const int64_t mr = std::min(MR, m - i0);
    const int64_t kend = lower_a ? std::min(kk, i0 + mr) : kk;
    const int64_t vend = lower_c ? std::min(nvec, (i0 + mr + N - 1) / N) : nvec;
    for (int64_t v0 = 0; v0 < vend; v0 += kNV) {
      const int nv = static_cast<int>(std::min<int64_t>(kNV, vend - v0));
      const float* a = A + i0 * lda;
      const float* b = B + v0 * N;
      float* c = C + i0 * ldc + v0 * N;
      switch (mr) {
        case 1: TileRows<1>(nv, a, lda, b, ldb, c, ldc, kend, acc); break;
        case 2: TileRows<2>(nv, a, lda, b, ldb, c, ldc, kend, acc); break;
        case 3: TileRows<3>(nv, a, lda, b, ldb, c, ldc, kend, acc); break;
        default: TileRows<4>(nv, a, lda, b, ldb, c, ldc, kend, acc); break;
      }
    }
  }
}

void ChunkedHeads(const GdnArgs& p, int64_t h0, int64_t h1) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  constexpr int64_t CL = kGatedDeltaChunk;
  const int64_t n = p.q->dim(0), dk = p.shape.key_dim, dv = p.shape.value_dim, dkp = Padded(dk), dvp = Padded(dv),
                wb = dvp + dkp, lp = Padded(CL), group = p.shape.n_value_heads / p.shape.n_key_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // Chunks outer, this task's heads inner: consecutive heads read neighbouring columns of the same
  // input rows (TLB and prefetch friendly); each head's transposed state lives in `states`.
  auto states = Scratch((h1 - h0) * dk * dvp);
  auto buf = Scratch(2 * CL * dkp + dk * lp + 2 * CL * lp + CL * wb + CL * dvp + lp);
  float* kn = buf.get();      // (CL, dkp) normalised keys
  float* qn = kn + CL * dkp;  // (CL, dkp) normalised, scaled queries (then times exp(G_i))
  float* kt = qn + CL * dkp;  // (dk, lp) keys transposed (then times exp(G_last - G_j))
  float* mm = kt + dk * lp;   // (CL, lp) K K^T, then M
  float* pq = mm + CL * lp;   // (CL, lp) Q K^T, then P
  float* bw = pq + CL * lp;   // (CL, wb) [beta v | beta exp(G) k], then [U | W], then [u | W]
  float* o = bw + CL * wb;    // (CL, dvp) outputs of the chunk
  float* drow = o + CL * dvp;  // (lp) G_i - G_j, then exp of it
  double G[CL];
  float beta[CL], e[CL], el[CL];
  for (int64_t h = h0; h < h1; ++h) {
    const float* S = p.state + h * dv * dk;
    float* st = states.get() + (h - h0) * dk * dvp;  // (dk, dvp) the state, transposed
    for (int64_t c = 0; c < dk; ++c)
      for (int64_t r = 0; r < dv; ++r) st[c * dvp + r] = S[r * dk + c];
  }
  for (int64_t t0 = 0; t0 < n; t0 += CL) {
    for (int64_t h = h0; h < h1; ++h) {
      const int64_t kh = h / group;
      float* st = states.get() + (h - h0) * dk * dvp;
      const int64_t L = std::min(CL, n - t0), lpad = Padded(L);
      // The next head's columns of this chunk (or the first head's of the next chunk) arrive while
      // this one computes: rows are far apart in the fused projection output.
      {
        const int64_t nh = h + 1 < h1 ? h + 1 : h0, nt = h + 1 < h1 ? t0 : t0 + CL, nkh = nh / group;
        for (int64_t i = nt; i < std::min(n, nt + CL); ++i) {
          Prefetch(detail::row_ptr<const float>(*p.q, i) + nkh * dk, dk);
          Prefetch(detail::row_ptr<const float>(*p.k, i) + nkh * dk, dk);
          Prefetch(detail::row_ptr<const float>(*p.v, i) + nh * dv, dv);
        }
      }
      double cum = 0.0;
      for (int64_t i = 0; i < L; ++i) {
        L2Normalize(detail::row_ptr<const float>(*p.q, t0 + i) + kh * dk, dk, dkp, q_scale, qn + i * dkp);
        L2Normalize(detail::row_ptr<const float>(*p.k, t0 + i) + kh * dk, dk, dkp, 1.0f, kn + i * dkp);
        beta[i] = Beta(p, t0 + i, h);
        cum += static_cast<double>(LogDecay(p, t0 + i, h));
        G[i] = cum;
      }
      for (int64_t i = L; i < lpad; ++i) G[i] = cum;
      for (int64_t i = 0; i < L; ++i) {
        e[i] = ExpFlush(static_cast<float>(G[i]));
        el[i] = ExpFlush(static_cast<float>(G[L - 1] - G[i]));
      }
      for (int64_t c = 0; c < dk; ++c) {
        for (int64_t i = 0; i < L; ++i) kt[c * lp + i] = kn[i * dkp + c];
        for (int64_t i = L; i < lpad; ++i) kt[c * lp + i] = 0.0f;
      }
      Gemm(L, lpad, dk, kn, dkp, kt, lp, mm, lp, Acc::set, false, true);
      Gemm(L, lpad, dk, qn, dkp, kt, lp, pq, lp, Acc::set, false, true);
      for (int64_t i = 0; i < L; ++i) {
        // exp(G_i - G_j) for j <= i (G past the chunk end repeats G[L-1]; those columns are masked).
        for (int64_t j = 0; j < lpad; ++j) drow[j] = static_cast<float>(G[i] - G[j]);
        float* mi = mm + i * lp;
        float* pi = pq + i * lp;
        const auto vb = hn::Set(df, beta[i]), vi = hn::Set(df, static_cast<float>(i));
        for (int64_t j = 0; j < lpad; j += N) {
          const auto idx = hn::Iota(df, static_cast<float>(j));
          const auto dj = ExpFlush(df, hn::Load(df, drow + j));
          hn::Store(hn::IfThenElseZero(hn::Lt(idx, vi), hn::Mul(hn::Mul(vb, dj), hn::Load(df, mi + j))), df, mi + j);
          hn::Store(hn::IfThenElseZero(hn::Le(idx, vi), hn::Mul(dj, hn::Load(df, pi + j))), df, pi + j);
        }
        float* bi = bw + i * wb;
        const float* vr = detail::row_ptr<const float>(*p.v, t0 + i) + h * dv;
        for (int64_t r = 0; r < dv; ++r) bi[r] = beta[i] * vr[r];
        for (int64_t r = dv; r < dvp; ++r) bi[r] = 0.0f;
        const float be = beta[i] * e[i];
        for (int64_t c = 0; c < dkp; ++c) bi[dvp + c] = be * kn[i * dkp + c];
      }
      // Forward substitution, row i after rows j < i: X_i = B_i - sum_j M[i][j] X_j.
      for (int64_t i = 1; i < L; ++i) Gemm(1, wb, i, mm + i * lp, lp, bw, wb, bw + i * wb, wb, Acc::sub);
      // u = U - W St (into the U columns).
      Gemm(L, dvp, dk, bw + dvp, wb, st, dvp, bw, wb, Acc::sub);
      // out = (q exp(G)) St + P u.
      for (int64_t i = 0; i < L; ++i) {
        const auto ve = hn::Set(df, e[i]);
        for (int64_t c = 0; c < dkp; c += N) hn::Store(hn::Mul(hn::Load(df, qn + i * dkp + c), ve), df, qn + i * dkp + c);
      }
      Gemm(L, dvp, dk, qn, dkp, st, dvp, o, dvp, Acc::set);
      Gemm(L, dvp, L, pq, lp, bw, wb, o, dvp, Acc::add, true, false);
      for (int64_t i = 0; i < L; ++i)
        std::memcpy(detail::row_ptr<float>(*p.out, t0 + i) + h * dv, o + i * dvp, static_cast<size_t>(dv) * sizeof(float));
      // St = exp(G_last) St + (K diag(exp(G_last - G)))^T u.
      const auto vl = hn::Set(df, e[L - 1]);
      for (int64_t c = 0; c < dk * dvp; c += N) hn::Store(hn::Mul(hn::Load(df, st + c), vl), df, st + c);
      for (int64_t c = 0; c < dk; ++c)
        for (int64_t j = 0; j < L; ++j) kt[c * lp + j] *= el[j];
      Gemm(dk, dvp, L, kt, lp, bw, wb, st, dvp, Acc::add);
    }
  }
  for (int64_t h = h0; h < h1; ++h) {
    float* S = p.state + h * dv * dk;
    const float* st = states.get() + (h - h0) * dk * dvp;
    for (int64_t r = 0; r < dv; ++r)
      for (int64_t c = 0; c < dk; ++c) S[r * dk + c] = st[c * dvp + r];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <vector>
#if HWY_ARCH_X86
#include <xmmintrin.h>
#endif

namespace sanctum::ops::cpu {
HWY_EXPORT(ConvChannels);
HWY_EXPORT(GatedNormRows);
HWY_EXPORT(SequentialHeads);
HWY_EXPORT(ChunkedHeads);

namespace {

// Flush-to-zero and denormals-are-zero for the duration of a kernel task (on this thread). Strong
// decays push products through the denormal range, where x86 cores without FTZ take a microcode
// assist per instruction (hundreds of cycles on Intel); values below 1e-38 carry nothing here.
class FlushDenormals {
 public:
#if HWY_ARCH_X86
  FlushDenormals() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | 0x8040u); }
  ~FlushDenormals() { _mm_setcsr(saved_); }

 private:
  unsigned saved_;
#endif
};

// Channels per conv task: a multiple of every vector width, so only the last block has a tail.
constexpr int64_t kConvBlock = 64;

GdnArgs make_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b,
                  const std::vector<float>& rate, const std::vector<float>& bias, const GatedDeltaShape& shape,
                  Tensor& state, Tensor& out) {
  return GdnArgs{&q, &k, &v, &a, &b, rate.data(), bias.data(), shape, state.data<float>(), &out};
}

void per_head_params(const Tensor& a_log, const Tensor& dt_bias, int64_t hv, std::vector<float>& rate,
                     std::vector<float>& bias) {
  rate.resize(static_cast<size_t>(hv));
  bias.resize(static_cast<size_t>(hv));
  for (int64_t h = 0; h < hv; ++h) {
    rate[static_cast<size_t>(h)] = std::exp(load_as_f32(a_log.raw(), a_log.dtype(), h));
    bias[static_cast<size_t>(h)] = load_as_f32(dt_bias.raw(), dt_bias.dtype(), h);
  }
}

// [state; x] as row pointers, then the conv over channel blocks with taps from `taps_of(c0, c1)`,
// then the state roll (after every output, as state rows are inputs).
template <class TapsOf>
void conv(const Tensor& x, Tensor& state, int64_t kernel, Tensor& out, TapsOf&& taps_of) {
  const int64_t n = x.dim(0), channels = x.dim(1), hist = kernel - 1;
  if (n == 0) return;
  std::vector<const float*> rows(static_cast<size_t>(n + hist));
  for (int64_t i = 0; i < hist; ++i) rows[static_cast<size_t>(i)] = detail::row_ptr<const float>(state, i);
  for (int64_t t = 0; t < n; ++t) rows[static_cast<size_t>(hist + t)] = detail::row_ptr<const float>(x, t);
  const int64_t blocks = (channels + kConvBlock - 1) / kConvBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / (kConvBlock * kernel * n));
  compute_pool().parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
    const int64_t c0 = b0 * kConvBlock, c1 = std::min(channels, b1 * kConvBlock);
    std::vector<float> scratch;
    int64_t ldw = 0, first = 0;
    const float* wt = taps_of(c0, c1, scratch, ldw, first);  // tap j of channel c at wt[j * ldw + c - first]
    const FlushDenormals ftz;
    HWY_DYNAMIC_DISPATCH(ConvChannels)(rows.data(), n, hist, wt, ldw, first, out, c0, c1);
    // New state rows i = rows n + i of [state; x], in increasing i: row n + i >= i is read before
    // anything overwrites it.
    const size_t bytes = static_cast<size_t>(c1 - c0) * sizeof(float);
    for (int64_t i = 0; i < hist; ++i)
      std::memmove(detail::row_ptr<float>(state, i) + c0, rows[static_cast<size_t>(n + i)] + c0, bytes);
  });
}

}  // namespace

void causal_conv1d_silu(const Tensor& x, Tensor& state, const Tensor& weight, Tensor& out) {
  const int64_t kernel = weight.dim(1);
  conv(x, state, kernel, out, [&](int64_t c0, int64_t c1, std::vector<float>& scratch, int64_t& ldw, int64_t& first) {
    // (channels, kernel) any float type -> (kernel, c1 - c0) f32 for this task's channels.
    const int64_t width = c1 - c0;
    scratch.resize(static_cast<size_t>(kernel * width));
    for (int64_t c = 0; c < width; ++c)
      for (int64_t j = 0; j < kernel; ++j)
        scratch[static_cast<size_t>(j * width + c)] =
            load_as_f32(weight.raw(), weight.dtype(), (c0 + c) * weight.stride(0) + j);
    ldw = width;
    first = c0;
    return scratch.data();
  });
}

void causal_conv1d_silu_taps(const Tensor& x, Tensor& state, const Tensor& taps, Tensor& out) {
  conv(x, state, taps.dim(0), out, [&](int64_t, int64_t, std::vector<float>&, int64_t& ldw, int64_t& first) {
    ldw = taps.stride(0);
    first = 0;
    return taps.data<const float>();
  });
}

void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) {
  const int64_t rows = x.dim(0), d = weight.dim(0);
  std::vector<float> w(static_cast<size_t>(d));
  for (int64_t i = 0; i < d; ++i) w[static_cast<size_t>(i)] = load_as_f32(weight.raw(), weight.dtype(), i);
  const int64_t grain = std::max<int64_t>(1, 16384 / std::max<int64_t>(x.dim(1), 1));
  compute_pool().parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
    const FlushDenormals ftz;
    HWY_DYNAMIC_DISPATCH(GatedNormRows)(x, z, w.data(), d, eps, out, r0, r1);
  });
}

void gated_delta_sequential(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b,
                            const Tensor& a_log, const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state,
                            Tensor& out) {
  if (q.dim(0) == 0) return;
  std::vector<float> rate, bias;
  per_head_params(a_log, dt_bias, shape.n_value_heads, rate, bias);
  const GdnArgs args = make_args(q, k, v, a, b, rate, bias, shape, state, out);
  compute_pool().parallel_for(shape.n_value_heads, 1, [&](int64_t h0, int64_t h1) {
    const FlushDenormals ftz;
    HWY_DYNAMIC_DISPATCH(SequentialHeads)(args, h0, h1);
  });
}

void gated_delta_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b,
                         const Tensor& a_log, const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state,
                         Tensor& out) {
  if (q.dim(0) == 0) return;
  std::vector<float> rate, bias;
  per_head_params(a_log, dt_bias, shape.n_value_heads, rate, bias);
  const GdnArgs args = make_args(q, k, v, a, b, rate, bias, shape, state, out);
  compute_pool().parallel_for(shape.n_value_heads, 1, [&](int64_t h0, int64_t h1) {
    const FlushDenormals ftz;
    HWY_DYNAMIC_DISPATCH(ChunkedHeads)(args, h0, h1);
  });
}

}  // namespace sanctum::ops::cpu
#endif  // HWY_ONCE
