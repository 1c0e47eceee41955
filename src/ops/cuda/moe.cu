// MoE row movement: gather/scatter of token rows by index, and the weighted sum of expert outputs.
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/moe_combine.cuh"
#include "ops/cuda/moe_route.cuh"
#include "ops/cuda/norm_split.cuh"

namespace sanctum::ops::cuda {

namespace {

__global__ void copy_rows_kernel(const float* src, int64_t src_stride, const int32_t* src_rows, float* dst, int64_t dst_stride,
                                 const int32_t* dst_rows, int64_t count, int64_t d) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= count * d) return;
  const int64_t r = i / d, c = i % d;
  dst[dst_rows[r] * dst_stride + c] = src[src_rows[r] * src_stride + c];
}

__global__ void moe_combine_kernel(const float* per_rank, int64_t pr_stride, const float* w, int64_t k, const float* shared,
                                   int64_t sh_stride, const float* sw, float* out, int64_t out_stride, int64_t n, int64_t d) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * d) return;
  const int64_t t = i / d, j = i % d;
  float o = 0.0f;
  for (int64_t r = 0; r < k; ++r) o += w[t * k + r] * per_rank[(t * k + r) * pr_stride + j];
  if (shared != nullptr) o += sw[t] * shared[t * sh_stride + j];
  out[t * out_stride + j] = o;
}

// Warp per token (route::choose: the top k, then the weights exactly as the host's route_token
// computes them); lane r writes rank r.
template <int PL>
__global__ void moe_route_kernel(const float* logits, int64_t stride, int64_t n, int E, int k, bool softmax_first, bool normalize,
                                 int32_t* ids, float* weights, int32_t appended_id) {
  const int lane = threadIdx.x & 31;
  wait_for_previous();  // launched early (common.cuh): the logits come from the kernel ahead
  allow_next_early();
  const int64_t t = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + (threadIdx.x >> 5);
  if (t >= n) return;
  int32_t my_id = 0;
  float w = 0.0f;
  route::choose<PL>(logits + t * stride, E, k, softmax_first, normalize, my_id, w);
  const int ranks = appended_id >= 0 ? k + 1 : k;
  if (lane < k) {
    ids[t * ranks + lane] = my_id;
    weights[t * k + lane] = w;
  }
  if (appended_id >= 0 && lane == 0) ids[t * ranks + k] = appended_id;
}

// ranks: per_rank rows per token (k, or k + 1 where the shared expert's row follows the routed ones).
// Launched early (common.cuh), as decode's other kernels are, so that the norm after it starts early.
// RESIDUAL (one token): instead of writing out, the row goes into the residual stream and the next
// norm is prepared, as the residual mat-vec does (norm_split.cuh): squares[block] = the block's sum
// of h^2 in block_sum's order.
template <bool RESIDUAL = false>
__global__ void moe_combine_device_kernel(const float* per_rank, int64_t pr_stride, int64_t ranks, const float* w, int64_t k,
                                          const float* shared, int64_t sh_stride, const float* shared_logit, int64_t sl_stride, float* out,
                                          int64_t out_stride, int64_t n, int64_t d, ResidualOut res) {
  wait_for_previous();  // every input comes from the kernels ahead
  allow_next_early();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (!RESIDUAL && i >= n * d) return;
  float o = 0.0f;
  const int64_t t = i / d, j = i % d;
  if (i < n * d) {
    const auto rank = [&](int64_t r) { return r < k ? per_rank[(t * ranks + r) * pr_stride + j] : shared[t * sh_stride + j]; };
    o = combine_column(w + t * k, k, rank, shared != nullptr, shared != nullptr ? shared_logit[t * sl_stride] : 0.0f);
  }
  if constexpr (RESIDUAL) {
    __shared__ float scratch[32];
    const float v = i < n * d ? add_to_stream(res, j, res.h[j], o, load_float(res.weight, res.kind, j)) : 0.0f;
    const float squares = block_sum(v * v, scratch);
    if (threadIdx.x == 0) res.squares[blockIdx.x] = squares;
  } else {
    out[t * out_stride + j] = o;
  }
}

}  // namespace

