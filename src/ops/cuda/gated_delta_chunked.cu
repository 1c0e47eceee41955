// The gated delta rule in chunks of 64 tokens (WY / UT form) on the GPU. One block per (value head,
// 32 rows of its (Dv, Dk) state) walks the chunks with its state rows in shared memory; per chunk of
// L <= 64 tokens, with G_i = sum_{t<=i} log g_t (f64), e_i = exp(G_i), el_i = exp(G_last - G_i):
//   M[i][j] = beta_i exp(G_i - G_j) k_i.k_j (j < i),  P[i][j] = exp(G_i - G_j) q_i.k_j (j <= i)
//   [Yk; Yq] = [K; Q] S^T                     (S: this block's (32, Dk) rows of the state)
//   (I + M) u = beta (v - e Yk)               (forward substitution: the UT transform)
//   out = e Yq + P u
//   S   = exp(G_last) S + (diag(el) u)^T K
// the same algebra as the CPU form (ops/cpu/gated_delta_chunked.cc). The products run on tensor cores
// (mma m16n8k8 tf32) with each f32 operand split into a tf32 high part and a tf32 remainder and three
// products summed (a_lo b_hi + a_hi b_lo + a_hi b_hi): ~f32 accuracy, which the state needs, since it
// carries rounding from chunk to chunk. The result of a chunk depends only on the state and the
// chunk's rows, so calls split at multiples of 64 tokens give the same bits as one call.
// Measured on an H200 at the Qwen3.5-27B shape (16 key / 48 value heads of 128): 2.70 ms for 4096
// tokens against 2.88 ms for the sequential kernel, 50 us against 52 us for one chunk (4-7% faster at
// 64..4096 tokens); max |difference| from the sequential kernel 2e-7. The f32 FMA path is ~10%
// slower than the sequential kernel. What it spends its time on: each of the 12 blocks that share a
// key head (3 value heads x 4 row blocks) normalises the same K and Q and forms the same K K^T and
// Q K^T, and one warp does the triangular solve while seven wait. Moving the chunk-local work (norms,
// K K^T, Q K^T, the UT inverse, P) into a kernel parallel over all (head, chunk) pairs, leaving the
// state pass with three products per chunk, is the next step.
#include <cuda_pipeline.h>

#include <string>

#include "ops/cuda/common.cuh"
#include "ops/cuda/gated_delta_args.cuh"
#include "ops/cuda/gated_delta_chunked.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kChunk = 64;  // tokens per chunk
constexpr int kRows = 32;   // state rows (value dims) per block
constexpr int kWarps = 8;
constexpr int kThreads = 32 * kWarps;
constexpr int kLdM = kChunk + 4;  // row pitch of M^T and P (= 4 mod 32: conflict-free fragment loads)
constexpr int kLdY = kRows + 8;   // row pitch of [u; Yq] (= 8 mod 32: read as a k-major operand)

struct ChunkArgs : RuleInputs {
  int dk, dv, group;
  bool qk_vec4, v_vec4;  // rows of q and k (of v) can be copied in 16-byte pieces
};

// Shared memory of one block, in floats after the f64 cumulative decays. DKP: Dk padded to 32s.
template <int DKP>
struct Layout {
  static constexpr int kLdK = DKP + 4;  // row pitch of K, Q and S (= 4 mod 32)
  static constexpr int kK = kChunk * kLdK;
  static constexpr int kQM = (kChunk * kLdK > 2 * kChunk * kLdM) ? kChunk * kLdK : 2 * kChunk * kLdM;  // Q, then M^T and P
  static constexpr int kS = kRows * kLdK;
  static constexpr int kY = 2 * kChunk * kLdY;
  static constexpr int kVectors = 4 * kChunk;  // e, el, beta, log decay
  static constexpr size_t kBytes = kChunk * sizeof(double) + sizeof(float) * (kVectors + kK + kQM + kS + kY);
};

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }
// exp(x) flushed to 0 below -80, as on the CPU: keeps denormals out of the products.
__device__ __forceinline__ float exp_flush(float x) { return x < -80.0f ? 0.0f : expf(x); }

