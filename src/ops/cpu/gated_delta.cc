// GatedDeltaNet CPU kernels: causal depthwise conv1d + SiLU, the token-by-token gated delta rule (a
// fused sequential sweep; the chunked form is in gated_delta_chunked.cc) and the gated RMSNorm.
// Highway dynamic dispatch; every reduction runs in f32 in an order fixed by the shapes alone (never
// by the thread count).
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/gated_delta.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/thread_pool.h"
#include "ops/cpu/gated_delta-inl.h"
#include "ops/cpu/gated_delta.h"
#include "ops/op_util.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;

// silu(x) = x / (1 + exp(-x)); Highway's Exp is specified up to +104 and silu(x < -88) is 0 in f32.
HWY_INLINE hn::Vec<DF> Silu(DF df, hn::Vec<DF> x) {
  const auto e = hn::Exp(df, hn::Min(hn::Neg(x), hn::Set(df, 88.0f)));
  return hn::Div(x, hn::Add(hn::Set(df, 1.0f), e));
}

// ---------------------------------------------------------------- conv

// Channels [c0, c1) of the conv (c0 a multiple of the block size, so tails fall only at the end of
// the row whatever the thread split). wt: (kernel, width) f32, tap j of channel c0 + i at j*width + i.
void ConvChannels(const float* const* rows, int64_t n, int64_t hist, const float* HWY_RESTRICT taps, int64_t ldw, int64_t first,
                  const Tensor& out, int64_t c0, int64_t c1) {
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

void GatedNormRows(const Tensor& x, const Tensor& z, const float* HWY_RESTRICT w, int64_t d, float eps, Tensor& out, int64_t r0,
                   int64_t r1) {
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
HWY_INLINE void Sweep(float* HWY_RESTRICT s, int64_t dk, bool owed, float g, const float* HWY_RESTRICT d, const float* HWY_RESTRICT kp,
                      const float* HWY_RESTRICT k, const float* HWY_RESTRICT q, float* HWY_RESTRICT dot_k, float* HWY_RESTRICT dot_q) {
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
HWY_INLINE void SweepBlock(const GdnArgs& p, int64_t h, float* HWY_RESTRICT S, int64_t r0, int64_t t0, int64_t tb, bool owed, float gprev,
                           const float* kprev, float* HWY_RESTRICT dprev, const float* kb, const float* qb, int64_t dkp, const float* gb,
                           const float* bb, const float* kq, const float* const* vrow, float* const* yrow) {
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
  for (; c + N <= dk; c += N) hn::StoreU(hn::MulAdd(vd, hn::LoadU(df, kp + c), hn::Mul(hn::LoadU(df, s + c), vg)), df, s + c);
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

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <vector>

namespace sanctum::ops::cpu {
HWY_EXPORT(ConvChannels);
HWY_EXPORT(GatedNormRows);
HWY_EXPORT(SequentialHeads);

namespace {

// Channels per conv task: a multiple of every vector width, so only the last block has a tail.
constexpr int64_t kConvBlock = 64;

GdnArgs make_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const std::vector<float>& rate,
                  const std::vector<float>& bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out) {
  return GdnArgs{&q, &k, &v, &a, &b, rate.data(), bias.data(), shape, state.data<float>(), &out};
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
    for (int64_t i = 0; i < hist; ++i) std::memmove(detail::row_ptr<float>(state, i) + c0, rows[static_cast<size_t>(n + i)] + c0, bytes);
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
        scratch[static_cast<size_t>(j * width + c)] = load_as_f32(weight.raw(), weight.dtype(), (c0 + c) * weight.stride(0) + j);
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

void causal_conv1d_silu_taps_rows(const Tensor& x, std::span<const int64_t> rows, std::span<Tensor* const> states, const Tensor& taps,
                                  Tensor& out) {
  const int64_t count = static_cast<int64_t>(rows.size()), channels = x.dim(1), hist = taps.dim(0) - 1;
  if (count == 0 || channels == 0) return;
  // Each sequence's [state; x row] as row pointers, as conv() lays out one sequence of one token.
  std::vector<const float*> inputs(static_cast<size_t>(count * (hist + 1)));
  std::vector<Tensor> outs(static_cast<size_t>(count));
  for (int64_t s = 0; s < count; ++s) {
    const float** in = inputs.data() + s * (hist + 1);
    for (int64_t i = 0; i < hist; ++i) in[i] = detail::row_ptr<const float>(*states[static_cast<size_t>(s)], i);
    in[hist] = detail::row_ptr<const float>(x, rows[static_cast<size_t>(s)]);
    outs[static_cast<size_t>(s)] = out.slice(0, rows[static_cast<size_t>(s)], rows[static_cast<size_t>(s)] + 1);
  }
  const int64_t blocks = (channels + kConvBlock - 1) / kConvBlock;
  const int64_t grain = std::max<int64_t>(1, 16384 / (kConvBlock * (hist + 1)));
  compute_pool().parallel_for(count * blocks, grain, [&](int64_t i0, int64_t i1) {
    const FlushDenormals ftz;
    for (int64_t i = i0; i < i1; ++i) {
      const int64_t s = i / blocks, c0 = (i % blocks) * kConvBlock, c1 = std::min(channels, c0 + kConvBlock);
      const float* const* in = inputs.data() + s * (hist + 1);
      HWY_DYNAMIC_DISPATCH(ConvChannels)(in, 1, hist, taps.data<const float>(), taps.stride(0), 0, outs[static_cast<size_t>(s)], c0, c1);
      Tensor& state = *states[static_cast<size_t>(s)];
      const size_t bytes = static_cast<size_t>(c1 - c0) * sizeof(float);
      for (int64_t r = 0; r < hist; ++r) std::memmove(detail::row_ptr<float>(state, r) + c0, in[1 + r] + c0, bytes);
    }
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

void gated_delta_sequential(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                            const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out) {
  if (q.dim(0) == 0) return;
  std::vector<float> rate, bias;
  per_head_params(a_log, dt_bias, shape.n_value_heads, rate, bias);
  const GdnArgs args = make_args(q, k, v, a, b, rate, bias, shape, state, out);
  compute_pool().parallel_for(shape.n_value_heads, 1, [&](int64_t h0, int64_t h1) {
    const FlushDenormals ftz;
    HWY_DYNAMIC_DISPATCH(SequentialHeads)(args, h0, h1);
  });
}

void gated_delta_sequential_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                                 const Tensor& dt_bias, const GatedDeltaShape& shape, std::span<const int64_t> rows,
                                 std::span<Tensor* const> states, Tensor& out) {
  const int64_t count = static_cast<int64_t>(rows.size()), hv = shape.n_value_heads;
  if (count == 0) return;
  std::vector<float> rate, bias;
  per_head_params(a_log, dt_bias, hv, rate, bias);
  // Each sequence's one-row views (kept alive for the args that point at them).
  std::vector<Tensor> views(static_cast<size_t>(count * 6));
  std::vector<GdnArgs> args;
  args.reserve(static_cast<size_t>(count));
  for (int64_t s = 0; s < count; ++s) {
    const int64_t r = rows[static_cast<size_t>(s)];
    Tensor* v6 = views.data() + s * 6;
    v6[0] = q.slice(0, r, r + 1);
    v6[1] = k.slice(0, r, r + 1);
    v6[2] = v.slice(0, r, r + 1);
    v6[3] = a.slice(0, r, r + 1);
    v6[4] = b.slice(0, r, r + 1);
    v6[5] = out.slice(0, r, r + 1);
    args.push_back(make_args(v6[0], v6[1], v6[2], v6[3], v6[4], rate, bias, shape, *states[static_cast<size_t>(s)], v6[5]));
  }
  compute_pool().parallel_for(count * hv, 1, [&](int64_t i0, int64_t i1) {
    const FlushDenormals ftz;
    while (i0 < i1) {  // runs of heads of one sequence
      const int64_t s = i0 / hv, h1 = std::min(i1, (s + 1) * hv);
      HWY_DYNAMIC_DISPATCH(SequentialHeads)(args[static_cast<size_t>(s)], i0 - s * hv, h1 - s * hv);
      i0 = h1;
    }
  });
}

}  // namespace sanctum::ops::cpu
#endif  // HWY_ONCE
