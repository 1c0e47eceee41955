// The gated delta rule in chunks of kGatedDeltaChunk tokens (WY / UT form): per chunk, the work is a
// handful of small dense products (chunk x 128 by 128 x 128 and chunk x chunk) run by a
// register-tiled GEMM, instead of one pass over the whole state per token. In the fast matmul mode
// (ops/precision.h, not f32) on CPUs with AVX512_BF16, the products other than the triangular solve
// take bf16 operands with f32 accumulation (gemm_bf16.h), as flash-linear-attention's chunked kernels
// do on tensor cores; the state, the solve and every other step stay f32.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/gated_delta_chunked.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/highway.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/thread_pool.h"
#include "ops/cpu/gated_delta-inl.h"
#include "ops/cpu/gated_delta.h"
#include "ops/cpu/gemm_bf16.h"
#include "ops/cpu/small_gemm-inl.h"
#include "ops/op_util.h"
#include "ops/precision.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;

// Brings [p, p + count) floats towards L2 (not L1: a chunk's rows are larger than L1).
HWY_INLINE void PrefetchL2(const float* p, int64_t count) {
  for (int64_t i = 0; i < count; i += 16) __builtin_prefetch(p + i, 0, 2);
}

// Per value head, chunk of L tokens, carried state S0 (Dv, Dk) kept transposed as St = S0^T
// (Dk, Dv) so every product is a row-major GEMM with a broadcast A and vector rows of B.
// G_i = sum_{t<=i} log g_t (in f64: differences of large cumulative sums must not cancel).
//   M[i][j] = beta_i exp(G_i - G_j) k_i.k_j (j < i),  P[i][j] = exp(G_i - G_j) q_i.k_j (j <= i)
//   [Yk; Yq] = [K; Q] St                        (one GEMM: the chunk's keys and queries against S0)
//   (I + M) u = beta (v - exp(G) Yk)            (the deltas; forward substitution = the UT transform)
//   out = exp(G) Yq + P u
//   St  = exp(G_last) St + (K diag(exp(G_last - G)))^T u
// K K^T and Q K^T depend only on the key head, so value heads sharing one (GQA) reuse them.
// Solving for u directly (rather than for W = T beta exp(G) K, then u = T beta v - W St) keeps the
// triangular solve at Dv columns instead of Dv + Dk.

// Byte offsets of a kernel's scratch arrays in one block, each 64-byte aligned.
struct ScratchLayout {
  size_t bytes = 0;
  template <class T>
  size_t add(int64_t count) {
    const size_t at = bytes;
    bytes += (static_cast<size_t>(count) * sizeof(T) + 63) / 64 * 64;
    return at;
  }
};

// At least `bytes` of 64-byte aligned scratch that stays with the calling thread (grown, never
// shrunk: 2.3 MB for a task of 16 heads of 128 x 128, 4.8 MB for 48; contents unspecified). A fresh
// allocation per call went back to the OS on free, and its page faults in the next call (680 per
// 0.8B layer) cost ~5% of that shape's fast mode.
inline uint8_t* ThreadScratch(size_t bytes) {
  thread_local hwy::AlignedFreeUniquePtr<uint8_t[]> block;
  thread_local size_t capacity = 0;
  if (bytes > capacity) {
    block = hwy::AllocateAligned<uint8_t>(bytes);
    capacity = bytes;
  }
  return block.get();
}

// Rows per block of the triangular solve: the rows above a block are applied by one GEMM, the
// block's own lower triangle row by row.
constexpr int64_t kSolveBlock = kGemmMR;

// Largest f32 + bf16 state footprint of one task for which the fast mode runs chunks outer, heads
// inner (ChunkedHeads): on this 1 MB-L2 / 32 MB-L3 Zen 4 that order was ~10% faster at 16 heads of
// 128 x 128 (1.5 MB, one thread) and ~8% slower at 48 (4.7 MB).
constexpr int64_t kChunksOuterStateBytes = int64_t{2} << 20;