void moe_route(const Tensor& logits, const MoeRouting& routing, Tensor& ids, Tensor& weights, int32_t appended_id) {
  const int64_t n = logits.dim(0);
  const int E = static_cast<int>(logits.dim(1));
  check(E <= 32 * 32, ErrorKind::unsupported, "[moe_route] at most 1024 experts on cuda, got " + std::to_string(E));
  constexpr int kWarps = 4;
  const auto launch = [&](auto kernel) {
    launch_early(kernel, dim3(static_cast<unsigned>((n + kWarps - 1) / kWarps)), dim3(kWarps * 32), 0, logits.data<float>(),
                 logits.stride(0), n, E, static_cast<int>(routing.top_k), routing.softmax_first, routing.normalize, ids.data<int32_t>(),
                 weights.data<float>(), appended_id);
  };
  if (E <= 32) launch(moe_route_kernel<1>);
  else if (E <= 64) launch(moe_route_kernel<2>);
  else if (E <= 128) launch(moe_route_kernel<4>);
  else if (E <= 256) launch(moe_route_kernel<8>);
  else if (E <= 512) launch(moe_route_kernel<16>);
  else launch(moe_route_kernel<32>);
  check_launch("moe_route");
}

void moe_combine_device(const Tensor& per_rank, const Tensor& weights, const Tensor* shared, const Tensor* shared_logit, Tensor& out) {
  const int64_t n = out.dim(0), d = out.dim(1), k = weights.numel() / n;
  launch_early(moe_combine_device_kernel<>, dim3(blocks_for(n * d, 256)), dim3(256), 0, per_rank.data<float>(), per_rank.stride(0), k,
               weights.data<float>(), k, shared ? shared->data<float>() : nullptr, shared ? shared->stride(0) : 0,
               shared_logit ? shared_logit->data<float>() : nullptr, shared_logit ? shared_logit->stride(0) : 0, out.data<float>(),
               out.stride(0), n, d, ResidualOut{});
  check_launch("moe_combine");
}

void moe_combine_shared_rank(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, Tensor& out) {
  const int64_t n = out.dim(0), d = out.dim(1), k = weights.numel() / n, s = per_rank.stride(0);
  launch_early(moe_combine_device_kernel<>, dim3(blocks_for(n * d, 256)), dim3(256), 0, per_rank.data<float>(), s, k + 1,
               weights.data<float>(), k, per_rank.data<float>() + k * s, (k + 1) * s, shared_logit.data<float>(), shared_logit.stride(0),
               out.data<float>(), out.stride(0), n, d, ResidualOut{});
  check_launch("moe_combine_shared_rank");
}

namespace {
constexpr int kCombineThreads = 256;
}  // namespace

bool moe_combine_residual_ok(int64_t d, const ResidualNorm& r) { return residual_fits(r, d, blocks_for(d, kCombineThreads)); }

int64_t moe_combine_shared_rank_residual(const Tensor& per_rank, const Tensor& weights, const Tensor& shared_logit, const ResidualNorm& r) {
  const int64_t d = per_rank.dim(1), k = weights.numel(), s = per_rank.stride(0);
  const ResidualOut res = residual_out(r);
  const unsigned blocks = blocks_for(d, kCombineThreads);
  launch_early(moe_combine_device_kernel<true>, dim3(blocks), dim3(kCombineThreads), 0, per_rank.data<float>(), s, k + 1,
               weights.data<float>(), k, per_rank.data<float>() + k * s, (k + 1) * s, shared_logit.data<float>(), shared_logit.stride(0),
               nullptr, int64_t{0}, int64_t{1}, d, res);
  check_launch("moe_combine_shared_rank_residual");
  return blocks;
}

void copy_rows(const Tensor& src, std::span<const int32_t> src_rows, Tensor& dst, std::span<const int32_t> dst_rows) {
  const int64_t count = static_cast<int64_t>(src_rows.size()), d = src.dim(1);
  const int32_t* s = device_ints(HostSlot::source_rows, src_rows);
  const int32_t* t = device_ints(HostSlot::target_rows, dst_rows);
  copy_rows_kernel<<<blocks_for(count * d, 256), 256, 0, stream()>>>(src.data<float>(), src.stride(0), s, dst.data<float>(), dst.stride(0),
                                                                     t, count, d);
  check_launch("copy_rows");
}

void moe_combine(const Tensor& per_rank, std::span<const float> weights, const Tensor* shared, std::span<const float> shared_weights,
                 Tensor& out) {
  const int64_t n = out.dim(0), d = out.dim(1), k = per_rank.dim(0) / n;
  const float* w = device_floats(HostFloatSlot::expert_weights, weights);
  const float* sw = shared ? device_floats(HostFloatSlot::shared_weights, shared_weights) : nullptr;
  moe_combine_kernel<<<blocks_for(n * d, 256), 256, 0, stream()>>>(per_rank.data<float>(), per_rank.stride(0), w, k,
                                                                   shared ? shared->data<float>() : nullptr, shared ? shared->stride(0) : 0,
                                                                   sw, out.data<float>(), out.stride(0), n, d);
  check_launch("moe_combine");
}

}  // namespace sanctum::ops::cuda