__device__ __forceinline__ uint32_t to_tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// x = hi + lo to ~2^-22 relative, both exactly representable in tf32.
__device__ __forceinline__ void split_tf32(float x, uint32_t& hi, uint32_t& lo) {
  hi = to_tf32(x);
  lo = to_tf32(x - __uint_as_float(hi));
}
__device__ __forceinline__ void mma_tf32(float (&c)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// c[nt] += A B over k in [0, 8 ksteps) for a warp's 16 x 8NT tile: fa(m, k) and fb(k, n) read the
// operands (m < 16, n < 8 NT, tile-local). Lane (g = lane / 4, t = lane % 4) holds c[nt][e] at row
// g + 8 (e / 2), column 8 nt + 2 t + e % 2 (the mma accumulator layout) on both paths.
template <bool kTensorCores, int NT, class FA, class FB>
__device__ __forceinline__ void warp_gemm(float (&c)[NT][4], FA fa, FB fb, int ksteps) {
  const int lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3;
  if constexpr (kTensorCores) {
#pragma unroll 2
    for (int ks = 0; ks < ksteps; ++ks) {
      const int k0 = 8 * ks;
      uint32_t ah[4], al[4];
      split_tf32(fa(g, k0 + t), ah[0], al[0]);
      split_tf32(fa(g + 8, k0 + t), ah[1], al[1]);
      split_tf32(fa(g, k0 + t + 4), ah[2], al[2]);
      split_tf32(fa(g + 8, k0 + t + 4), ah[3], al[3]);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        uint32_t bh[2], bl[2];
        split_tf32(fb(k0 + t, 8 * nt + g), bh[0], bl[0]);
        split_tf32(fb(k0 + t + 4, 8 * nt + g), bh[1], bl[1]);
        mma_tf32(c[nt], al, bh);
        mma_tf32(c[nt], ah, bl);
        mma_tf32(c[nt], ah, bh);
      }
    }
  } else {
    for (int k = 0; k < 8 * ksteps; ++k) {
      const float a0 = fa(g, k), a1 = fa(g + 8, k);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) {
        const float b0 = fb(k, 8 * nt + 2 * t), b1 = fb(k, 8 * nt + 2 * t + 1);
        c[nt][0] = fmaf(a0, b0, c[nt][0]);
        c[nt][1] = fmaf(a0, b1, c[nt][1]);
        c[nt][2] = fmaf(a1, b0, c[nt][2]);
        c[nt][3] = fmaf(a1, b1, c[nt][3]);
      }
    }
  }
}