// Rows [i0, i1) of (I + M) u = R in place, once the rows above i0 have been applied: forward
// substitution within the block's own lower triangle, f32.
HWY_INLINE void SolveBlockTriangle(int64_t i0, int64_t i1, int64_t n, const float* HWY_RESTRICT m, int64_t ldm, float* HWY_RESTRICT r,
                                   int64_t ldr) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  for (int64_t i = i0 + 1; i < i1; ++i) {
    float* ri = r + i * ldr;
    for (int64_t c = 0; c < n; c += N) {
      auto x = hn::Load(df, ri + c);
      for (int64_t j = i0; j < i; ++j) x = hn::NegMulAdd(hn::Set(df, m[i * ldm + j]), hn::Load(df, r + j * ldr + c), x);
      hn::Store(x, df, ri + c);
    }
  }
}

// (I + M) u = R in place (R: L rows of ldr floats, n of them used), M strictly lower (ldm).
void SolveUnitLower(int64_t L, int64_t n, const float* HWY_RESTRICT m, int64_t ldm, float* HWY_RESTRICT r, int64_t ldr) {
  for (int64_t i0 = 0; i0 < L; i0 += kSolveBlock) {
    const int64_t i1 = std::min(L, i0 + kSolveBlock);
    if (i0 > 0) SmallGemm(i1 - i0, n, i0, m + i0 * ldm, ldm, r, ldr, r + i0 * ldr, ldr, Acc::sub);
    SolveBlockTriangle(i0, i1, n, m, ldm, r, ldr);
  }
}

// The same with the rows above each block applied as a bf16 product (fast mode): -M in bf16 rows
// (mneg, ldm), and each block's finished rows of u packed into ub (pairs, ldb words) as they are
// solved, which is also the B operand P u needs next. The blocks' own triangles stay f32.
void SolveUnitLowerBf16(int64_t L, int64_t n, const float* HWY_RESTRICT m, const uint16_t* mneg, int64_t ldm, float* HWY_RESTRICT r,
                        int64_t ldr, uint32_t* ub, int64_t ldb) {
  for (int64_t i0 = 0; i0 < L; i0 += kSolveBlock) {
    const int64_t i1 = std::min(L, i0 + kSolveBlock);
    if (i0 > 0) gemm_bf16(i1 - i0, n, i0, mneg + i0 * ldm, ldm, ub, ldb, r + i0 * ldr, ldr, 1.0f);
    SolveBlockTriangle(i0, i1, n, m, ldm, r, ldr);
    pack_pairs_bf16(r + i0 * ldr, ldr, i1 - i0, n, ub + i0 / 2 * ldb, ldb);
  }
}

