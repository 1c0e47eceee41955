// GatedDeltaNet on the GPU: the causal depthwise conv with its rolling state, and the gated delta
// rule. The rule runs all value heads at once: each group of 8 lanes owns a few rows of one head's
// (Dv, Dk) f32 state in registers (Dk split 8 ways, so a row's dot product is 3 shuffles) and walks
// the tokens; the block stages tiles of tokens' q/k/v/a/b in shared memory with async copies one
// tile ahead and computes each token's norms, gate and decay once per block, so a token step waits
// on no global load. Decode is one launch per layer and the state never leaves registers in a call.
// Prompts take the chunked form (gated_delta_chunked.cu).
#include <cuda_pipeline.h>

#include <algorithm>

#include "ops/cuda/common.cuh"
#include "ops/cuda/gated_delta_args.cuh"
#include "ops/cuda/gated_delta_chunked.h"
#include "ops/cuda/kernels.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kMaxKernel = 8;

// One token of the conv for one channel: the input x joins the window (window[j] = input at
// t - hist + j), the output is silu of the taps' dot product, and the window moves on by one.
__device__ __forceinline__ float conv_step(float (&window)[kMaxKernel], const float (&w)[kMaxKernel], int kernel, float x) {
  const int hist = kernel - 1;
  window[hist] = x;
  float acc = 0.0f;
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j)
    if (j < kernel) acc += w[j] * window[j];
#pragma unroll
  for (int j = 0; j + 1 < kMaxKernel; ++j)
    if (j < hist) window[j] = window[j + 1];
  return silu(acc);
}

// Thread per channel, sequential over tokens with the window in registers.
__device__ __forceinline__ void conv1d_silu_channel(Rows<const float> x, float* state, int64_t state_stride, const float* taps, int kernel,
                                                    int64_t channels, Rows<float> out, int64_t c) {
  const int hist = kernel - 1;
  float window[kMaxKernel];  // window[j] = input at t - hist + j
  float w[kMaxKernel];
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j) {
    window[j] = (j < hist) ? state[j * state_stride + c] : 0.0f;
    w[j] = j < kernel ? taps[j * channels + c] : 0.0f;
  }
  for (int64_t t = 0; t < x.rows; ++t) {
    out.data[t * out.stride + c] = conv_step(window, w, kernel, x.data[t * x.stride + c]);
  }
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j)
    if (j < hist) state[j * state_stride + c] = window[j];
}

__global__ void conv1d_silu_kernel(Rows<const float> x, float* state, int64_t state_stride, const float* taps, int kernel, int64_t channels,
                                   Rows<float> out) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c < channels) conv1d_silu_channel(x, state, state_stride, taps, kernel, channels, out, c);
}

// Up to kBatchRows sequences of one token each per launch: their rows and their own states, passed
// by value (no upload, and a recorded launch keeps them).
constexpr int kBatchRows = 64;
struct BatchRows {
  float* state[kBatchRows];
  int64_t row[kBatchRows];
};

// The kernel above for sequence blockIdx.y of the batch: one row, its own state.
__global__ void conv1d_silu_rows_kernel(Rows<const float> x, BatchRows batch, int64_t state_stride, const float* taps, int kernel,
                                        int64_t channels, Rows<float> out) {
  wait_for_previous();
  allow_next_early();
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const int64_t row = batch.row[blockIdx.y];
  const Rows<const float> xr{x.data + row * x.stride, 1, x.cols, x.stride};
  const Rows<float> outr{out.data + row * out.stride, 1, out.cols, out.stride};
  conv1d_silu_channel(xr, batch.state[blockIdx.y], state_stride, taps, kernel, channels, outr, c);
}

// Prefill: thread per (channel, run of kConvRun tokens). Reads inputs t - hist .. t from x, or from
// the state rows before the first token, and writes only out; the state update is a second kernel,
// so no thread can overwrite state rows another still reads.
constexpr int kConvRun = 8;
__global__ void conv1d_silu_parallel(Rows<const float> x, const float* state, int64_t state_stride, const float* taps, int kernel,
                                     int64_t channels, Rows<float> out) {
  const int64_t c = blockIdx.y * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  const int64_t t0 = static_cast<int64_t>(blockIdx.x) * kConvRun;
  const int hist = kernel - 1;
  float window[kMaxKernel];  // window[j] = input at t - hist + j
  float w[kMaxKernel];
#pragma unroll
  for (int j = 0; j < kMaxKernel; ++j) {
    w[j] = j < kernel ? taps[j * channels + c] : 0.0f;
    const int64_t u = t0 - hist + j;
    window[j] = j >= hist ? 0.0f : u >= 0 ? x.data[u * x.stride + c] : state[(hist + u) * state_stride + c];
  }
#pragma unroll
  for (int tt = 0; tt < kConvRun; ++tt) {
    const int64_t t = t0 + tt;
    if (t >= x.rows) break;
    out.data[t * out.stride + c] = conv_step(window, w, kernel, x.data[t * x.stride + c]);
  }
}