// Grid: (value heads, ceil(Dv / 32)); 256 threads; Layout<DKP>::kBytes of shared memory.
template <int DKP, bool kTensorCores>
__global__ void __launch_bounds__(kThreads, 2) gated_delta_chunked_kernel(ChunkArgs r) {
  using Lay = Layout<DKP>;
  constexpr int kLdK = Lay::kLdK;
  extern __shared__ __align__(16) unsigned char smem[];
  double* sG = reinterpret_cast<double*>(smem);       // (64) cumulative log decay
  float* se = reinterpret_cast<float*>(sG + kChunk);  // (64) exp(G_i)
  float* sel = se + kChunk;                           // (64) exp(G_last - G_i)
  float* sbeta = sel + kChunk;                        // (64)
  float* slg = sbeta + kChunk;                        // (64) raw a (sbeta: raw b, until turned into beta)
  float* sK = slg + kChunk;                           // (64, kLdK) normalised keys
  float* sQ = sK + Lay::kK;                           // (64, kLdK) normalised, scaled queries
  float* sMt = sQ;                                    // (64, kLdM) M^T, over Q once Q is used
  float* sP = sQ + kChunk * kLdM;                     // (64, kLdM) P
  float* sS = sQ + Lay::kQM;                          // (32, kLdK) this block's state rows
  float* sY = sS + Lay::kS;                           // (128, kLdY): v -> rhs -> u; then e Yq

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t4 = lane & 3;
  const int h = blockIdx.x, kh = h / r.group, row0 = blockIdx.y * kRows, dk = r.dk, dv = r.dv;
  const int64_t n = r.q.rows;
  float* state = r.state + static_cast<int64_t>(h) * dv * dk;
  // Every global read is an async copy, all of a chunk's in flight at once (one wait per chunk);
  // padding is zero-filled with plain stores. The state rows join the first chunk's copies.
  for (int i = tid; i < kRows * DKP; i += kThreads) {
    const int rr = i / DKP, c = i % DKP;
    if (row0 + rr < dv && c < dk)
      __pipeline_memcpy_async(&sS[rr * kLdK + c], state + static_cast<int64_t>(row0 + rr) * dk + c, sizeof(float));
    else sS[rr * kLdK + c] = 0.0f;
  }
  const float decay_rate = expf(load_float(r.a_log, r.a_log_kind, h));
  const float dt_bias = load_float(r.dt_bias, r.dt_bias_kind, h);

  for (int64_t t0 = 0; t0 < n; t0 += kChunk) {
    const int len = static_cast<int>(n - t0 < kChunk ? n - t0 : kChunk);
    // The chunk's raw keys and queries (key head kh), this block's value columns, and the raw a, b
    // (into slg, sbeta); zeros past len, Dk and Dv, so padding contributes nothing to any product.
    if (r.qk_vec4) {
      for (int i = tid; i < kChunk * DKP / 4; i += kThreads) {
        const int row = i / (DKP / 4), c = 4 * (i % (DKP / 4));
        if (row < len && c < dk) {
          __pipeline_memcpy_async(&sK[row * kLdK + c], r.k.data + (t0 + row) * r.k.stride + kh * dk + c, 4 * sizeof(float));
          __pipeline_memcpy_async(&sQ[row * kLdK + c], r.q.data + (t0 + row) * r.q.stride + kh * dk + c, 4 * sizeof(float));
        } else {
          *reinterpret_cast<float4*>(&sK[row * kLdK + c]) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
          *reinterpret_cast<float4*>(&sQ[row * kLdK + c]) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
      }
    } else {
      for (int i = tid; i < kChunk * DKP; i += kThreads) {
        const int row = i / DKP, c = i % DKP;
        if (row < len && c < dk) {
          __pipeline_memcpy_async(&sK[row * kLdK + c], r.k.data + (t0 + row) * r.k.stride + kh * dk + c, sizeof(float));
          __pipeline_memcpy_async(&sQ[row * kLdK + c], r.q.data + (t0 + row) * r.q.stride + kh * dk + c, sizeof(float));
        } else {
          sK[row * kLdK + c] = 0.0f;
          sQ[row * kLdK + c] = 0.0f;
        }
      }
    }
    const float* vh = r.v.data + static_cast<int64_t>(h) * dv + row0;
    if (r.v_vec4) {
      for (int i = tid; i < kChunk * kRows / 4; i += kThreads) {
        const int row = i / (kRows / 4), c = 4 * (i % (kRows / 4));
        if (row < len && row0 + c < dv) __pipeline_memcpy_async(&sY[row * kLdY + c], vh + (t0 + row) * r.v.stride + c, 4 * sizeof(float));
        else *reinterpret_cast<float4*>(&sY[row * kLdY + c]) = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    } else {
      for (int i = tid; i < kChunk * kRows; i += kThreads) {
        const int row = i / kRows, c = i % kRows;
        if (row < len && row0 + c < dv) __pipeline_memcpy_async(&sY[row * kLdY + c], vh + (t0 + row) * r.v.stride + c, sizeof(float));
        else sY[row * kLdY + c] = 0.0f;
      }
    }
    if (tid < len) {
      __pipeline_memcpy_async(&slg[tid], r.a.data + (t0 + tid) * r.a.stride + h, sizeof(float));
      __pipeline_memcpy_async(&sbeta[tid], r.b.data + (t0 + tid) * r.b.stride + h, sizeof(float));
    }
    __pipeline_commit();
    __pipeline_wait_prior(0);
    __syncthreads();

    // L2-normalise the rows (q also scaled by 1/sqrt(Dk)); warp 0 also takes the cumulative decays.
#pragma unroll 4  // interleaves the rows' reductions
    for (int row = warp; row < 2 * kChunk; row += kWarps) {
      float* x = row < kChunk ? sK + row * kLdK : sQ + (row - kChunk) * kLdK;
      float ss = 0.0f;
      for (int c = lane; c < DKP; c += 32) ss += x[c] * x[c];
      ss = warp_sum(ss);
      const float inv = (row < kChunk ? 1.0f : r.q_scale) / sqrtf(ss + 1e-6f);
      for (int c = lane; c < DKP; c += 32) x[c] *= inv;
    }
    if (warp == 0) {
      // Tokens 2 lane, 2 lane + 1: beta and log decay from the raw b and a (padding: no update, no
      // decay), then the inclusive scan of the log decays.
      double lg[2];
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = 2 * lane + e;
        float beta = 0.0f, l = 0.0f;
        if (i < len) {
          beta = sigmoid(sbeta[i]);
          l = -decay_rate * softplus(slg[i] + dt_bias);
        }
        sbeta[i] = beta;
        lg[e] = l;
      }
      const double l0 = lg[0], l1 = lg[1];
      double incl = l0 + l1;
      for (int o = 1; o < 32; o <<= 1) {
        const double y = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += y;
      }
      const double g0 = incl - l1, last = __shfl_sync(0xffffffffu, incl, 31);
      sG[2 * lane] = g0;
      sG[2 * lane + 1] = incl;
      se[2 * lane] = exp_flush(static_cast<float>(g0));
      se[2 * lane + 1] = exp_flush(static_cast<float>(incl));
      sel[2 * lane] = exp_flush(static_cast<float>(last - g0));
      sel[2 * lane + 1] = exp_flush(static_cast<float>(last - incl));
    }
    __syncthreads();

    // Warp w: rows 16w.. of [K; Q] S^T (all 32 columns), and 5 of the 40 lower-triangle 16x8 tiles of
    // K K^T and Q K^T (kept in registers until every warp is done reading Q).
    {
      const float* xa = (warp < 4 ? sK : sQ) + (warp & 3) * 16 * kLdK;
      float c[4][4] = {};
      warp_gemm<kTensorCores, 4>(
          c, [&](int m, int kk) { return xa[m * kLdK + kk]; }, [&](int kk, int nn) { return sS[nn * kLdK + kk]; }, DKP / 8);
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = (warp & 3) * 16 + g + 8 * (e >> 1), col = 8 * nt + 2 * t4 + (e & 1);
          if (warp < 4) {
            float* y = sY + i * kLdY + col;
            *y = sbeta[i] * (*y - se[i] * c[nt][e]);  // rhs = beta (v - e Yk)
          } else {
            sY[(kChunk + i) * kLdY + col] = se[i] * c[nt][e];  // e Yq
          }
        }
    }
    float mp[5][1][4];
#pragma unroll
    for (int s = 0; s < 5; ++s) {
      const int tile = warp + kWarps * s, idx = tile % 20;
      const int mt = idx < 2 ? 0 : idx < 6 ? 1 : idx < 12 ? 2 : 3, nt = idx - mt * (mt + 1);
      const float* xa = (tile < 20 ? sK : sQ) + mt * 16 * kLdK;
      const float* xb = sK + nt * 8 * kLdK;
#pragma unroll
      for (int e = 0; e < 4; ++e) mp[s][0][e] = 0.0f;
      warp_gemm<kTensorCores, 1>(
          mp[s], [&](int m, int kk) { return xa[m * kLdK + kk]; }, [&](int kk, int nn) { return xb[nn * kLdK + kk]; }, DKP / 8);
    }
    __syncthreads();
#pragma unroll
    for (int s = 0; s < 5; ++s) {
      const int tile = warp + kWarps * s, idx = tile % 20;
      const int mt = idx < 2 ? 0 : idx < 6 ? 1 : idx < 12 ? 2 : 3, nt = idx - mt * (mt + 1);
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = mt * 16 + g + 8 * (e >> 1), j = nt * 8 + 2 * t4 + (e & 1);
        const float d = j <= i ? exp_flush(static_cast<float>(sG[i] - sG[j])) : 0.0f;
        if (tile < 20) sMt[j * kLdM + i] = j < i ? sbeta[i] * d * mp[s][0][e] : 0.0f;
        else sP[i * kLdM + j] = d * mp[s][0][e];
      }
    }
    __syncthreads();

    // (I + M) u = rhs by forward substitution, one column per lane of warp 0, in two halves of 32
    // rows held in registers: once u_j is final it is subtracted from every later row (independent
    // updates, float4 reads of row j of M^T).
    if (warp == 0) {
#pragma unroll
      for (int base = 0; base < kChunk; base += 32) {
        float x[32];
#pragma unroll
        for (int i = 0; i < 32; ++i) x[i] = sY[(base + i) * kLdY + lane];
        for (int j = 0; j < base; ++j) {  // the first half's u, final in shared memory
          const float uj = sY[j * kLdY + lane];
          const float* mrow = sMt + j * kLdM + base;
#pragma unroll
          for (int i4 = 0; i4 < 32; i4 += 4) {
            const float4 m4 = *reinterpret_cast<const float4*>(mrow + i4);
            x[i4 + 0] -= m4.x * uj;
            x[i4 + 1] -= m4.y * uj;
            x[i4 + 2] -= m4.z * uj;
            x[i4 + 3] -= m4.w * uj;
          }
        }
#pragma unroll
        for (int j = 0; j < 32; ++j) {
          const float uj = x[j];
          sY[(base + j) * kLdY + lane] = uj;
          const float* mrow = sMt + (base + j) * kLdM + base;
#pragma unroll
          for (int i4 = (j + 1) / 4 * 4; i4 < 32; i4 += 4) {
            const float4 m4 = *reinterpret_cast<const float4*>(mrow + i4);
            if (i4 + 0 > j) x[i4 + 0] -= m4.x * uj;
            if (i4 + 1 > j) x[i4 + 1] -= m4.y * uj;
            if (i4 + 2 > j) x[i4 + 2] -= m4.z * uj;
            if (i4 + 3 > j) x[i4 + 3] -= m4.w * uj;
          }
        }
      }
    }
    __syncthreads();

    // out = e Yq + P u: warp w takes rows 16 (w / 2).. and columns 16 (w % 2).. (P is zero past the
    // diagonal, so k stops at the end of the row block).
    {
      const int mt = warp >> 1, nb = (warp & 1) * 16;
      float c[2][4];
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[nt][e] = sY[(kChunk + mt * 16 + g + 8 * (e >> 1)) * kLdY + nb + 8 * nt + 2 * t4 + (e & 1)];
      warp_gemm<kTensorCores, 2>(
          c, [&](int m, int kk) { return sP[(mt * 16 + m) * kLdM + kk]; }, [&](int kk, int nn) { return sY[kk * kLdY + nb + nn]; },
          2 * (mt + 1));
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int i = mt * 16 + g + 8 * (e >> 1), col = nb + 8 * nt + 2 * t4 + (e & 1);
          if (i < len && row0 + col < dv) r.out.data[(t0 + i) * r.out.stride + static_cast<int64_t>(h) * dv + row0 + col] = c[nt][e];
        }
    }
    // S = exp(G_last) S + (diag(el) u)^T K: warp w takes state rows 16 (w % 2).. and a quarter of Dk.
    {
      constexpr int NT = DKP / 32;
      const int mt = warp & 1, cb = (warp >> 1) * NT * 8;
      const float decay = se[kChunk - 1];
      float c[NT][4];
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) c[nt][e] = decay * sS[(mt * 16 + g + 8 * (e >> 1)) * kLdK + cb + 8 * nt + 2 * t4 + (e & 1)];
      warp_gemm<kTensorCores, NT>(
          c, [&](int m, int kk) { return sel[kk] * sY[kk * kLdY + mt * 16 + m]; }, [&](int kk, int nn) { return sK[kk * kLdK + cb + nn]; },
          kChunk / 8);
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int e = 0; e < 4; ++e) sS[(mt * 16 + g + 8 * (e >> 1)) * kLdK + cb + 8 * nt + 2 * t4 + (e & 1)] = c[nt][e];
    }
    __syncthreads();
  }
  for (int i = tid; i < kRows * DKP; i += kThreads) {
    const int rr = i / DKP, c = i % DKP;
    if (row0 + rr < dv && c < dk) state[static_cast<int64_t>(row0 + rr) * dk + c] = sS[rr * kLdK + c];
  }
}

