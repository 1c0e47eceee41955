// RMSNorm (optionally with the "w - 1" storage offset) and the GatedDeltaNet output norm gated by
// silu(z). One block per row (rms_norm) or per (row, head) (gated_rms_norm); sums in f32. RMSNorm
// writes f32 or, for a prompt GEMM's input, bf16; add_rms_norm's delta may be a prompt GEMM's bf16.
#include <algorithm>

#include "base/tuning.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/norm_chunks.cuh"
#include "ops/cuda/norm_split.cuh"

namespace sanctum::ops::cuda {

namespace {

// Rows of up to kHeld values per thread keep them in registers, and their weights are loaded before
// the kernel waits for its input (the weights never change within a step), so the loads after the
// row's sum are gone. Longer rows take the plain loops. The same operations in the same order.
constexpr int kHeld = 8;

__device__ __forceinline__ bool held(int64_t cols) { return cols <= static_cast<int64_t>(kHeld) * blockDim.x; }

__device__ __forceinline__ void load_weights(const void* w, FloatKind kind, float offset, int64_t cols, float (&wv)[kHeld]) {
#pragma unroll
  for (int i = 0; i < kHeld; ++i) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    wv[i] = c < cols ? load_float(w, kind, c) + offset : 0.0f;
  }
}

// Block blockIdx.x's row of each operand, taken once the kernel ahead has ended: the norms are
// launched early (common.cuh) and read nothing but their weights before that. h and delta: ADD only.
// O: the output's element type (float, or bf16: each f32 result rounded once, for a GEMM's input).
// D: delta's (float, or bf16 where a prompt GEMM wrote it so).
template <bool ADD, class O, class D>
struct NormRow {
  const float* xr;
  float* hr;
  const D* dr;
  O* o;
  __device__ __forceinline__ NormRow(const Rows<const float>& x, float* h, const Rows<const D>& delta, const Rows<O>& out) {
    wait_for_previous();
    allow_next_early();
    const int64_t r = blockIdx.x;
    xr = x.data + r * x.stride;
    hr = ADD ? h + r * x.stride : nullptr;
    dr = ADD ? delta.data + r * delta.stride : nullptr;
    o = out.data + r * out.stride;
  }
};

// One row per block. ADD: h += delta first (the sums written back to h), then the norm of h; each
// thread re-reads only the h values it wrote. Both forms run the same operations in the same order,
// so add_rms_norm is bitwise add followed by rms_norm. x is h's values as read (h itself when ADD).
template <bool ADD, class O, class D>
__global__ void rms_norm_kernel(Rows<const float> x, float* h, Rows<const D> delta, const void* w, FloatKind kind, float eps, float offset,
                                Rows<O> out) {
  float wv[kHeld];
  if (held(x.cols)) load_weights(w, kind, offset, x.cols, wv);
  const NormRow<ADD, O, D> row(x, h, delta, out);
  __shared__ float scratch[32];
  auto value = [&](int64_t c) {  // the row's value at c: x, or h + delta written back to h
    if constexpr (ADD) {
      const float v = row.xr[c] + to_float(row.dr[c]);
      row.hr[c] = v;
      return v;
    } else {
      return row.xr[c];
    }
  };
  float ss = 0.0f;
  if (held(x.cols)) {
    float v[kHeld];
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      v[i] = 0.0f;
      if (c < x.cols) {
        v[i] = value(c);
        ss += v[i] * v[i];
      }
    }
    ss = block_sum(ss, scratch);
    const float inv = rsqrtf(ss / static_cast<float>(x.cols) + eps);
#pragma unroll
    for (int i = 0; i < kHeld; ++i) {
      const int64_t c = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
      if (c < x.cols) row.o[c] = float_as<O>(v[i] * inv * wv[i]);
    }
    return;
  }
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) {
    const float v = value(c);
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(x.cols) + eps);
  for (int64_t c = threadIdx.x; c < x.cols; c += blockDim.x) row.o[c] = float_as<O>(row.xr[c] * inv * (load_float(w, kind, c) + offset));
}

// The same norm over rows of whole 16-byte chunks (cols % 4 == 0, aligned rows): each thread holds up
// to kHeld4 chunks of 4 values, so a block is a quarter the threads of rms_norm_kernel's, four times
// as many rows are in flight per multiprocessor and a chunk is one load (a 4,096-token prompt's
// add_rms_norm at 5,120 columns ran at 2 TB/s with one value per load and 1,024 threads a row).
constexpr int kHeld4 = 8;