// state = last hist rows of [state; x]. Row j takes [state; x] row n + j > j, so walking j upwards a
// thread reads every state row before it overwrites it.
__global__ void conv1d_state_update(Rows<const float> x, float* state, int64_t state_stride, int hist, int64_t channels) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= channels) return;
  for (int j = 0; j < hist; ++j) {
    const int64_t src = x.rows + j;
    state[j * state_stride + c] = src >= hist ? x.data[(src - hist) * x.stride + c] : state[src * state_stride + c];
  }
}

struct RuleArgs : RuleInputs {
  int64_t dk, dv, group;
};

__device__ __forceinline__ float softplus(float x) { return x > 20.0f ? x : log1pf(expf(x)); }

constexpr int kGroupLanes = 8;  // lanes sharing one state row

// E4: float4s of a row per lane (Dk <= 32 * E4); R: rows per lane group; W: warps per block.
// Lane gl (of 8) in group grp of warp w holds rows row0 + (4 w + grp) R + i, elements
// 4 (gl + 8 e) + j. Grid: (value heads, row blocks).
template <int E4, int R, int W>
__global__ void __launch_bounds__(W * 32) gated_delta_kernel(RuleArgs r) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  constexpr int DKP = 32 * E4, ROWS = 4 * W * R, T = E4 >= 8 ? 8 : 16;  // T tokens per staged tile
  __shared__ __align__(16) float sq[2][T][DKP];
  __shared__ __align__(16) float sk[2][T][DKP];
  __shared__ float sv[2][T][ROWS];
  __shared__ float sa[2][T], sb[2][T];
  __shared__ float4 coef[T];  // per token: 1/|k|, q_scale/|q|, beta, decay
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, grp = lane >> 3, gl = lane & 7;
  const int64_t h = blockIdx.x, kh = h / r.group, dk = r.dk, dv = r.dv, n = r.q.rows;
  const int64_t block_row0 = static_cast<int64_t>(blockIdx.y) * ROWS;
  const int local0 = (4 * warp + grp) * R;

  // Zero the tiles once: the padding past Dk, the rows past Dv and tokens past n are never copied.
  for (int i = threadIdx.x; i < 2 * T * DKP; i += blockDim.x) {
    (&sq[0][0][0])[i] = 0.0f;
    (&sk[0][0][0])[i] = 0.0f;
  }
  for (int i = threadIdx.x; i < 2 * T * ROWS; i += blockDim.x) (&sv[0][0][0])[i] = 0.0f;
  for (int i = threadIdx.x; i < 2 * T; i += blockDim.x) {
    (&sa[0][0])[i] = 0.0f;
    (&sb[0][0])[i] = 0.0f;
  }
  __syncthreads();

  // Queues the async copies of tile `tile` into buffer `buf` (one commit group per tile).
  auto stage = [&](int64_t tile, int buf) {
    const int64_t t0 = tile * T;
    const int len = static_cast<int>(n - t0 < T ? n - t0 : T);
    for (int i = threadIdx.x; i < len * dk; i += blockDim.x) {
      const int t = static_cast<int>(i / dk), c = static_cast<int>(i % dk);
      __pipeline_memcpy_async(&sq[buf][t][c], r.q.data + (t0 + t) * r.q.stride + kh * dk + c, sizeof(float));
      __pipeline_memcpy_async(&sk[buf][t][c], r.k.data + (t0 + t) * r.k.stride + kh * dk + c, sizeof(float));
    }
    for (int i = threadIdx.x; i < len * ROWS; i += blockDim.x) {
      const int t = i / ROWS, lr = i % ROWS;
      if (block_row0 + lr < dv)
        __pipeline_memcpy_async(&sv[buf][t][lr], r.v.data + (t0 + t) * r.v.stride + h * dv + block_row0 + lr, sizeof(float));
    }
    for (int t = threadIdx.x; t < len; t += blockDim.x) {
      __pipeline_memcpy_async(&sa[buf][t], r.a.data + (t0 + t) * r.a.stride + h, sizeof(float));
      __pipeline_memcpy_async(&sb[buf][t], r.b.data + (t0 + t) * r.b.stride + h, sizeof(float));
    }
    __pipeline_commit();
  };
  stage(0, 0);

  float* s = r.state + h * dv * dk;
  float S[R][E4][4];
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int64_t row = block_row0 + local0 + i;
#pragma unroll
    for (int e = 0; e < E4; ++e)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t c = 4 * (gl + kGroupLanes * e) + j;
        S[i][e][j] = (row < dv && c < dk) ? s[row * dk + c] : 0.0f;
      }
  }
  const float A = expf(load_float(r.a_log, r.a_log_kind, h));
  const float dt_bias = load_float(r.dt_bias, r.dt_bias_kind, h);

  const int64_t tiles = (n + T - 1) / T;
  for (int64_t tile = 0; tile < tiles; ++tile) {
    const int buf = static_cast<int>(tile & 1);
    __syncthreads();  // every thread is done with the other buffer and with coef (previous tile)
    if (tile + 1 < tiles) {
      stage(tile + 1, buf ^ 1);
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();  // this tile's copies, made by every thread, are visible
    const int64_t t0 = tile * T;
    const int len = static_cast<int>(n - t0 < T ? n - t0 : T);
    for (int t = warp; t < len; t += W) {
      float qss = 0.0f, kss = 0.0f;
      for (int c = lane; c < DKP; c += 32) {
        qss += sq[buf][t][c] * sq[buf][t][c];
        kss += sk[buf][t][c] * sk[buf][t][c];
      }
      qss = warp_sum(qss);
      kss = warp_sum(kss);
      if (lane == 0)
        coef[t] = make_float4(1.0f / sqrtf(kss + 1e-6f), r.q_scale / sqrtf(qss + 1e-6f), sigmoid(sb[buf][t]),
                              expf(-A * softplus(sa[buf][t] + dt_bias)));
    }
    __syncthreads();
    for (int t = 0; t < len; ++t) {
      const float4 cf = coef[t];  // x: 1/|k|, y: q scale, z: beta, w: decay
      float kk[E4][4], qq[E4][4];
#pragma unroll
      for (int e = 0; e < E4; ++e) {
        const float4 k4 = reinterpret_cast<const float4*>(&sk[buf][t][0])[gl + kGroupLanes * e];
        const float4 q4 = reinterpret_cast<const float4*>(&sq[buf][t][0])[gl + kGroupLanes * e];
        kk[e][0] = k4.x, kk[e][1] = k4.y, kk[e][2] = k4.z, kk[e][3] = k4.w;
        qq[e][0] = q4.x, qq[e][1] = q4.y, qq[e][2] = q4.z, qq[e][3] = q4.w;
      }
      // S = decay S; (S k_raw) over this lane's elements, then over the 8 lanes of the group.
      float d[R];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        float acc = 0.0f;
#pragma unroll
        for (int e = 0; e < E4; ++e)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            S[i][e][j] *= cf.w;
            acc += S[i][e][j] * kk[e][j];
          }
        d[i] = acc;
      }
#pragma unroll
      for (int o = 1; o < kGroupLanes; o <<= 1)
#pragma unroll
        for (int i = 0; i < R; ++i) d[i] += __shfl_xor_sync(0xffffffffu, d[i], o);
      // With k = k_raw / |k|: delta = beta (v - S k), S += delta k, y = S q.
      float y[R];
#pragma unroll
      for (int i = 0; i < R; ++i) {
        const float u = (sv[buf][t][local0 + i] - d[i] * cf.x) * cf.z * cf.x;
        float acc = 0.0f;
#pragma unroll
        for (int e = 0; e < E4; ++e)
#pragma unroll
          for (int j = 0; j < 4; ++j) {
            S[i][e][j] += u * kk[e][j];
            acc += S[i][e][j] * qq[e][j];
          }
        y[i] = acc;
      }
#pragma unroll
      for (int o = 1; o < kGroupLanes; o <<= 1)
#pragma unroll
        for (int i = 0; i < R; ++i) y[i] += __shfl_xor_sync(0xffffffffu, y[i], o);
      if (gl == 0) {
        float* o = r.out.data + (t0 + t) * r.out.stride + h * dv + block_row0 + local0;
#pragma unroll
        for (int i = 0; i < R; ++i)
          if (block_row0 + local0 + i < dv) o[i] = y[i] * cf.y;
      }
    }
  }