template <int DKP, bool kTensorCores>
void launch(const ChunkArgs& r, int64_t hv) {
  constexpr size_t bytes = Layout<DKP>::kBytes;
  auto kernel = gated_delta_chunked_kernel<DKP, kTensorCores>;
  check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
             "gated_delta_chunked shared memory");
  const dim3 grid(static_cast<unsigned>(hv), static_cast<unsigned>((r.dv + kRows - 1) / kRows));
  kernel<<<grid, kThreads, bytes, stream()>>>(r);
}

template <bool kTensorCores>
void launch_for_key_dim(const ChunkArgs& r, int64_t hv) {
  if (r.dk <= 32) launch<32, kTensorCores>(r, hv);
  else if (r.dk <= 64) launch<64, kTensorCores>(r, hv);
  else launch<128, kTensorCores>(r, hv);
}

}  // namespace

void gated_delta_chunked(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                         const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out, ChunkedMath math) {
  check(shape.key_dim <= kChunkedMaxKeyDim, ErrorKind::unsupported,
        "[gated_delta_rule] the chunked cuda kernel takes key heads up to " + std::to_string(kChunkedMaxKeyDim) + " dims");
  if (q.dim(0) == 0) return;
  ChunkArgs r;
  static_cast<RuleInputs&>(r) = rule_inputs(q, k, v, a, b, a_log, dt_bias, shape, state, out);
  r.dk = static_cast<int>(shape.key_dim);
  r.dv = static_cast<int>(shape.value_dim);
  r.group = static_cast<int>(shape.n_value_heads / shape.n_key_heads);
  r.qk_vec4 = aligned16(r.q.data) && aligned16(r.k.data) && r.q.stride % 4 == 0 && r.k.stride % 4 == 0 && r.dk % 4 == 0;
  r.v_vec4 = aligned16(r.v.data) && r.v.stride % 4 == 0 && r.dv % 4 == 0;
  if (math == ChunkedMath::tensor_cores) launch_for_key_dim<true>(r, shape.n_value_heads);
  else launch_for_key_dim<false>(r, shape.n_value_heads);
  check_launch("gated_delta_chunked");
}

}  // namespace sanctum::ops::cuda