// Fast mode: beta, G (the cumulative log decay, f64), exp(G) and exp(G_last - G) of value head h for
// tokens [t0, t0 + L), vectors of tokens through Highway's Exp and Log1p (within 3 ulp) instead of
// five scalar C library calls per token and head (~3% of the fast mode at both Qwen3.5 shapes).
// Each token's values still depend on it alone, so a split at a multiple of the chunk gives the same
// bits. beta, e, el, G: Padded(L) values.
void ChunkDecaysVec(const GdnArgs& p, int64_t t0, int64_t L, int64_t h, float* HWY_RESTRICT beta, double* HWY_RESTRICT G,
                    float* HWY_RESTRICT e, float* HWY_RESTRICT el) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), lpad = Padded(L);
  HWY_ALIGN float x[kGatedDeltaChunk], ld[kGatedDeltaChunk], gf[kGatedDeltaChunk], gl[kGatedDeltaChunk];
  const float bias = p.dt_bias[h];
  for (int64_t i = 0; i < L; ++i) {
    x[i] = detail::row_ptr<const float>(*p.a, t0 + i)[h] + bias;
    beta[i] = detail::row_ptr<const float>(*p.b, t0 + i)[h];
  }
  for (int64_t i = L; i < lpad; ++i) x[i] = beta[i] = 0.0f;
  const auto one = hn::Set(df, 1.0f), twenty = hn::Set(df, 20.0f), neg_rate = hn::Set(df, -p.decay_rate[h]), big = hn::Set(df, 80.0f);
  for (int64_t i = 0; i < lpad; i += N) {
    // Softplus (threshold 20, as Softplus()) and the sigmoid; exp's arguments clamped where the
    // result no longer depends on them.
    const auto xi = hn::Load(df, x + i);
    const auto sp = hn::IfThenElse(hn::Gt(xi, twenty), xi, hn::Log1p(df, hn::Exp(df, hn::Min(xi, twenty))));
    hn::Store(hn::Mul(neg_rate, sp), df, ld + i);
    const auto bi = hn::LoadU(df, beta + i);
    hn::StoreU(hn::Div(one, hn::Add(one, hn::Exp(df, hn::Min(hn::Neg(bi), big)))), df, beta + i);
  }
  double cum = 0.0;
  for (int64_t i = 0; i < L; ++i) G[i] = cum += static_cast<double>(ld[i]);
  for (int64_t i = L; i < lpad; ++i) G[i] = cum;
  for (int64_t i = 0; i < lpad; ++i) {
    gf[i] = static_cast<float>(G[i]);
    gl[i] = static_cast<float>(cum - G[i]);
  }
  for (int64_t i = 0; i < lpad; i += N) {
    hn::StoreU(ExpFlush(df, hn::Load(df, gf + i)), df, e + i);
    hn::StoreU(ExpFlush(df, hn::Load(df, gl + i)), df, el + i);
  }
}

