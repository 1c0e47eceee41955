// Every tuning of the tensor-core mat-vec kernel (matvec_mma_kernel.cuh) the perf test times, for
// choosing the one matvec_mma.cu instantiates. bf16 scales only; the column split follows the
// production rule.
#include "matvec_mma_sweep.h"
#include "ops/cuda/matvec_mma_kernel.cuh"

namespace sanctum::test {

namespace {

using ops::cuda::mma::kWarps;

template <int RT, int DEPTH, int MINB, bool XS>
void launch_ks(const Weight& w, const Tensor& x, Tensor& y) {
  const int64_t groups = (w.rows / 16 + RT - 1) / RT, k_tiles = w.cols / 64, target = int64_t{64} * ops::cuda::multiprocessor_count();
  int ks = 1;
  while (ks < kWarps && groups * ks < target && k_tiles >= 4 * ks) ks *= 2;
  const float* xp = x.data<float>();
  float* yp = y.data<float>();
  const int n = static_cast<int>(x.dim(0));
  using S = __nv_bfloat16;
  switch (ks) {
    case 1: return ops::cuda::mma::launch<S, RT, 1, DEPTH, MINB, XS>(w, xp, x.stride(0), n, yp, y.stride(0));
    case 2: return ops::cuda::mma::launch<S, RT, 2, DEPTH, MINB, XS>(w, xp, x.stride(0), n, yp, y.stride(0));
    case 4: return ops::cuda::mma::launch<S, RT, 4, DEPTH, MINB, XS>(w, xp, x.stride(0), n, yp, y.stride(0));
    default: return ops::cuda::mma::launch<S, RT, 8, DEPTH, MINB, XS>(w, xp, x.stride(0), n, yp, y.stride(0));
  }
}

template <int DEPTH, int MINB, bool XS>
void launch_rt(int rt, const Weight& w, const Tensor& x, Tensor& y) {
  if (rt == 1) launch_ks<1, DEPTH, MINB, XS>(w, x, y);
  else launch_ks<2, DEPTH, MINB, XS>(w, x, y);
}

template <bool XS>
void launch_depth(const MmaVariant& v, const Weight& w, const Tensor& x, Tensor& y) {
  if (v.depth == 2 && v.min_blocks == 3) return launch_rt<2, 3, XS>(v.row_tiles, w, x, y);
  if (v.depth == 3 && v.min_blocks == 3) return launch_rt<3, 3, XS>(v.row_tiles, w, x, y);
  if (v.depth == 4 && v.min_blocks == 2) return launch_rt<4, 2, XS>(v.row_tiles, w, x, y);
  return launch_rt<2, 4, XS>(v.row_tiles, w, x, y);
}

}  // namespace

std::vector<MmaVariant> mma_variants() {
  std::vector<MmaVariant> out;
  for (int rt : {1, 2})
    for (auto [depth, min_blocks] : {std::pair{2, 3}, {3, 3}, {4, 2}, {2, 4}})
      for (bool xs : {false, true}) out.push_back({rt, depth, min_blocks, xs});
  return out;
}

bool run_mma_variant(const MmaVariant& v, const Weight& w, const Tensor& x, Tensor& y) {
  if (v.staged_x && ops::cuda::mma::staged_bytes(x.dim(0), w.cols / 64) > ops::cuda::mma::kMaxStagedBytes) return false;
  if (v.staged_x) launch_depth<true>(v, w, x, y);
  else launch_depth<false>(v, w, x, y);
  ops::cuda::check_launch("mma variant");
  return true;
}

}  // namespace sanctum::test