#pragma unroll
  for (int i = 0; i < R; ++i) {
    const int64_t row = block_row0 + local0 + i;
#pragma unroll
    for (int e = 0; e < E4; ++e)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int64_t c = 4 * (gl + kGroupLanes * e) + j;
        if (row < dv && c < dk) s[row * dk + c] = S[i][e][j];
      }
  }
}

// One token (row t of q, k, v, a, b and out) against `state`: the walk above without its staging.
// Each warp computes the token's norms, gate and decay itself from global loads (in the walk's order
// of summation, so the bits are the walk's), and each group of 8 lanes updates one state row in
// registers.
template <int E4, int W>
__device__ __forceinline__ void gated_delta_step(const RuleArgs& r, int64_t t, float* state) {
  const float A = expf(load_float(r.a_log, r.a_log_kind, blockIdx.x));  // weights: read before the wait
  const float dt_bias = load_float(r.dt_bias, r.dt_bias_kind, blockIdx.x);
  wait_for_previous();  // launched early (common.cuh): nothing else is read before the kernel ahead ends
  allow_next_early();
  constexpr int DKP = 32 * E4;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, gl = lane & 7;
  const int64_t h = blockIdx.x, kh = h / r.group, dk = r.dk, dv = r.dv;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * 4 * W + 4 * warp + (lane >> 3);
  const float* q = r.q.data + t * r.q.stride + kh * dk;
  const float* k = r.k.data + t * r.k.stride + kh * dk;

  float qss = 0.0f, kss = 0.0f;
  for (int c = lane; c < DKP; c += 32) {
    const float qc = c < dk ? q[c] : 0.0f, kc = c < dk ? k[c] : 0.0f;
    qss += qc * qc;
    kss += kc * kc;
  }
  qss = warp_sum(qss);
  kss = warp_sum(kss);
  const float inv_k = 1.0f / sqrtf(kss + 1e-6f), q_scale = r.q_scale / sqrtf(qss + 1e-6f);
  const float beta = sigmoid(r.b.data[t * r.b.stride + h]), decay = expf(-A * softplus(r.a.data[t * r.a.stride + h] + dt_bias));

  float S[E4][4], kk[E4][4], qq[E4][4];
  float* s = state + (h * dv + (row < dv ? row : 0)) * dk;
#pragma unroll
  for (int e = 0; e < E4; ++e)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = 4 * (gl + kGroupLanes * e) + j;
      S[e][j] = row < dv && c < dk ? s[c] : 0.0f;
      kk[e][j] = c < dk ? k[c] : 0.0f;
      qq[e][j] = c < dk ? q[c] : 0.0f;
    }
  float d = 0.0f;