// Value heads [h0, h1); runs of heads that share a key head share its chunk products. bf16: run the
// products through gemm_bf16 (the caller checked bf16_gemm_available()).
void ChunkedHeads(const GdnArgs& p, int64_t h0, int64_t h1, bool bf16) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  constexpr int64_t CL = kGatedDeltaChunk;
  const int64_t n = p.q->dim(0), dk = p.shape.key_dim, dv = p.shape.value_dim, dkp = Padded(dk), dvp = Padded(dv), lp = Padded(CL),
                group = p.shape.n_value_heads / p.shape.n_key_heads;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const int64_t nh = h1 - h0, kh0 = h0 / group, kh1 = (h1 - 1) / group + 1;
  // Fast mode, when the task's states (f32 and the bf16 copy) fit kChunksOuterStateBytes: chunks
  // outer, heads inner. One sequential pass over each chunk's q and k rows gathers every key head's
  // normalised bf16 [K; Q] into contiguous scratch, and the states stream through L3 once per chunk.
  // The v rows are read in place, each head's pieces prefetched one head ahead (copying them in the
  // gather pass cost ~6% at 0.8B: 512 KB more written per chunk). Otherwise heads outer, chunks inner,
  // each head's inputs read from the rows (a strided 512-byte piece of each) while its state stays
  // in L2.
  const bool chunks_outer = bf16 && nh * dk * dvp * 6 <= kChunksOuterStateBytes;
  const int64_t span = chunks_outer ? CL : n;  // tokens per pass of the head loop
  // bf16 operands (fast mode only): A operands as bf16 rows, B operands as interleaved row pairs.
  const int64_t np = bf16 ? 1 : 0, nbuf = 2 * CL * dkp + dk * lp + 4 * CL * lp + 2 * CL * dvp + lp;
  ScratchLayout lay;
  const size_t o_states = lay.add<float>(nh * dk * dvp), o_buf = lay.add<float>(nbuf),
               o_xg = lay.add<uint16_t>(chunks_outer ? (kh1 - kh0) * 2 * CL * dkp : 0),
               o_a16 = lay.add<uint16_t>(np * (2 * CL * dkp + dk * lp + CL * lp)),
               o_b32 = lay.add<uint32_t>(np * (dkp / 2 * lp + CL / 2 * dvp + nh * dkp / 2 * dvp));
  uint8_t* const ws = ThreadScratch(lay.bytes);
  float* const states = reinterpret_cast<float*>(ws + o_states);  // (heads, dk, dvp) the states, transposed
  uint16_t* const xg = reinterpret_cast<uint16_t*>(ws + o_xg);    // (key heads, 2L, dkp) gathered [K; Q]
  float* x = reinterpret_cast<float*>(ws + o_buf);                // (2L, dkp) normalised keys, then normalised scaled queries
  std::memset(x, 0, static_cast<size_t>(nbuf) * sizeof(float));   // padding stays zero from here on
  float* kt = x + 2 * CL * dkp;                                   // (dk, lp) the keys transposed
  float* kk = kt + dk * lp;                                       // (CL, lp) K K^T (lower triangle)
  float* qk = kk + CL * lp;                                       // (CL, lp) Q K^T (lower triangle)
  float* mm = qk + CL * lp;                                       // (CL, lp) M
  float* pm = mm + CL * lp;                                       // (CL, lp) P
  float* y = pm + CL * lp;                                        // (2L, dvp) [Yk; Yq], then [u; out]
  float* drow = y + 2 * CL * dvp;                                 // (lp) G_i - G_j
  uint16_t* xa = reinterpret_cast<uint16_t*>(ws + o_a16);         // (2L, dkp) [K; Q]
  uint16_t* kta = xa + 2 * CL * dkp;                              // (dk, lp) K^T
  uint16_t* pa = kta + dk * lp;                                   // (CL, lp) P
  uint32_t* ktb = reinterpret_cast<uint32_t*>(ws + o_b32);        // (dkp/2, lp) K^T as B
  uint32_t* ub = ktb + dkp / 2 * lp;                              // (CL/2, dvp) u, then diag(exp(G_last - G)) u, as B
  uint32_t* stbs = ub + CL / 2 * dvp;                             // (heads, dkp/2, dvp) each St as B, kept with St
  double G[CL];
  float beta[CL], e[CL], el[CL];
  for (int64_t h = h0; h < h1; ++h) {
    const float* S = p.state + h * dv * dk;
    float* st = states + (h - h0) * dk * dvp;
    for (int64_t c = 0; c < dk; ++c) {
      for (int64_t r = 0; r < dv; ++r) st[c * dvp + r] = S[r * dk + c];
      for (int64_t r = dv; r < dvp; ++r) st[c * dvp + r] = 0.0f;
    }
  }
  auto run_end = [&](int64_t h) { return std::min(h1, (h / group + 1) * group); };
  for (int64_t s0 = 0; s0 < n; s0 += span) {
    const int64_t s1 = std::min(n, s0 + span);
    if (chunks_outer) {  // the chunk [s0, s1): [K; Q] of key head kh at xg + kh 2 CL dkp
      for (int64_t i = 0; i < s1 - s0; ++i) {
        const float* krow = detail::row_ptr<const float>(*p.k, s0 + i);
        const float* qrow = detail::row_ptr<const float>(*p.q, s0 + i);
        for (int64_t kh = kh0; kh < kh1; ++kh) {
          uint16_t* xc = xg + (kh - kh0) * 2 * CL * dkp;
          const float* kr = krow + kh * dk;
          const float* qr = qrow + kh * dk;
          pack_rows_bf16(kr, dk, 1, dk, xc + i * dkp, dkp, L2NormScale(kr, dk, 1.0f));
          pack_rows_bf16(qr, dk, 1, dk, xc + (s1 - s0 + i) * dkp, dkp, L2NormScale(qr, dk, q_scale));
        }
      }
    }
    for (int64_t ha = h0, hb = run_end(h0); ha < h1; ha = hb, hb = run_end(hb)) {
      const int64_t kh = ha / group;
      // Heads outer (span = n): a run's states (group x 64 KB at 128 x 128) stay in L2 through the
      // prompt, leaving room for the next chunk's input rows.
      for (int64_t t0 = s0; t0 < s1; t0 += CL) {
        const int64_t L = std::min(CL, n - t0), lpad = Padded(L);
        const uint16_t* xc = xa;  // [K; Q] as bf16 rows
        float* xq = x + L * dkp;  // queries right after the L keys: [K; Q] is one A operand
        if (chunks_outer) {
          xc = xg + (kh - kh0) * 2 * CL * dkp;
        } else {
          // The next chunk's rows come into L2 while this one computes: rows of the fused projection
          // output are far apart, beyond the hardware prefetchers' reach.
          for (int64_t i = t0 + CL; i < std::min(n, t0 + 2 * CL); ++i) {
            PrefetchL2(detail::row_ptr<const float>(*p.q, i) + kh * dk, dk);
            PrefetchL2(detail::row_ptr<const float>(*p.k, i) + kh * dk, dk);
            PrefetchL2(detail::row_ptr<const float>(*p.v, i) + ha * dv, (hb - ha) * dv);
          }
          for (int64_t i = 0; i < L; ++i) {
            const float* kr = detail::row_ptr<const float>(*p.k, t0 + i) + kh * dk;
            const float* qr = detail::row_ptr<const float>(*p.q, t0 + i) + kh * dk;
            if (bf16) {  // normalised straight into bf16 rows (the same f32 products, then rounded)
              pack_rows_bf16(kr, dk, 1, dk, xa + i * dkp, dkp, L2NormScale(kr, dk, 1.0f));
              pack_rows_bf16(qr, dk, 1, dk, xa + (L + i) * dkp, dkp, L2NormScale(qr, dk, q_scale));
            } else {
              L2Normalize(kr, dk, dkp, 1.0f, x + i * dkp);
              L2Normalize(qr, dk, dkp, q_scale, xq + i * dkp);
            }
          }
        }
        if (bf16) {
          // Kᵀ in both operand forms straight from K's bf16 rows (no f32 transpose).
          pairs_of_transpose_bf16(xc, dkp, L, dk, ktb, lp, lpad);
          unpack_pairs_bf16(ktb, lp, dk, lpad, kta, lp);
          gemm_bf16(L, lpad, dk, xc, dkp, ktb, lp, kk, lp, 0.0f, false, true);
          gemm_bf16(L, lpad, dk, xc + L * dkp, dkp, ktb, lp, qk, lp, 0.0f, false, true);
        } else {
          for (int64_t c = 0; c < dk; ++c) {
            for (int64_t i = 0; i < L; ++i) kt[c * lp + i] = x[i * dkp + c];
            for (int64_t i = L; i < lpad; ++i) kt[c * lp + i] = 0.0f;
          }
          SmallGemm(L, lpad, dk, x, dkp, kt, lp, kk, lp, Acc::set, false, true);
          SmallGemm(L, lpad, dk, xq, dkp, kt, lp, qk, lp, Acc::set, false, true);
        }
        for (int64_t h = ha; h < hb; ++h) {
          if (chunks_outer) {  // the next head's v pieces (this chunk's, or the next chunk's for the last head)
            const int64_t hn = h + 1 < h1 ? h + 1 : h0, tn = h + 1 < h1 ? t0 : t0 + CL;
            for (int64_t i = tn; i < std::min(n, tn + CL); ++i) PrefetchL2(detail::row_ptr<const float>(*p.v, i) + hn * dv, dv);
          }
          float* st = states + (h - h0) * dk * dvp;
          if (bf16) {
            ChunkDecaysVec(p, t0, L, h, beta, G, e, el);
          } else {
            double cum = 0.0;
            for (int64_t i = 0; i < L; ++i) {
              beta[i] = Beta(p, t0 + i, h);
              cum += static_cast<double>(LogDecay(p, t0 + i, h));
              G[i] = cum;
            }
            for (int64_t i = L; i < lpad; ++i) G[i] = cum;
            for (int64_t i = 0; i < L; ++i) {
              e[i] = ExpFlush(static_cast<float>(G[i]));
              el[i] = ExpFlush(static_cast<float>(G[L - 1] - G[i]));
            }
          }
          for (int64_t i = 0; i < L; ++i) {
            // exp(G_i - G_j) for j <= i (G past the chunk end repeats G[L-1]; those columns are masked).
            // Only the vectors up to the diagonal; the rest of both rows is zero.
            const int64_t jend = std::min(lpad, (i / N + 1) * N);
            for (int64_t j = 0; j < jend; ++j) drow[j] = static_cast<float>(G[i] - G[j]);
            const auto vb = hn::Set(df, beta[i]), vi = hn::Set(df, static_cast<float>(i));
            std::memset(mm + i * lp + jend, 0, static_cast<size_t>(lp - jend) * sizeof(float));
            std::memset(pm + i * lp + jend, 0, static_cast<size_t>(lp - jend) * sizeof(float));
            for (int64_t j = 0; j < jend; j += N) {
              const auto idx = hn::Iota(df, static_cast<float>(j));
              const auto dj = ExpFlush(df, hn::Load(df, drow + j));
              hn::Store(hn::IfThenElseZero(hn::Lt(idx, vi), hn::Mul(hn::Mul(vb, dj), hn::Load(df, kk + i * lp + j))), df, mm + i * lp + j);
              hn::Store(hn::IfThenElseZero(hn::Le(idx, vi), hn::Mul(dj, hn::Load(df, qk + i * lp + j))), df, pm + i * lp + j);
            }
          }
          // [Yk; Yq] = [K; Q] St.
          uint32_t* stb = stbs + (h - h0) * (dkp / 2) * dvp;
          if (bf16) {
            if (t0 == 0) pack_pairs_bf16(st, dvp, dk, dvp, stb, dvp);  // later chunks: written by the update
            gemm_bf16(2 * L, dvp, dk, xc, dkp, stb, dvp, y, dvp, 0.0f);
          } else {
            SmallGemm(2 * L, dvp, dk, x, dkp, st, dvp, y, dvp, Acc::set);
          }
          // Right-hand side beta (v - exp(G) Yk) over Yk (padding columns stay zero), then u.
          for (int64_t i = 0; i < L; ++i) {
            const float* vr = detail::row_ptr<const float>(*p.v, t0 + i) + h * dv;
            float* yi = y + i * dvp;
            for (int64_t r = 0; r < dv; ++r) yi[r] = beta[i] * (vr[r] - e[i] * yi[r]);
          }
          if (bf16) {
            pack_rows_bf16(mm, lp, L, L, pa, lp, -1.0f);
            SolveUnitLowerBf16(L, dvp, mm, pa, lp, y, dvp, ub, dvp);
          } else {
            SolveUnitLower(L, dvp, mm, lp, y, dvp);
          }
          // out = exp(G) Yq + P u. Fast mode with whole vectors per head (Dv = dvp): the product reads
          // Yq, scales its rows by exp(G) and streams the sum into the out rows (they are written once
          // and not read here, so their lines need not be fetched first); the same f32 operations as
          // writing exp(G) Yq first and adding P u to it.
          float* yq = y + L * dvp;
          const bool direct = bf16 && dv == dvp;
          if (direct) {
            pack_rows_bf16(pm, lp, L, L, pa, lp);  // ub: u, packed by the solve
            GemmBf16Extra ox;
            ox.c_in = yq;
            ox.ldc_in = dvp;
            ox.c_row_scale = e;
            ox.stream = true;
            gemm_bf16(L, dvp, L, pa, lp, ub, dvp, detail::row_ptr<float>(*p.out, t0) + h * dv, p.out->stride(0), 0.0f, true, false, nullptr,
                      0, &ox);
          } else {
            for (int64_t i = 0; i < L; ++i) {
              const auto ve = hn::Set(df, e[i]);
              for (int64_t c = 0; c < dvp; c += N) hn::Store(hn::Mul(hn::Load(df, yq + i * dvp + c), ve), df, yq + i * dvp + c);
            }
            if (bf16) {
              pack_rows_bf16(pm, lp, L, L, pa, lp);
              gemm_bf16(L, dvp, L, pa, lp, ub, dvp, yq, dvp, 1.0f, true, false);
            } else {
              SmallGemm(L, dvp, L, pm, lp, y, dvp, yq, dvp, Acc::add, true, false);
            }
          }
          if (!direct)
            for (int64_t i = 0; i < L; ++i)
              std::memcpy(detail::row_ptr<float>(*p.out, t0 + i) + h * dv, yq + i * dvp, static_cast<size_t>(dv) * sizeof(float));
          // St = exp(G_last) St + K^T (diag(exp(G_last - G)) u). Fast mode folds both scalings into
          // the packing of u and the product's update of St.
          if (bf16) {
            pack_pairs_bf16(y, dvp, L, dvp, ub, dvp, el);
            gemm_bf16(dk, dvp, L, kta, lp, ub, dvp, st, dvp, e[L - 1], false, false, stb, dvp);
          } else {
            const auto vl = hn::Set(df, e[L - 1]);
            for (int64_t c = 0; c < dk * dvp; c += N) hn::Store(hn::Mul(hn::Load(df, st + c), vl), df, st + c);
            for (int64_t i = 0; i < L; ++i) {
              const auto ve = hn::Set(df, el[i]);
              for (int64_t c = 0; c < dvp; c += N) hn::Store(hn::Mul(hn::Load(df, y + i * dvp + c), ve), df, y + i * dvp + c);
            }
            SmallGemm(dk, dvp, L, kt, lp, y, dvp, st, dvp, Acc::add);
          }
        }
      }
    }
  }
  for (int64_t h = h0; h < h1; ++h) {
    float* S = p.state + h * dv * dk;
    const float* st = states + (h - h0) * dk * dvp;
    for (int64_t r = 0; r < dv; ++r)
      for (int64_t c = 0; c < dk; ++c) S[r * dk + c] = st[c * dvp + r];
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(ChunkedHeads);

void gated_delta_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                         const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out) {
  if (q.dim(0) == 0) return;
  std::vector<float> rate, bias;
  per_head_params(a_log, dt_bias, shape.n_value_heads, rate, bias);
  const GdnArgs args{&q, &k, &v, &a, &b, rate.data(), bias.data(), shape, state.data<float>(), &out};
  const bool bf16 = matmul_precision() != MatmulPrecision::f32 && bf16_gemm_available();
  // Split over key heads when there are enough of them, so each task keeps a key head's value heads
  // together and computes its K K^T and Q K^T once; otherwise over value heads. Per-head arithmetic
  // is the same either way.
  const int64_t hk = shape.n_key_heads, group = shape.n_value_heads / hk;
  if (hk >= compute_pool().size()) {
    compute_pool().parallel_for(hk, 1, [&](int64_t k0, int64_t k1) {
      const FlushDenormals ftz;
      HWY_DYNAMIC_DISPATCH(ChunkedHeads)(args, k0 * group, k1 * group, bf16);
    });
  } else {
    compute_pool().parallel_for(shape.n_value_heads, 1, [&](int64_t h0, int64_t h1) {
      const FlushDenormals ftz;
      HWY_DYNAMIC_DISPATCH(ChunkedHeads)(args, h0, h1, bf16);
    });
  }
}

}  // namespace sanctum::ops::cpu
#endif  // HWY_ONCE