template <bool ADD, class O, class D>
__global__ void rms_norm_chunks_kernel(Rows<const float> x, float* h, Rows<const D> delta, const void* w, FloatKind kind, float eps,
                                       float offset, Rows<O> out) {
  const int64_t chunks = x.cols / 4;
  float4 wv[kHeld4];
#pragma unroll
  for (int i = 0; i < kHeld4; ++i) {
    wv[i] = norm_chunks::weights(w, kind, offset, (threadIdx.x + static_cast<int64_t>(i) * blockDim.x) * 4, x.cols);
  }
  const NormRow<ADD, O, D> row(x, h, delta, out);
  __shared__ float scratch[32];
  float4 v[kHeld4];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kHeld4; ++i) {
    const int64_t k = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (k < chunks) {
      v[i] = load4(row.xr + 4 * k);
      if constexpr (ADD) {
        const float4 d = load4(row.dr + 4 * k);
        v[i] = make_float4(v[i].x + d.x, v[i].y + d.y, v[i].z + d.z, v[i].w + d.w);
        store4(row.hr + 4 * k, v[i]);
      }
      ss = norm_chunks::add_squares(ss, v[i]);
    }
  }
  ss = block_sum(ss, scratch);
  const float inv = norm_chunks::inverse_rms(ss, x.cols, eps);
#pragma unroll
  for (int i = 0; i < kHeld4; ++i) {
    const int64_t k = threadIdx.x + static_cast<int64_t>(i) * blockDim.x;
    if (k < chunks) store4(row.o + 4 * k, norm_chunks::normalised(v[i], inv, wv[i]));
  }
}

// Threads for a row of `chunks` chunks: about four chunks each, a whole number of warps, up to 256.
int chunk_threads(int64_t chunks) { return static_cast<int>(std::min<int64_t>(256, std::max<int64_t>(32, (chunks / 4 + 31) / 32 * 32))); }

template <class T>
bool whole_chunks(const Rows<T>& r) {
  return r.cols % 4 == 0 && r.stride % 4 == 0 && reinterpret_cast<uintptr_t>(r.data) % (4 * sizeof(T)) == 0;
}

// Whether rows of `cols` take rms_norm_chunks_kernel (tuning norm_chunks=0: never, for comparisons).
bool chunked(int64_t cols) { return current_tuning().on(Knob::norm_chunks) && cols <= int64_t{kHeld4} * 4 * chunk_threads(cols / 4); }

// Block (row, head): d threads or fewer, looping.
__global__ void gated_rms_norm_kernel(Rows<const float> x, Rows<const float> z, const void* w, FloatKind kind, int64_t d, float eps,
                                      Rows<float> out) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, h = blockIdx.y;
  const float* xr = x.data + r * x.stride + h * d;
  const float* zr = z.data + r * z.stride + h * d;
  float* o = out.data + r * out.stride + h * d;
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) ss += xr[i] * xr[i];
  ss = block_sum(ss, scratch);  // its barriers also order every read of x before out (which may alias x) is written
  const float inv = rsqrtf(ss / static_cast<float>(d) + eps);
  for (int64_t i = threadIdx.x; i < d; i += blockDim.x) o[i] = xr[i] * inv * load_float(w, kind, i) * silu(zr[i]);
}

// x = u * rsqrt(sum(squares[0, count)) / cols + eps), one block: the norm a residual projection
// prepared (norm_split.cuh) for a reader that takes x as it stands, with the scaled mat-vec's scale.
__global__ void apply_norm_scale_kernel(const float* u, const float* squares, int count, int64_t cols, float eps, float* x) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  __shared__ float scale;
  if (threadIdx.x < 32) {
    const float k = norm_scale(squares, count, static_cast<float>(cols), eps);
    if (threadIdx.x == 0) scale = k;
  }
  __syncthreads();
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) x[c] = u[c] * scale;
}

int threads_for(int64_t cols) { return cols >= 1024 ? 1024 : cols >= 256 ? 256 : 128; }