#pragma unroll
  for (int e = 0; e < E4; ++e)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      S[e][j] *= decay;
      d += S[e][j] * kk[e][j];
    }
#pragma unroll
  for (int o = 1; o < kGroupLanes; o <<= 1) d += __shfl_xor_sync(0xffffffffu, d, o);
  const float u = ((row < dv ? r.v.data[t * r.v.stride + h * dv + row] : 0.0f) - d * inv_k) * beta * inv_k;
  float y = 0.0f;
#pragma unroll
  for (int e = 0; e < E4; ++e)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      S[e][j] += u * kk[e][j];
      y += S[e][j] * qq[e][j];
    }
#pragma unroll
  for (int o = 1; o < kGroupLanes; o <<= 1) y += __shfl_xor_sync(0xffffffffu, y, o);
  if (row >= dv) return;
  if (gl == 0) r.out.data[t * r.out.stride + h * dv + row] = y * q_scale;
#pragma unroll
  for (int e = 0; e < E4; ++e)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int64_t c = 4 * (gl + kGroupLanes * e) + j;
      if (c < dk) s[c] = S[e][j];
    }
}

// One token (decode). Grid: (value heads, row blocks of 4 W rows).
template <int E4, int W>
__global__ void __launch_bounds__(W * 32) gated_delta_step_kernel(RuleArgs r) {
  gated_delta_step<E4, W>(r, 0, r.state);
}

