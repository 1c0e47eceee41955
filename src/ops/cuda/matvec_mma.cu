// 4-bit mat-vec on the tensor cores, for the bf16 precision mode (x rounded to bf16, f32 sums):
// the f32 mat-vec spends about three instructions per weight decoding and multiplying, which caps
// it near a third of the H200's bandwidth; here a weight costs about one (its code lands in a bf16
// register with one mask-and-or), and mma.sync does the multiplying.
// The kernel and its layout: matvec_mma_kernel.cuh.
#include "ops/cuda/matvec_mma.cuh"
#include "ops/cuda/matvec_mma_kernel.cuh"
#include "ops/cuda/matvec_split.h"

namespace sanctum::ops::cuda {

namespace {

// Tiles of codes, scales and biases in flight per warp, and blocks per multiprocessor.
constexpr int kDepth = 2, kMinBlocks = 3;

template <class S, int RT, int KS>
void launch(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  mma::launch<S, RT, KS, kDepth, kMinBlocks, false>(w, x, xs, n, y, ys);
}

// Warps per block splitting the columns: the tiled mat-vec's rule (matvec_split.h), so that the two
// layouts sum alike.
template <class S, int RT>
void launch_split(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  static_assert(tiles::kSplitWarps == mma::kWarps, "matvec_split.h counts the block's warps");
  tiles::with_split(tiles::column_split(w.rows / 16, RT, w.cols / 64, multiprocessor_count()),
                    [&]<int KS>() { launch<S, RT, KS>(w, x, xs, n, y, ys); });
}

template <class S>
void launch_rows(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  if (w.rows >= 8192) launch_split<S, 2>(w, x, xs, n, y, ys);
  else launch_split<S, 1>(w, x, xs, n, y, ys);
}

}  // namespace

bool mma_matvec_ok(const Weight& w, const Tensor& x, int64_t n) {
  return n >= 1 && n <= 8 && w.quantized() && w.layout == WeightLayout::rows && w.quant.bits == 4 &&
         (w.quant.group_size == 64 || w.quant.group_size == 128) && (w.scales.dtype() == DType::bf16 || w.scales.dtype() == DType::f16) &&
         w.rows % 16 == 0 && w.cols % 64 == 0 && w.data.stride(0) * 8 == w.cols && aligned16(w.data.raw()) && aligned16(x.raw()) &&
         x.stride(0) % 4 == 0;
}

void mma_matvec(const Tensor& x, const Weight& w, Tensor& y) {
  const int n = static_cast<int>(x.dim(0));
  if (w.scales.dtype() == DType::bf16) launch_rows<__nv_bfloat16>(w, x.data<float>(), x.stride(0), n, y.data<float>(), y.stride(0));
  else launch_rows<__half>(w, x.data<float>(), x.stride(0), n, y.data<float>(), y.stride(0));
  check_launch("matmul (tensor-core mat-vec)");
}

}  // namespace sanctum::ops::cuda