// The norm of x's rows (ADD: of h + delta, written back to h) into out of element type O.
template <bool ADD, class O, class D = float>
void launch_norm(const Rows<const float>& x, float* h, const Rows<const D>& delta, const Tensor& weight, float eps, float offset,
                 Tensor& out, const char* op) {
  const auto ro = rows_of<O>(out, op);
  if (chunked(x.cols) && whole_chunks(x) && (!ADD || whole_chunks(delta)) && whole_chunks(ro))
    launch_early(rms_norm_chunks_kernel<ADD, O, D>, dim3(static_cast<unsigned>(x.rows)), dim3(chunk_threads(x.cols / 4)), 0, x, h, delta,
                 weight.raw(), float_kind(weight), eps, offset, ro);
  else
    launch_early(rms_norm_kernel<ADD, O, D>, dim3(static_cast<unsigned>(x.rows)), dim3(threads_for(x.cols)), 0, x, h, delta, weight.raw(),
                 float_kind(weight), eps, offset, ro);
  check_launch(op);
}

}  // namespace

bool rms_norm_rows_in_one_warp(const Tensor& x, const Tensor& out) {
  if (x.dtype() != DType::f32 || out.dtype() != DType::f32 || x.ndim() != 2 || out.ndim() != 2) return false;
  const auto rx = rows_of<const float>(x, "rms_norm");
  const auto ro = rows_of<float>(out, "rms_norm");
  return chunked(rx.cols) && whole_chunks(rx) && whole_chunks(ro) && chunk_threads(rx.cols / 4) == 32;
}

void rms_norm(const Tensor& x, const Tensor& weight, float eps, Tensor& out, float weight_offset) {
  const auto rx = rows_of<const float>(x, "rms_norm");
  if (rx.rows == 0) return;
  if (out.dtype() == DType::bf16)
    launch_norm<false, __nv_bfloat16>(rx, nullptr, Rows<const float>{}, weight, eps, weight_offset, out, "rms_norm");
  else launch_norm<false, float>(rx, nullptr, Rows<const float>{}, weight, eps, weight_offset, out, "rms_norm");
}

namespace {
template <class D>
void add_rms_norm_from(Tensor& h, const Tensor& delta, const Tensor& weight, float eps, Tensor& out, float weight_offset) {
  const auto rh = rows_of<float>(h, "add_rms_norm");
  const auto rd = rows_of<const D>(delta, "add_rms_norm");
  if (rh.rows == 0) return;
  const Rows<const float> hx{rh.data, rh.rows, rh.cols, rh.stride};
  if (out.dtype() == DType::bf16) launch_norm<true, __nv_bfloat16, D>(hx, rh.data, rd, weight, eps, weight_offset, out, "add_rms_norm");
  else launch_norm<true, float, D>(hx, rh.data, rd, weight, eps, weight_offset, out, "add_rms_norm");
}
}  // namespace

void add_rms_norm(Tensor& h, const Tensor& delta, const Tensor& weight, float eps, Tensor& out, float weight_offset) {
  if (delta.dtype() == DType::bf16) add_rms_norm_from<__nv_bfloat16>(h, delta, weight, eps, out, weight_offset);
  else add_rms_norm_from<float>(h, delta, weight, eps, out, weight_offset);
}

void apply_norm_scale(const ScaledInput& in, Tensor& x) {
  const int64_t cols = in.u->dim(-1);
  launch_early(apply_norm_scale_kernel, dim3(1), dim3(threads_for(cols)), 0, in.u->data<float>(), in.squares->data<float>(),
               static_cast<int>(in.count), cols, in.eps, x.data<float>());
  check_launch("apply_norm_scale");
}

void gated_rms_norm(const Tensor& x, const Tensor& z, const Tensor& weight, float eps, Tensor& out) {
  const auto rx = rows_of<const float>(x, "gated_rms_norm"), rz = rows_of<const float>(z, "gated_rms_norm");
  const auto ro = rows_of<float>(out, "gated_rms_norm");
  const int64_t d = weight.dim(0);
  if (rx.rows == 0) return;
  const dim3 grid(static_cast<unsigned>(rx.rows), static_cast<unsigned>(rx.cols / d));
  launch_early(gated_rms_norm_kernel, grid, dim3(d >= 256 ? 256 : 128), 0, rx, rz, weight.raw(), float_kind(weight), d, eps, ro);
  check_launch("gated_rms_norm");
}

}  // namespace sanctum::ops::cuda