// One token of each sequence of a batch, its own state. Grid: (value heads, row blocks, sequences).
template <int E4, int W>
__global__ void __launch_bounds__(W * 32) gated_delta_rows_kernel(RuleArgs r, BatchRows batch) {
  gated_delta_step<E4, W>(r, batch.row[blockIdx.z], batch.state[blockIdx.z]);
}

template <int E4, int R>
void launch_rule(const RuleArgs& r, int64_t hv) {
  constexpr int kWarps = 4, kRows = 4 * kWarps * R;
  const unsigned row_blocks = static_cast<unsigned>((r.dv + kRows - 1) / kRows);
  launch_early(gated_delta_kernel<E4, R, kWarps>, dim3(static_cast<unsigned>(hv), row_blocks), dim3(kWarps * 32), 0, r);
}

template <int E4>
void launch_rule_rows(const RuleArgs& r, int64_t hv) {
  if (r.q.rows == 1) {
    constexpr int kWarps = 4;
    launch_early(gated_delta_step_kernel<E4, kWarps>,
                 dim3(static_cast<unsigned>(hv), static_cast<unsigned>((r.dv + 4 * kWarps - 1) / (4 * kWarps))), dim3(kWarps * 32), 0, r);
    return;
  }
  // Two rows per lane group halve the per-block staging for long prefills; one row gives decode
  // twice the blocks to load and store the state with.
  if (r.q.rows >= 64) launch_rule<E4, 2>(r, hv);
  else launch_rule<E4, 1>(r, hv);
}

template <int E4>
void launch_rule_batch(const RuleArgs& r, const BatchRows& batch, int count, int64_t hv) {
  constexpr int kWarps = 4;
  launch_early(gated_delta_rows_kernel<E4, kWarps>,
               dim3(static_cast<unsigned>(hv), static_cast<unsigned>((r.dv + 4 * kWarps - 1) / (4 * kWarps)), static_cast<unsigned>(count)),
               dim3(kWarps * 32), 0, r, batch);
}

// Calls launch(batch, count) for each run of up to kBatchRows of the rows and their states.
template <class Launch>
void for_each_batch(std::span<const int64_t> rows, std::span<Tensor* const> states, Launch&& launch) {
  for (size_t i0 = 0; i0 < rows.size(); i0 += kBatchRows) {
    const int count = static_cast<int>(std::min<size_t>(kBatchRows, rows.size() - i0));
    BatchRows batch{};
    for (int i = 0; i < count; ++i) {
      batch.state[i] = states[i0 + i]->data<float>();
      batch.row[i] = rows[i0 + i];
    }
    launch(batch, count);
  }
}

}  // namespace

void causal_conv1d_silu_taps_rows(const Tensor& x, std::span<const int64_t> rows, std::span<Tensor* const> states, const Tensor& taps,
                                  Tensor& out) {
  const int kernel = static_cast<int>(taps.dim(0));
  check(kernel <= kMaxKernel, ErrorKind::unsupported,
        "[causal_conv1d_silu] cuda supports conv kernels up to " + std::to_string(kMaxKernel) + " taps, got " + std::to_string(kernel));
  const int64_t channels = x.dim(1);
  if (channels == 0 || rows.empty()) return;
  const auto rx = rows_of<const float>(x, "causal_conv1d_silu_taps_rows");
  const auto ro = rows_of<float>(out, "causal_conv1d_silu_taps_rows");
  const int64_t state_stride = kernel > 1 ? states[0]->stride(0) : 0;
  for_each_batch(rows, states, [&](const BatchRows& batch, int count) {
    launch_early(conv1d_silu_rows_kernel, dim3(blocks_for(channels, 128), static_cast<unsigned>(count)), dim3(128), 0, rx, batch,
                 state_stride, taps.data<float>(), kernel, channels, ro);
  });
  check_launch("causal_conv1d_silu_taps_rows");
}

void gated_delta_rule_rows(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                           const Tensor& dt_bias, const GatedDeltaShape& shape, std::span<const int64_t> rows,
                           std::span<Tensor* const> states, Tensor& out) {
  if (rows.empty()) return;
  check(shape.key_dim <= 256, ErrorKind::unsupported, "[gated_delta_rule] cuda supports key heads up to 256 dims");
  RuleArgs r;
  static_cast<RuleInputs&>(r) = rule_inputs(q, k, v, a, b, a_log, dt_bias, shape, *states[0], out);
  r.dk = shape.key_dim;
  r.dv = shape.value_dim;
  r.group = shape.n_value_heads / shape.n_key_heads;
  const int64_t e4 = (shape.key_dim + 31) / 32, hv = shape.n_value_heads;
  for_each_batch(rows, states, [&](const BatchRows& batch, int count) {
    if (e4 <= 1) launch_rule_batch<1>(r, batch, count, hv);
    else if (e4 <= 2) launch_rule_batch<2>(r, batch, count, hv);
    else if (e4 <= 4) launch_rule_batch<4>(r, batch, count, hv);
    else launch_rule_batch<8>(r, batch, count, hv);
  });
  check_launch("gated_delta_rule_rows");
}

void causal_conv1d_silu_taps(const Tensor& x, Tensor& state, const Tensor& taps, Tensor& out) {
  const int kernel = static_cast<int>(taps.dim(0));
  check(kernel <= kMaxKernel, ErrorKind::unsupported,
        "[causal_conv1d_silu] cuda supports conv kernels up to " + std::to_string(kMaxKernel) + " taps, got " + std::to_string(kernel));
  const auto rx = rows_of<const float>(x, "causal_conv1d_silu");
  const auto ro = rows_of<float>(out, "causal_conv1d_silu");
  const int64_t channels = x.dim(1);
  if (channels == 0) return;
  const int64_t state_stride = kernel > 1 ? state.stride(0) : 0;
  // Decode and short batches: one launch, sequential over the few tokens.
  if (rx.rows <= 2 * kConvRun) {
    launch_early(conv1d_silu_kernel, dim3(blocks_for(channels, 128)), dim3(128), 0, rx, state.data<float>(), state_stride,
                 taps.data<float>(), kernel, channels, ro);
    check_launch("causal_conv1d_silu");
    return;
  }
  const dim3 grid(blocks_for(rx.rows, kConvRun), blocks_for(channels, 128));
  conv1d_silu_parallel<<<grid, 128, 0, stream()>>>(rx, state.data<float>(), state_stride, taps.data<float>(), kernel, channels, ro);
  check_launch("causal_conv1d_silu");
  if (kernel > 1) {
    conv1d_state_update<<<blocks_for(channels, 128), 128, 0, stream()>>>(rx, state.data<float>(), state_stride, kernel - 1, channels);
    check_launch("causal_conv1d_silu state");
  }
}

void gated_delta_rule(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& a, const Tensor& b, const Tensor& a_log,
                      const Tensor& dt_bias, const GatedDeltaShape& shape, Tensor& state, Tensor& out, GatedDeltaAlgorithm algorithm) {
  if (q.dim(0) == 0) return;
  // `chunked` (prompts: the GatedDeltaNet block asks for it over whole chunks at multiples of 64 of
  // the position, `automatic` from 64 tokens on) takes the chunked kernel, whatever the length, so a
  // chunk gets the same bits however the prompt was split; decode, verification rows and partial
  // chunks walk the tokens here.
  if (kChunkedPrefill && algorithm == GatedDeltaAlgorithm::chunked && shape.key_dim <= kChunkedMaxKeyDim)
    return gated_delta_chunked(q, k, v, a, b, a_log, dt_bias, shape, state, out);
  check(shape.key_dim <= 256, ErrorKind::unsupported, "[gated_delta_rule] cuda supports key heads up to 256 dims");
  RuleArgs r;
  static_cast<RuleInputs&>(r) = rule_inputs(q, k, v, a, b, a_log, dt_bias, shape, state, out);
  r.dk = shape.key_dim;
  r.dv = shape.value_dim;
  r.group = shape.n_value_heads / shape.n_key_heads;
  const int64_t e4 = (shape.key_dim + 31) / 32;
  if (e4 <= 1) launch_rule_rows<1>(r, shape.n_value_heads);
  else if (e4 <= 2) launch_rule_rows<2>(r, shape.n_value_heads);
  else if (e4 <= 4) launch_rule_rows<4>(r, shape.n_value_heads);
  else launch_rule_rows<8>(r, shape.n_value_heads);
  check_launch("gated_delta_rule");
}

}  // namespace sanctum::ops::cuda
