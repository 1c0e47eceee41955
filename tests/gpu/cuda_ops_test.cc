// Every CUDA op against the scalar references in src/ops/ref, on fresh random inputs with odd sizes.
// The whole suite skips itself on machines without a usable GPU (CI builds it there, so the CUDA
// code cannot rot); scripts/gpu_check.sh runs it on a GPU machine.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <numeric>
#include <tuple>
#include <vector>

#include "../ops/op_test_util.h"
#include "base/error.h"
#include "gpu_test_util.h"
#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/dequantize.cuh"
#include "ops/cuda/gemm_tiles.h"
#include "ops/cuda/kernels.h"
#include "ops/cuda/matvec_mma.cuh"
#include "ops/cuda/matvec_split.h"
#include "ops/cuda/matvec_tiles.h"
#include "ops/cuda/wgmma.cuh"
#include "ops/kv_cache_ops.h"
#include "ops/ops.h"
#include "ops/precision.h"
#include "ops/ref/activation.h"
#include "ops/ref/attention.h"
#include "ops/ref/elementwise.h"
#include "ops/ref/embedding.h"
#include "ops/ref/gated_delta.h"
#include "ops/ref/matmul.h"
#include "ops/ref/rms_norm.h"
#include "ops/ref/rope.h"
#include "ops/ref/softmax.h"
#include "tensor/device_memory.h"
#include "tensor/step_graph.h"

namespace sanctum {
namespace {

using test::Rng;

class Cuda : public test::RequiresGpu {};

using test::gpu;
using test::host;

// max |a - b| / (max |b| + floor) over all elements of two same-shape tensors.
double relative_error(const Tensor& a_in, const Tensor& b_in, double floor = 1e-6) {
  Tensor a = a_in.device() == Device::cpu ? a_in.clone() : host(a_in);
  Tensor b = b_in.device() == Device::cpu ? b_in.clone() : host(b_in);
  double worst = 0.0, scale = floor;
  for (int64_t i = 0; i < b.numel(); ++i) scale = std::max(scale, static_cast<double>(std::abs(b.data<float>()[i])));
  for (int64_t i = 0; i < a.numel(); ++i) worst = std::max(worst, static_cast<double>(std::abs(a.data<float>()[i] - b.data<float>()[i])));
  return worst / scale;
}

// Matmul error relative to sum_c |x_c| |w_rc| per output (the magnitude f32 sums handle).
double matmul_error(const Tensor& x, const Weight& w, const Tensor& y_gpu, const Tensor& ref) {
  Tensor y = host(y_gpu);
  double worst = 0.0;
  for (int64_t i = 0; i < x.dim(0); ++i)
    for (int64_t r = 0; r < w.rows; ++r) {
      double mag = 1e-30;
      for (int64_t c = 0; c < w.cols; ++c) mag += std::abs(test::at(x, i, c) * ops::ref::weight_at(w, r, c));
      worst = std::max(worst, std::abs(static_cast<double>(test::at(y, i, r)) - test::at(ref, i, r)) / mag);
    }
  return worst;
}

// How many elements of bf16 `rounded` are not those of f32 `exact` rounded to nearest even.
int64_t not_rounded(const Tensor& rounded, const Tensor& exact) {
  const Tensor a = rounded.device() == Device::cpu ? rounded : host(rounded), b = exact.device() == Device::cpu ? exact : host(exact);
  int64_t differ = 0;
  for (int64_t i = 0; i < b.numel(); ++i) differ += a.data<uint16_t>()[i] != f32_to_bf16(b.data<float>()[i]);
  return differ;
}

// printf-style test labels (GCC 12 warns falsely on some "literal" + std::string chains).
template <class... A>
std::string label(const char* format, A... args) {
  char buf[128];
  std::snprintf(buf, sizeof buf, format, args...);
  return buf;
}

using test::PrecisionScope;

void check_matmul(const Weight& w, int64_t n, Rng& rng, double tolerance, const std::string& what) {
  Tensor x = test::random_tensor({n, w.cols}, DType::f32, rng);
  Tensor ref = Tensor::zeros({n, w.rows}, DType::f32);
  ops::ref::matmul(x, w, ref);
  Tensor y = Tensor::zeros({n, w.rows}, DType::f32, Device::cuda);
  ops::matmul(gpu(x), gpu(w), y);
  EXPECT_LE(matmul_error(x, w, y, ref), tolerance) << what << " n=" << n << " " << test::seed_note();
}

TEST_F(Cuda, quantized_matmul_matches_ref_for_bits_groups_scale_types_and_row_counts) {
  Rng rng(11);
  PrecisionScope exact(ops::MatmulPrecision::f32);
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (DType st : {DType::bf16, DType::f16, DType::f32})
        for (auto [m, k] : {std::pair<int64_t, int64_t>{37, 256}, {129, 640}, {5, 4096}}) {
          if (k % group) continue;
          Weight w = test::random_quantized(m, k, bits, group, st, rng);
          for (int64_t n : {1, 3, 8, 9, 37}) check_matmul(w, n, rng, 2e-5, label("q%d g%d %s", bits, group, dtype_name(st)));
        }
}

// A prompt's MLP hands the down projection its input in bf16: silu_mul writes the values the GEMM
// would have rounded x to, so the bf16 hand-off gives the f32 path's bits. Where the matmul would not
// round x (few rows, exact mode) it refuses bf16 x.
TEST_F(Cuda, bf16_activations_into_the_gemm_give_the_f32_paths_bits) {
  Rng rng(30);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  const Weight w = gpu(test::random_quantized(72, 320, 4, 64, DType::bf16, rng));
  for (int64_t n : {9, 100}) {
    Tensor gate = gpu(test::random_tensor({n, 2 * w.cols}, DType::f32, rng)).slice(1, 0, w.cols);  // strided rows, as from a stacked weight
    Tensor up = gpu(test::random_tensor({n, w.cols}, DType::f32, rng));
    ASSERT_EQ(ops::matmul_input_dtype(w, n, Device::cuda), DType::bf16);
    Tensor act32 = Tensor::zeros({n, w.cols}, DType::f32, Device::cuda), act16 = Tensor::zeros({n, w.cols}, DType::bf16, Device::cuda);
    ops::silu_mul(gate, up, act32);
    ops::silu_mul(gate, up, act16);
    EXPECT_EQ(not_rounded(act16, act32), 0) << "n=" << n;
    Tensor y32 = Tensor::zeros({n, w.rows}, DType::f32, Device::cuda), y16 = Tensor::zeros({n, w.rows}, DType::f32, Device::cuda);
    ops::matmul(act32, w, y32);
    ops::matmul(act16, w, y16);
    EXPECT_LE(relative_error(y16, host(y32)), 0.0) << "n=" << n;
  }
  Tensor few = Tensor::zeros({8, w.cols}, DType::bf16, Device::cuda), y = Tensor::zeros({8, w.rows}, DType::f32, Device::cuda);
  EXPECT_EQ(ops::matmul_input_dtype(w, 8, Device::cuda), DType::f32);
  EXPECT_THROW(ops::matmul(few, w, y), Error);
  PrecisionScope exact(ops::MatmulPrecision::f32);
  Tensor many = Tensor::zeros({100, w.cols}, DType::bf16, Device::cuda), y100 = Tensor::zeros({100, w.rows}, DType::f32, Device::cuda);
  EXPECT_EQ(ops::matmul_input_dtype(w, 100, Device::cuda), DType::f32);
  EXPECT_THROW(ops::matmul(many, w, y100), Error);
}

// silu_mul reads bf16 gate and up (widened exactly) as it reads f32 ones holding the same values,
// into f32 or bf16 out, in the four-wide and the one-at-a-time kernels (77 columns, strided rows).
TEST_F(Cuda, silu_mul_of_bf16_inputs_is_that_of_their_values) {
  Rng rng(33);
  for (int64_t cols : {256, 77}) {
    Tensor g16 = Tensor::zeros({9, 2 * cols}, DType::bf16), u16 = Tensor::zeros({9, cols}, DType::bf16);
    Tensor g32 = Tensor::zeros({9, 2 * cols}, DType::f32), u32 = Tensor::zeros({9, cols}, DType::f32);
    const Tensor gv = test::random_tensor({9, 2 * cols}, DType::f32, rng), uv = test::random_tensor({9, cols}, DType::f32, rng);
    for (int64_t i = 0; i < gv.numel(); ++i) {
      g16.data<uint16_t>()[i] = f32_to_bf16(gv.data<float>()[i]);
      g32.data<float>()[i] = bf16_to_f32(g16.data<uint16_t>()[i]);
    }
    for (int64_t i = 0; i < uv.numel(); ++i) {
      u16.data<uint16_t>()[i] = f32_to_bf16(uv.data<float>()[i]);
      u32.data<float>()[i] = bf16_to_f32(u16.data<uint16_t>()[i]);
    }
    const Tensor gate16 = gpu(g16).slice(1, 0, cols), gate32 = gpu(g32).slice(1, 0, cols), up16 = gpu(u16), up32 = gpu(u32);
    for (DType out_type : {DType::f32, DType::bf16}) {
      Tensor want = Tensor::zeros({9, cols}, out_type, Device::cuda), got = Tensor::zeros({9, cols}, out_type, Device::cuda);
      ops::silu_mul(gate32, up32, want);
      ops::silu_mul(gate16, up16, got);
      const Tensor a = host(got), b = host(want);
      EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.nbytes())), 0) << "cols=" << cols << " out " << dtype_name(out_type);
    }
    Tensor out = Tensor::zeros({9, cols}, DType::f32, Device::cuda);
    EXPECT_THROW(ops::silu_mul(gate16, up32, out), Error) << "mixed input types";
    Tensor host_out = Tensor::zeros({9, cols}, DType::f32);
    EXPECT_THROW(ops::silu_mul(g16.slice(1, 0, cols), u16, host_out), Error) << "bf16 on the CPU";
  }
}

// Tall weights take several rows per warp and long rows split across warps (row counts that leave
// a partial last block); a row's bits must not depend on how many x rows share the launch.
TEST_F(Cuda, quantized_matvec_with_split_rows_matches_ref_and_is_independent_of_n) {
  Rng rng(12);
  PrecisionScope exact(ops::MatmulPrecision::f32);
  for (int bits : {4, 8})
    for (auto [m, k] : {std::pair<int64_t, int64_t>{4099, 4096}, {16390, 4096}, {300, 17408}}) {
      Weight w = test::random_quantized(m, k, bits, 64, DType::bf16, rng);
      Weight wg = gpu(w);
      Tensor x = test::random_tensor({9, k}, DType::f32, rng);
      Tensor ref = Tensor::zeros({9, m}, DType::f32);
      ops::ref::matmul(x, w, ref);
      Tensor y = Tensor::zeros({9, m}, DType::f32, Device::cuda);
      ops::matmul(gpu(x), wg, y);
      EXPECT_LE(matmul_error(x, w, y, ref), 2e-5) << label("q%d %lldx%lld", bits, static_cast<long long>(m), static_cast<long long>(k));
      Tensor y1 = Tensor::zeros({1, m}, DType::f32, Device::cuda);
      ops::matmul(gpu(x).slice(0, 0, 1), wg, y1);
      const Tensor a = y.slice(0, 0, 1).to(Device::cpu), b = y1.to(Device::cpu);
      EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), static_cast<size_t>(m) * sizeof(float))) << "row 0 differs between n=9 and n=1";
    }
}

// The tensor-core mat-vec of the bf16 mode: x is rounded to bf16 (relative error 2^-9 per term).
TEST_F(Cuda, tensor_core_matvec_matches_ref_within_bf16_rounding) {
  Rng rng(13);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (int group : {64, 128})
    for (DType st : {DType::bf16, DType::f16})
      for (auto [m, k] : {std::pair<int64_t, int64_t>{16, 128}, {48, 5120}, {4112, 640}, {8208, 1024}, {64, 17408}}) {
        Weight w = test::random_quantized(m, k, 4, group, st, rng);
        Weight wg = gpu(w);
        for (int64_t n : {1, 2, 3, 8}) {
          Tensor x = test::random_tensor({n, k}, DType::f32, rng);
          Tensor xg = gpu(x);
          ASSERT_TRUE(ops::cuda::mma_matvec_ok(wg, xg, n)) << m << "x" << k;
          Tensor ref = Tensor::zeros({n, m}, DType::f32), y = Tensor::zeros({n, m}, DType::f32, Device::cuda);
          ops::ref::matmul(x, w, ref);
          ops::matmul(xg, wg, y);
          EXPECT_LE(matmul_error(x, w, y, ref), 4e-3) << label("g%d %s %lldx%lld n=%lld", group, dtype_name(st), static_cast<long long>(m),
                                                               static_cast<long long>(k), static_cast<long long>(n));
        }
      }
}

// The tiled layout written out element by element on the host, from its definition in
// matvec_tiles.cuh: the reference the device reorder is checked against.
Weight tiled_on_host(const Weight& w) {
  Weight t = w;
  t.data = w.data.clone();
  t.scales = w.scales.clone();
  t.biases = w.biases.clone();
  const int64_t k_tiles = w.cols / 64, groups = w.cols / w.quant.group_size, words = w.cols / 8;
  const uint32_t* src = w.data.data<uint32_t>();
  uint32_t* dst = t.data.data<uint32_t>();
  for (int64_t row = 0; row < w.rows; ++row)
    for (int64_t word = 0; word < words; ++word) {  // word holds columns 8 word .. 8 word + 7
      const int64_t rt = row / 16, r = row % 16, kt = word / 8, lane = (r % 8) * 4 + (word % 8) / 2;
      dst[((rt * k_tiles + kt) * 32 + lane) * 4 + (r / 8) * 2 + word % 2] = src[row * words + word];
    }
  for (auto [from, to] : {std::pair{&w.scales, &t.scales}, {&w.biases, &t.biases}}) {
    const uint16_t* s = static_cast<const uint16_t*>(from->raw());
    uint16_t* d = static_cast<uint16_t*>(to->raw());
    for (int64_t row = 0; row < w.rows; ++row)
      for (int64_t grp = 0; grp < groups; ++grp) d[(row / 16 * groups + grp) * 16 + (row % 8) * 2 + (row % 16) / 8] = s[row * groups + grp];
  }
  t.layout = WeightLayout::tiles;
  return t;
}

Weight tiled_on_gpu(const Weight& w) {
  Weight g = gpu(w);
  EXPECT_TRUE(ops::cuda::can_tile(g));
  ops::cuda::tile_weight(g);
  return g;
}

void expect_same_bytes(const Weight& want, const Weight& got_gpu, const std::string& what) {
  for (auto [a, b] : {std::pair{&want.data, &got_gpu.data}, {&want.scales, &got_gpu.scales}, {&want.biases, &got_gpu.biases}}) {
    const Tensor back = host(*b);
    EXPECT_EQ(std::memcmp(back.raw(), a->raw(), a->nbytes()), 0) << what;
  }
}

// The device reorder matches the layout's definition; the tiled mat-vec gives the row-layout
// kernel's results (same arithmetic, sums split differently) and stays within bf16 rounding of the
// reference. Rows as wide as the 24B shape's down projection (32,768 columns) and wider. Shapes
// with few row tiles and long rows split their columns into parts across blocks (1024 x 17408 into
// four parts on an H200; 20,096 columns make parts of unequal length), and a second launch gives
// the same bits.
TEST_F(Cuda, tiled_weights_reorder_exactly_and_multiply_like_the_row_layout) {
  Rng rng(21);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  auto check = [&](const Weight& w, const std::vector<int64_t>& batches, const std::string& what) {
    const int64_t m = w.rows, k = w.cols;
    Weight rows = gpu(w), tiled = tiled_on_gpu(w);
    expect_same_bytes(tiled_on_host(w), tiled, what);
    for (int64_t n : batches) {
      Tensor x = test::random_tensor({n, k}, DType::f32, rng);
      Tensor xg = gpu(x);
      ASSERT_TRUE(ops::cuda::tiles_matvec_ok(tiled, xg, n));
      Tensor ref = Tensor::zeros({n, m}, DType::f32), y = Tensor::zeros({n, m}, DType::f32, Device::cuda);
      Tensor y_rows = Tensor::zeros({n, m}, DType::f32, Device::cuda);
      ops::ref::matmul(x, w, ref);
      ops::matmul(xg, tiled, y);
      ops::cuda::mma_matvec(xg, rows, y_rows);
      EXPECT_LE(matmul_error(x, w, y, ref), 4e-3) << what << " n=" << n;
      EXPECT_LE(matmul_error(x, w, y, host(y_rows)), 1e-6) << what << " n=" << n << " against the row-layout kernel";
      Tensor again = Tensor::zeros({n, m}, DType::f32, Device::cuda);
      ops::matmul(xg, tiled, again);
      const Tensor first = host(y), second = host(again);
      EXPECT_EQ(std::memcmp(first.raw(), second.raw(), first.nbytes()), 0) << what << " n=" << n << " second launch";
    }
  };
  for (int group : {64, 128})
    for (DType st : {DType::bf16, DType::f16})
      for (auto [m, k] : {std::pair<int64_t, int64_t>{16, 128},
                          {48, 5120},
                          {4112, 640},
                          {8208, 1024},
                          {64, 17408},
                          {32, 32768},
                          {16, 49152},
                          {32, 20096},
                          {1024, 17408}})
        check(test::random_quantized(m, k, 4, group, st, rng), {1, 2, 3, 8},
              label("g%d %s %lldx%lld", group, dtype_name(st), static_cast<long long>(m), static_cast<long long>(k)));
  // The 27B shape's down projection: four warps per row tile in three column parts on an H200
  // (MatvecSplit below).
  check(test::random_quantized(5120, 17408, 4, 64, DType::bf16, rng), {1, 8}, "27B down 5120x17408");
}

// A decode batch of 9 to 16 rows stays on the tiled mat-vec, in one launch (two column blocks of 8 x
// rows reading each weight tile once); longer batches take the GEMM. Every row's result is the bits
// of that row alone (an mma's columns never meet), and within bf16 rounding of the reference. Odd
// batch sizes, column parts (1024 x 17408), one and eight warps per row tile, gate/up pairs with
// their SwiGLU.
TEST_F(Cuda, tiled_matvec_rows_of_a_decode_batch_are_each_rows_bits_alone) {
  Rng rng(24);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  auto rows_alone = [&](const Tensor& xg, int64_t m, const std::function<void(const Tensor&, Tensor&)>& op) {
    const int64_t n = xg.dim(0);
    Tensor alone = Tensor::zeros({n, m}, DType::f32, Device::cuda);
    for (int64_t r = 0; r < n; ++r) {
      Tensor y = alone.slice(0, r, r + 1);
      op(xg.slice(0, r, r + 1), y);
    }
    return host(alone);
  };
  for (int group : {64, 128})
    for (auto [m, k] : {std::pair<int64_t, int64_t>{48, 640}, {4112, 1024}, {1024, 17408}, {64, 5120}}) {
      const Weight w = test::random_quantized(m, k, 4, group, DType::bf16, rng);
      const Weight tiled = tiled_on_gpu(w);
      const std::string what = label("g%d %lldx%lld", group, static_cast<long long>(m), static_cast<long long>(k));
      for (int64_t n : {9, 13, 16}) {
        Tensor x = test::random_tensor({n, k + 4}, DType::f32, rng).slice(1, 0, k);  // strided rows
        const Tensor xg = gpu(x);
        ASSERT_TRUE(ops::cuda::tiles_matvec_ok(tiled, xg, n)) << what;
        EXPECT_EQ(ops::matmul_input_dtype(tiled, n, Device::cuda), DType::f32) << what << " n=" << n << ": no GEMM";
        Tensor y = Tensor::zeros({n, m}, DType::f32, Device::cuda), ref = Tensor::zeros({n, m}, DType::f32);
        ops::matmul(xg, tiled, y);
        ops::ref::matmul(x, w, ref);
        EXPECT_LE(matmul_error(x, w, y, ref), 4e-3) << what << " n=" << n;
        const Tensor want = rows_alone(xg, m, [&](const Tensor&xr, Tensor&yr) { ops::matmul(xr, tiled, yr); }), got = host(y);
        EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0) << what << " n=" << n << ": a row's bits depend on the batch";
        if (m % 32 != 0) continue;
        Tensor act = Tensor::zeros({n, m / 2}, DType::f32, Device::cuda);
        ASSERT_TRUE(ops::matmul_silu_mul_ok(tiled, xg)) << what << " n=" << n;
        ops::matmul_silu_mul(xg, tiled, act);
        const Tensor want_act = rows_alone(xg, m / 2, [&](const Tensor& xr, Tensor& yr) { ops::matmul_silu_mul(xr, tiled, yr); });
        const Tensor got_act = host(act);
        EXPECT_EQ(std::memcmp(want_act.raw(), got_act.raw(), want_act.nbytes()), 0) << what << " n=" << n << " gate/up pairs";
      }
      const Tensor longer = gpu(test::random_tensor({17, k}, DType::f32, rng));
      EXPECT_FALSE(ops::cuda::tiles_matvec_ok(tiled, longer, 17)) << what;
      EXPECT_EQ(ops::matmul_input_dtype(tiled, 17, Device::cuda), DType::bf16) << what << ": 17 rows take the GEMM";
    }
}

// The dense mat-vec's warps per row tile on an H200 (132 multiprocessors, two blocks each): fewer,
// longer blocks only where they still fill whole waves and the waves save 5% or more.
TEST(MatvecSplit, fewer_longer_blocks_only_where_whole_waves_pay) {
  using ops::cuda::tiles::column_split;
  using ops::cuda::tiles::dense_column_split;
  auto dense = [](int64_t rows, int64_t cols) { return dense_column_split(rows / 16, 2, cols / 64, 132, 2); };
  EXPECT_EQ(column_split(65536 / 16, 2, 80, 132), 8);
  EXPECT_EQ(dense(65536, 5120), 1) << "24B gate/up: 256 blocks of 8 row-tile pairs, one wave, against 2,048 blocks";
  EXPECT_EQ(dense(34816, 5120), 8) << "27B gate/up: 1,088 blocks make 4.1 waves; 272 would make 1.03";
  EXPECT_EQ(dense(16480, 5120), 4) << "27B q/k/v/z: 258 blocks in one wave against 515 in 1.95";
  EXPECT_EQ(dense(131072, 5120), column_split(8192, 2, 80, 132)) << "24B LM head: under 5% to gain";
  for (auto [rows, cols] :
       {std::pair<int64_t, int64_t>{6144, 5120}, {5120, 4096}, {5120, 32768}, {12352, 2048}, {8192, 2048}, {1024, 17408}})
    EXPECT_EQ(dense(rows, cols), column_split(rows / 16, 2, cols / 64, 132))
        << rows << " x " << cols << ": part-empty waves or under 5% to gain keep the pick";
}

// The launches' dispatch from a split to the kernel's template argument.
TEST(MatvecSplit, with_split_passes_the_split_as_a_constant) {
  auto ks_of = [](int ks) { return ops::cuda::tiles::with_split(ks, []<int KS>() { return KS; }); };
  EXPECT_EQ(ks_of(1), 1);
  EXPECT_EQ(ks_of(2), 2);
  EXPECT_EQ(ks_of(4), 4);
  EXPECT_EQ(ks_of(8), 8);
  EXPECT_EQ(ks_of(3), 8) << "anything else takes eight, as the launches' switches did";
}

// Warps per row tile and column parts chosen together (dense_launch_shape): the 5,120-row down
// projections move from 8 warps in 3 parts (480 blocks, 1.8 waves) to 4 warps in 3 parts (240
// blocks, one wave), the MoE's 12,352 x 2,048 and the 27B's 14,336 x 5,120 to 4 warps (193 and 224
// blocks, one wave at 73% and 85%); every other weight of the three benchmark shapes keeps the
// two-step pick, the MoE's 9,216 x 2,048 among them (144 blocks would fill 55%).
TEST(MatvecSplit, warps_and_column_parts_together_fill_whole_waves) {
  using ops::cuda::tiles::column_parts;
  using ops::cuda::tiles::column_split;
  using ops::cuda::tiles::dense_column_split;
  using ops::cuda::tiles::dense_launch_shape;
  auto joint = [](int64_t rows, int64_t cols) { return dense_launch_shape(rows / 16, 2, cols / 64, 132, 2, 8, rows); };
  for (int64_t cols : {17408, 32768}) {
    const auto down = joint(5120, cols);
    EXPECT_EQ(down.ks, 4) << cols;
    EXPECT_EQ(down.parts, 3) << cols;
    EXPECT_EQ(dense_column_split(320, 2, cols / 64, 132, 2), 8) << cols << ": the two-step pick it replaces";
  }
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{12352, 2048}, {14336, 5120}}) {
    const auto shape = joint(rows, cols);
    EXPECT_EQ(shape.ks, 4) << rows << " x " << cols;
    EXPECT_EQ(shape.parts, 1) << rows << " x " << cols;
    EXPECT_EQ(dense_column_split(rows / 16, 2, cols / 64, 132, 2), 8) << rows << " x " << cols << ": the two-step pick it replaces";
  }
  // Short rows keep column_split's floor of two column tiles a warp: 8,192 x 192 (three tiles) stays
  // at one warp per row tile although eight would fill the wave.
  EXPECT_EQ(joint(8192, 192).ks, column_split(512, 2, 3, 132));
  EXPECT_EQ(joint(8192, 192).ks, 1);
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{16480, 5120},
                            {5120, 6144},
                            {34816, 5120},
                            {248320, 5120},
                            {6144, 5120},
                            {5120, 4096},
                            {65536, 5120},
                            {131072, 5120},
                            {2048, 4096},
                            {9216, 2048},
                            {1024, 17408},
                            {96, 640},
                            {8192, 640}}) {
    const int64_t row_tiles = rows / 16, k_tiles = cols / 64;
    const int ks = dense_column_split(row_tiles, 2, k_tiles, 132, 2);
    const int64_t blocks = (row_tiles / 2 * ks + 7) / 8;
    const auto shape = joint(rows, cols);
    EXPECT_EQ(shape.ks, ks) << rows << " x " << cols;
    EXPECT_EQ(shape.parts, column_parts(blocks, 264, k_tiles, ks, rows, 8)) << rows << " x " << cols;
  }
}

// Gate and up stacked and tiled: the fused mat-vec leaves silu(gate) * up with the bits of the
// matmul into both halves followed by silu_mul, for shapes that take one, two, four and eight
// warps per row tile, column parts (2,048 x 17,408), groups of 64 and 128, bf16 and f16 scales,
// and 1 to 8 x rows (strided, as a recorded step's views are; more rows: the decode batch test above). The fused op is refused where no
// kernel takes it: prompts, the f32 mode, the row layout, halves that are not whole row tiles.
TEST_F(Cuda, tiled_gate_up_silu_mul_gives_matmul_then_silu_mul_bits) {
  Rng rng(23);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  auto expect_bits = [&](const Weight& tiled, int64_t n, const std::string& what) {
    const int64_t m = tiled.rows, k = tiled.cols;
    Tensor x = gpu(test::random_tensor({n, k + 4}, DType::f32, rng)).slice(1, 0, k);
    ASSERT_TRUE(ops::matmul_silu_mul_ok(tiled, x)) << what;
    Tensor both = Tensor::zeros({n, m}, DType::f32, Device::cuda), act = Tensor::zeros({n, m / 2}, DType::f32, Device::cuda);
    ops::matmul(x, tiled, both);
    ops::silu_mul(both.slice(1, 0, m / 2), both.slice(1, m / 2, m), act);
    Tensor fused = Tensor::zeros({n, m / 2 + 8}, DType::f32, Device::cuda);
    Tensor fused_view = fused.slice(1, 0, m / 2);
    ops::matmul_silu_mul(x, tiled, fused_view);
    const Tensor want = host(act), got = host(fused_view);  // host copies are contiguous
    EXPECT_EQ(std::memcmp(want.raw(), got.raw(), want.nbytes()), 0) << what << " n=" << n;
  };
  for (int group : {64, 128})
    for (DType st : {DType::bf16, DType::f16})
      for (auto [m, k] : {std::pair<int64_t, int64_t>{32, 128}, {96, 640}, {8224, 1024}, {2048, 17408}}) {
        const std::string what = label("g%d %s %lldx%lld", group, dtype_name(st), static_cast<long long>(m), static_cast<long long>(k));
        const Weight tiled = tiled_on_gpu(test::random_quantized(m, k, 4, group, st, rng));
        for (int64_t n : {1, 2, 3, 8}) expect_bits(tiled, n, what);
      }
  // The 24B shape's gate/up, which takes one warp per row tile (MatvecSplit above).
  const Weight gate_up_24b = tiled_on_gpu(test::random_quantized(65536, 5120, 4, 64, DType::bf16, rng));
  for (int64_t n : {1, 8}) expect_bits(gate_up_24b, n, "24B gate/up 65536x5120");
  const Weight w = test::random_quantized(96, 640, 4, 64, DType::bf16, rng);
  const Weight tiled = tiled_on_gpu(w), rows = gpu(w);
  const Tensor one = gpu(test::random_tensor({1, 640}, DType::f32, rng)), prompt = gpu(test::random_tensor({17, 640}, DType::f32, rng));
  EXPECT_FALSE(ops::matmul_silu_mul_ok(tiled, prompt)) << "prompt-sized x";
  EXPECT_FALSE(ops::matmul_silu_mul_ok(rows, one)) << "row layout";
  EXPECT_FALSE(ops::matmul_silu_mul_ok(tiled_on_gpu(test::random_quantized(48, 640, 4, 64, DType::bf16, rng)), one)) << "halves of 24 rows";
  {
    PrecisionScope exact(ops::MatmulPrecision::f32);
    EXPECT_FALSE(ops::matmul_silu_mul_ok(tiled, one)) << "f32 mode";
  }
  Tensor act = Tensor::zeros({17, 48}, DType::f32, Device::cuda);
  EXPECT_THROW(ops::matmul_silu_mul(prompt, tiled, act), Error);
  Tensor wrong = Tensor::zeros({1, 96}, DType::f32, Device::cuda);  // the stack's width, not a half's
  EXPECT_THROW(ops::matmul_silu_mul(one, tiled, wrong), Error);
}

// The norm between two sub-blocks split across the mat-vecs around it (normed_matmul.h): the
// producer leaves h + its y in h (the bits of add_rms_norm's h), u = h * (weight + offset) and its
// squares; the consumer's sums are those of the plain mat-vec of u, each scaled once by the norm's
// rsqrt (within rsqrtf's error of the exact one), and apply_norm_scale's x is u scaled by it. Shapes:
// producers in one part and in column parts (the 24B shape's o_proj and down), consumers plain and
// gate/up pairs, one wave and four (the 27B shape's gate/up), norm weights f32, bf16 and f16 with and
// without the offset.
TEST_F(Cuda, norm_split_across_two_matvecs) {
  Rng rng(61);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  struct Case {
    int64_t d, k, m;  // producer d x k, consumer m x d
    bool pairs;
    DType norm_type;
  };
  const float eps = 1e-6f;
  for (const Case& c :
       {Case{640, 128, 96, false, DType::f32}, Case{5120, 4096, 6144, false, DType::bf16}, Case{2048, 1024, 12352, false, DType::f16},
        Case{5120, 32768, 65536, true, DType::bf16}, Case{5120, 6144, 34816, true, DType::bf16}, Case{640, 640, 96, true, DType::f16}})
    for (float offset : {0.0f, 1.0f}) {
      const std::string what =
          label("%lldx%lld then %lldx%lld%s, offset %g", static_cast<long long>(c.d), static_cast<long long>(c.k),
                static_cast<long long>(c.m), static_cast<long long>(c.d), c.pairs ? " pairs" : "", static_cast<double>(offset));
      const Weight producer = tiled_on_gpu(test::random_quantized(c.d, c.k, 4, 64, DType::bf16, rng));
      const Weight consumer = tiled_on_gpu(test::random_quantized(c.m, c.d, 4, 64, DType::bf16, rng));
      const Tensor norm_w_host = test::random_tensor({c.d}, c.norm_type, rng), norm_w = gpu(norm_w_host);
      const Tensor h0 = test::random_tensor({1, c.d}, DType::f32, rng), x_in = gpu(test::random_tensor({1, c.k}, DType::f32, rng));
      // The unsplit path: the mat-vec into delta, then add_rms_norm.
      Tensor delta = Tensor::zeros({1, c.d}, DType::f32, Device::cuda), h_ref = gpu(h0),
             x_ref = Tensor::zeros({1, c.d}, DType::f32, Device::cuda);
      ops::matmul(x_in, producer, delta);
      ops::add_rms_norm(h_ref, delta, norm_w, eps, x_ref, offset);
      // The split one.
      Tensor h = gpu(h0), u = Tensor::zeros({1, c.d}, DType::f32, Device::cuda),
             squares = Tensor::zeros({1, c.d / 16}, DType::f32, Device::cuda);
      const ops::ResidualNorm r{&h, &norm_w, offset, &u, &squares};
      ASSERT_TRUE(ops::matmul_residual_ok(x_in, producer, r)) << what;
      const int64_t count = ops::matmul_residual(x_in, producer, r);
      ASSERT_GE(count, 1) << what;
      ASSERT_LE(count, c.d / 16) << what;
      const Tensor hh = host(h), hr = host(h_ref), uh = host(u), sq = host(squares), xr = host(x_ref);
      EXPECT_EQ(0, std::memcmp(hh.raw(), hr.raw(), hh.nbytes())) << what << ": h + y";
      double sum = 0.0, want_sum = 0.0;
      int64_t u_wrong = 0;
      for (int64_t i = 0; i < c.d; ++i) {
        const float v = hr.data<float>()[i];
        u_wrong += uh.data<float>()[i] != v * (load_as_f32(norm_w_host.raw(), c.norm_type, i) + offset);
        want_sum += static_cast<double>(v) * v;
      }
      for (int64_t i = 0; i < count; ++i) sum += sq.data<float>()[i];
      EXPECT_EQ(u_wrong, 0) << what << ": u";
      EXPECT_NEAR(sum, want_sum, 1e-5 * want_sum) << what << ": squares";
      const double inv = 1.0 / std::sqrt(sum / static_cast<double>(c.d) + eps);
      // apply_norm_scale: u * inv, which is the norm.
      const ops::ScaledInput in{&u, &squares, count, eps};
      Tensor xs = Tensor::zeros({1, c.d}, DType::f32, Device::cuda);
      ops::apply_norm_scale(in, xs);
      const Tensor xsh = host(xs);
      int64_t x_off = 0, norm_off = 0;
      for (int64_t i = 0; i < c.d; ++i) {
        const double got = xsh.data<float>()[i], scaled = uh.data<float>()[i] * inv, normed = xr.data<float>()[i];
        x_off += std::abs(got - scaled) > 1e-6 * std::abs(scaled) + 1e-30;
        norm_off += std::abs(got - normed) > 1e-5 * std::abs(normed) + 1e-30;
      }
      EXPECT_EQ(x_off, 0) << what << ": apply_norm_scale against u * rsqrt";
      EXPECT_EQ(norm_off, 0) << what << ": apply_norm_scale against add_rms_norm";
      // The consumer: the plain mat-vec's sums of u, scaled.
      const int64_t out_rows = c.pairs ? c.m / 2 : c.m;
      Tensor sums = Tensor::zeros({1, c.m}, DType::f32, Device::cuda), got = Tensor::zeros({1, out_rows}, DType::f32, Device::cuda);
      ops::matmul(u, consumer, sums);
      if (c.pairs) {
        ASSERT_TRUE(ops::matmul_silu_mul_scaled_ok(in, consumer)) << what;
        ops::matmul_silu_mul_scaled(in, consumer, got);
      } else {
        ASSERT_TRUE(ops::matmul_scaled_ok(in, consumer)) << what;
        ops::matmul_scaled(in, consumer, got);
      }
      const Tensor sh = host(sums), gh = host(got);
      int64_t y_off = 0;
      for (int64_t i = 0; i < out_rows; ++i) {
        double want = sh.data<float>()[i] * inv;
        if (c.pairs) want = want / (1.0 + std::exp(-want)) * (sh.data<float>()[i + out_rows] * inv);
        y_off += std::abs(gh.data<float>()[i] - want) > 1e-5 * std::abs(want) + 1e-30;
      }
      EXPECT_EQ(y_off, 0) << what << ": scaled sums " << test::seed_note();
    }
  // Refused where no kernel takes them: two rows, the row layout, the f32 mode, no room for the squares
  // in whole groups of four.
  const Weight w = test::random_quantized(96, 640, 4, 64, DType::bf16, rng);
  const Weight tiled = tiled_on_gpu(w), rows = gpu(w);
  const Tensor norm_w = gpu(test::random_tensor({96}, DType::bf16, rng));
  Tensor one = gpu(test::random_tensor({1, 640}, DType::f32, rng)), two = gpu(test::random_tensor({2, 640}, DType::f32, rng));
  Tensor h = gpu(test::random_tensor({1, 96}, DType::f32, rng)), u = Tensor::zeros({1, 96}, DType::f32, Device::cuda);
  Tensor squares = Tensor::zeros({1, 8}, DType::f32, Device::cuda), few = Tensor::zeros({1, 7}, DType::f32, Device::cuda);
  EXPECT_TRUE(ops::matmul_residual_ok(one, tiled, {&h, &norm_w, 0.0f, &u, &squares}));
  EXPECT_FALSE(ops::matmul_residual_ok(two, tiled, {&h, &norm_w, 0.0f, &u, &squares})) << "two rows";
  EXPECT_FALSE(ops::matmul_residual_ok(one, rows, {&h, &norm_w, 0.0f, &u, &squares})) << "row layout";
  EXPECT_FALSE(ops::matmul_residual_ok(one, tiled, {&h, &norm_w, 0.0f, &u, &few})) << "6 squares, not in whole groups of 4";
  EXPECT_FALSE(ops::matmul_scaled_ok({&one, &squares, 0, 1e-6f}, tiled)) << "no squares";
  {
    PrecisionScope exact(ops::MatmulPrecision::f32);
    EXPECT_FALSE(ops::matmul_residual_ok(one, tiled, {&h, &norm_w, 0.0f, &u, &squares})) << "f32 mode";
    EXPECT_FALSE(ops::matmul_scaled_ok({&one, &squares, 6, 1e-6f}, tiled)) << "f32 mode";
  }
  Tensor wrong = Tensor::zeros({1, 95}, DType::f32, Device::cuda);
  EXPECT_THROW(ops::matmul_scaled({&one, &squares, 6, 1e-6f}, tiled, wrong), Error);
  EXPECT_THROW(ops::matmul_residual(two, tiled, {&h, &norm_w, 0.0f, &u, &squares}), Error);
}

// A MoE block's combine in the residual form (ops::moe_combine_shared_rank_residual): h + the combined
// row with the bits of moe_combine_shared_rank then add_rms_norm's h, u = h * (weight + offset), one
// sum of squares per 256 columns; refused past one token.
TEST_F(Cuda, moe_combine_into_the_residual_stream) {
  Rng rng(62);
  for (int64_t d : {2048, 2112, 640})
    for (float offset : {0.0f, 1.0f}) {
      const int64_t k = 8;
      const Tensor per_rank = gpu(test::random_tensor({k + 1, d}, DType::f32, rng)),
                   weights = gpu(test::random_tensor({1, k}, DType::f32, rng));
      const Tensor logit = gpu(test::random_tensor({1, 1}, DType::f32, rng)), h0 = test::random_tensor({1, d}, DType::f32, rng);
      const Tensor norm_host = test::random_tensor({d}, DType::bf16, rng), norm_w = gpu(norm_host);
      Tensor out = Tensor::zeros({1, d}, DType::f32, Device::cuda), h_ref = gpu(h0),
             x_ref = Tensor::zeros({1, d}, DType::f32, Device::cuda);
      ops::moe_combine_shared_rank(per_rank, weights, logit, out);
      ops::add_rms_norm(h_ref, out, norm_w, 1e-6f, x_ref, offset);
      Tensor h = gpu(h0), u = Tensor::zeros({1, d}, DType::f32, Device::cuda),
             squares = Tensor::zeros({1, d / 16}, DType::f32, Device::cuda);
      const ops::ResidualNorm r{&h, &norm_w, offset, &u, &squares};
      ASSERT_TRUE(ops::moe_combine_residual_ok(per_rank, r)) << d;
      const int64_t count = ops::moe_combine_shared_rank_residual(per_rank, weights, logit, r);
      EXPECT_EQ(count, (d + 255) / 256) << d;
      const Tensor hh = host(h), hr = host(h_ref), uh = host(u), sq = host(squares);
      EXPECT_EQ(0, std::memcmp(hh.raw(), hr.raw(), hh.nbytes())) << d << ": h + the combined row";
      int64_t u_wrong = 0;
      double want = 0.0, got = 0.0;
      for (int64_t i = 0; i < d; ++i) {
        const float v = hr.data<float>()[i];
        u_wrong += uh.data<float>()[i] != v * (load_as_f32(norm_host.raw(), DType::bf16, i) + offset);
        want += static_cast<double>(v) * v;
      }
      for (int64_t i = 0; i < count; ++i) got += sq.data<float>()[i];
      EXPECT_EQ(u_wrong, 0) << d;
      EXPECT_NEAR(got, want, 1e-5 * want) << d;
    }
  Tensor h = Tensor::zeros({2, 64}, DType::f32, Device::cuda), u = Tensor::zeros({2, 64}, DType::f32, Device::cuda);
  const Tensor norm_w = gpu(test::random_tensor({64}, DType::bf16, rng)), per_rank = Tensor::zeros({18, 64}, DType::f32, Device::cuda);
  Tensor squares = Tensor::zeros({1, 8}, DType::f32, Device::cuda);
  EXPECT_FALSE(ops::moe_combine_residual_ok(per_rank, {&h, &norm_w, 0.0f, &u, &squares})) << "two tokens";
}

// The bf16 copy that cuBLAS multiplies (dequantize.cu) holds, bit for bit, each weight's
// fma(scale, code, bias) rounded to bf16: the tiled and the row layout, dense weights, every code
// width, group and scale type, odd row counts.
TEST_F(Cuda, dequantized_copy_is_each_weights_bf16_rounding) {
  Rng rng(23);
  auto expect_copy = [](const Weight& want, const Weight& on_gpu, const std::string& what) {
    Tensor out = Tensor::zeros({want.rows, want.cols}, DType::bf16, Device::cuda);
    ops::cuda::dequantize_to_bf16(on_gpu, static_cast<__nv_bfloat16*>(out.raw()));
    const Tensor back = host(out);
    const auto* got = static_cast<const uint16_t*>(back.raw());
    int64_t wrong = 0;
    for (int64_t r = 0; r < want.rows; ++r)
      for (int64_t c = 0; c < want.cols; ++c) wrong += got[r * want.cols + c] != f32_to_bf16(ops::ref::weight_at_fma(want, r, c));
    EXPECT_EQ(wrong, 0) << what;
  };
  for (int group : {64, 128})
    for (DType st : {DType::bf16, DType::f16}) {
      const Weight w = test::random_quantized(48, 640, 4, group, st, rng);
      expect_copy(w, tiled_on_gpu(w), label("tiled g%d %s", group, dtype_name(st)));
    }
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (DType st : {DType::f32, DType::bf16, DType::f16})
        for (int64_t cols : {384, 640}) {
          const Weight w = test::random_quantized(37, cols, bits, group, st, rng);
          expect_copy(w, gpu(w), label("rows q%d g%d %s cols %lld", bits, group, dtype_name(st), static_cast<long long>(cols)));
        }
  const Weight odd = test::random_quantized(5, 96, 4, 32, DType::bf16, rng);
  expect_copy(odd, gpu(odd), "rows of 96 columns");
  const Weight dense = dense_weight(test::random_tensor({7, 100}, DType::f16, rng), "w");
  expect_copy(dense, gpu(dense), "dense f16");
}

// A tiled weight still works everywhere a weight is read: the bf16 prefill (dequantized for
// cuBLAS), the exact f32 kernels, the embedding lookup of a tied table, and stacking, where tiled
// parts stack into the tiling of the stack.
TEST_F(Cuda, tiled_weights_in_prefill_exact_mode_embedding_and_stacking) {
  Rng rng(22);
  Weight w = test::random_quantized(96, 640, 4, 64, DType::bf16, rng);
  const Weight tiled = tiled_on_gpu(w);
  {
    PrecisionScope fast(ops::MatmulPrecision::bf16);
    for (int64_t n : {9, 64}) check_matmul(w, n, rng, 1e-2, "rows q4 gemm");  // the row layout, for comparison
    for (int64_t n : {17, 64}) {                                              // past the tiled mat-vec's decode batches
      Tensor x = test::random_tensor({n, 640}, DType::f32, rng), ref = Tensor::zeros({n, 96}, DType::f32);
      ops::ref::matmul(x, w, ref);
      Tensor y = Tensor::zeros({n, 96}, DType::f32, Device::cuda);
      ops::matmul(gpu(x), tiled, y);
      EXPECT_LE(matmul_error(x, w, y, ref), 1e-2) << "tiled gemm n=" << n;
    }
  }
  {
    PrecisionScope exact(ops::MatmulPrecision::f32);
    for (int64_t n : {1, 3, 17}) {
      Tensor x = test::random_tensor({n, 640}, DType::f32, rng), ref = Tensor::zeros({n, 96}, DType::f32);
      ops::ref::matmul(x, w, ref);
      Tensor y = Tensor::zeros({n, 96}, DType::f32, Device::cuda);
      ops::matmul(gpu(x), tiled, y);
      EXPECT_LE(matmul_error(x, w, y, ref), 2e-5) << "tiled exact n=" << n;
    }
  }
  const std::vector<int32_t> ids = {0, 5, 5, 95, 17, 3, 16, 15};
  Tensor ref = Tensor::zeros({8, 640}, DType::f32), out = Tensor::zeros({8, 640}, DType::f32, Device::cuda);
  ops::ref::embedding(w, ids, ref);
  ops::embedding(tiled, ids, out);
  EXPECT_LE(relative_error(out, ref), 1e-6) << "tiled embedding";

  const std::vector<Weight> parts = {test::random_quantized(64, 640, 4, 64, DType::bf16, rng),
                                     test::random_quantized(48, 640, 4, 64, DType::bf16, rng)};
  std::vector<Weight> tiled_parts;
  for (const Weight& p : parts) tiled_parts.push_back(tiled_on_gpu(p));
  const Weight whole = ops::stack_rows(std::vector<const Weight*>{&parts[0], &parts[1]}, "stacked");
  const Weight stacked = ops::stack_rows(std::vector<const Weight*>{&tiled_parts[0], &tiled_parts[1]}, "stacked");
  EXPECT_EQ(stacked.layout, WeightLayout::tiles);
  expect_same_bytes(tiled_on_host(whole), stacked, "stacked tiled parts");
  EXPECT_FALSE(ops::can_stack_rows(std::vector<const Weight*>{&tiled_parts[0], &parts[1]})) << "layouts differ";
}

// The Hopper GEMM over tiled weights (gemm_tiles.cu) against sums on the host of the very products
// it forms — x rounded to bf16 times the weight's scale * code + bias rounded to bf16 — so that only
// the order of the f32 sums may differ (a misplaced column or row would be off by the size of a
// term). Shapes: a last row block and token tile cut short, fewer column steps than pipeline stages,
// column splits (few blocks, many steps), groups of 64 and 128. x handed over in bf16 gives the bits
// of f32 x, and a second call the same bits. matmul takes the kernel for prompts of up to 512 tokens
// over all but small weights, and up to 1,024 or 2,048 tokens over large ones.
TEST_F(Cuda, tiled_gemm_matches_sums_of_its_bf16_operands) {
  if (!ops::cuda::tiles_gemm_supported()) GTEST_SKIP() << "the tiled GEMM needs an sm_90 GPU";
  Rng rng(31);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  struct Shape {
    int64_t rows, cols;
    int group;
    std::vector<int64_t> ns;
  };
  for (const Shape& s :
       {Shape{8272, 128, 64, {300}}, Shape{592, 640, 128, {9, 128, 129}}, Shape{256, 3072, 64, {200}}, Shape{2048, 512, 128, {257}}}) {
    const Weight w = test::random_quantized(s.rows, s.cols, 4, s.group, DType::bf16, rng);
    const Weight tiled = tiled_on_gpu(w);
    std::vector<float> wv(static_cast<size_t>(s.rows * s.cols));
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.cols; ++c) wv[r * s.cols + c] = bf16_to_f32(f32_to_bf16(ops::ref::weight_at(w, r, c)));
    for (int64_t n : s.ns) {
      const std::string what = label("%lld x %lld g%d n=%lld", static_cast<long long>(s.rows), static_cast<long long>(s.cols), s.group,
                                     static_cast<long long>(n));
      Tensor x = test::random_tensor({n, s.cols}, DType::f32, rng), xb = Tensor::zeros({n, s.cols}, DType::bf16);
      for (int64_t i = 0; i < x.numel(); ++i) xb.data<uint16_t>()[i] = f32_to_bf16(x.data<float>()[i]);
      ASSERT_TRUE(ops::cuda::tiles_gemm_ok(tiled, gpu(x))) << what;
      Tensor y = Tensor::zeros({n, s.rows}, DType::f32, Device::cuda);
      ops::cuda::tiles_gemm(gpu(x), tiled, y);
      const Tensor yh = host(y);
      double worst = 0.0;
      for (int64_t i = 0; i < n; ++i)
        for (int64_t r = 0; r < s.rows; ++r) {
          double sum = 0.0, mag = 1e-30;
          for (int64_t c = 0; c < s.cols; ++c) {
            const double term = static_cast<double>(bf16_to_f32(xb.data<uint16_t>()[i * s.cols + c])) * wv[r * s.cols + c];
            sum += term;
            mag += std::abs(term);
          }
          worst = std::max(worst, std::abs(yh.data<float>()[i * s.rows + r] - sum) / mag);
        }
      EXPECT_LE(worst, 2e-5) << what;
      Tensor from_bf16 = Tensor::zeros({n, s.rows}, DType::f32, Device::cuda), again = Tensor::zeros({n, s.rows}, DType::f32, Device::cuda);
      ops::cuda::tiles_gemm(gpu(xb), tiled, from_bf16);
      ops::cuda::tiles_gemm(gpu(x), tiled, again);
      EXPECT_LE(relative_error(from_bf16, yh), 0.0) << what << " bf16 x";
      EXPECT_LE(relative_error(again, yh), 0.0) << what << " repeated";
    }
  }
  auto shaped = [](int64_t rows, int64_t cols) {  // the preference reads the shape only
    Weight w;
    w.rows = rows;
    w.cols = cols;
    return w;
  };
  EXPECT_FALSE(ops::cuda::tiles_gemm_preferred(shaped(64, 128), 512)) << "small weight";
  EXPECT_FALSE(ops::cuda::tiles_gemm_preferred(shaped(5120, 4096), 512)) << "o_proj-sized weight";
  EXPECT_TRUE(ops::cuda::tiles_gemm_preferred(shaped(6144, 5120), 512));
  EXPECT_FALSE(ops::cuda::tiles_gemm_preferred(shaped(6144, 5120), 513)) << "longer prompt, mid-sized weight";
  EXPECT_TRUE(ops::cuda::tiles_gemm_preferred(shaped(4096, 16384), 1024));
  EXPECT_FALSE(ops::cuda::tiles_gemm_preferred(shaped(4096, 16384), 1025)) << "few rows";
  EXPECT_TRUE(ops::cuda::tiles_gemm_preferred(shaped(16384, 4096), 2048));
  EXPECT_FALSE(ops::cuda::tiles_gemm_preferred(shaped(16384, 4096), 2049)) << "long prompt";
  const Weight f16_scales = tiled_on_gpu(test::random_quantized(64, 128, 4, 64, DType::f16, rng));
  EXPECT_FALSE(ops::cuda::tiles_gemm_ok(f16_scales, gpu(test::random_tensor({16, 128}, DType::f32, rng)))) << "f16 scales";
  const Weight rows = gpu(test::random_quantized(64, 128, 4, 64, DType::bf16, rng));
  EXPECT_FALSE(ops::cuda::tiles_gemm_ok(rows, gpu(test::random_tensor({16, 128}, DType::f32, rng)))) << "row layout";
}

// The GEMMs may write bf16 y (a prompt's stacked gate/up output, read once by silu_mul): the tiled
// GEMM rounds the very sums it writes as f32 (with and without column splits), cuBLAS's bf16 output
// stays within one bf16 rounding of its f32 output. Where the mat-vec runs (few rows, exact mode)
// matmul refuses bf16 y.
TEST_F(Cuda, gemm_bf16_output_is_its_f32_output_rounded) {
  Rng rng(32);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  auto within_rounding = [](const Tensor& y16, const Tensor& y32) {
    const Tensor a = host(y16), b = host(y32);
    double worst = 0.0;
    for (int64_t i = 0; i < b.numel(); ++i) {
      const double v = b.data<float>()[i];
      worst = std::max(worst, std::abs(bf16_to_f32(a.data<uint16_t>()[i]) - v) / (std::abs(v) * std::ldexp(1.0, -8) + 1e-6));
    }
    return worst;
  };
  for (auto [rows, cols, n] : {std::tuple<int64_t, int64_t, int64_t>{592, 640, 129}, {8272, 128, 300}, {256, 3072, 200}, {80, 192, 9}}) {
    const std::string what =
        label("%lld x %lld n=%lld", static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(n));
    const Weight w = test::random_quantized(rows, cols, 4, 64, DType::bf16, rng);
    ASSERT_EQ(ops::matmul_output_dtype(w, n, Device::cuda), DType::bf16) << what;
    const Tensor x = gpu(test::random_tensor({n, cols}, DType::f32, rng));
    Tensor y32 = Tensor::zeros({n, rows}, DType::f32, Device::cuda), y16 = Tensor::zeros({n, rows}, DType::bf16, Device::cuda);
    const Weight rows_layout = gpu(w);  // the dequantized copy and cuBLAS
    ops::matmul(x, rows_layout, y32);
    ops::matmul(x, rows_layout, y16);
    EXPECT_LE(within_rounding(y16, y32), 1.0) << what << " cuBLAS";
    if (!ops::cuda::tiles_gemm_supported()) continue;
    const Weight tiled = tiled_on_gpu(w);
    ops::cuda::tiles_gemm(x, tiled, y32);
    ops::cuda::tiles_gemm(x, tiled, y16);
    EXPECT_EQ(not_rounded(y16, y32), 0) << what << " tiled GEMM";
  }
  const Weight w = gpu(test::random_quantized(64, 128, 4, 64, DType::bf16, rng));
  Tensor few = gpu(test::random_tensor({8, 128}, DType::f32, rng)), y8 = Tensor::zeros({8, 64}, DType::bf16, Device::cuda);
  EXPECT_EQ(ops::matmul_output_dtype(w, 8, Device::cuda), DType::f32);
  EXPECT_THROW(ops::matmul(few, w, y8), Error);
  PrecisionScope exact(ops::MatmulPrecision::f32);
  Tensor many = gpu(test::random_tensor({100, 128}, DType::f32, rng)), y100 = Tensor::zeros({100, 64}, DType::bf16, Device::cuda);
  EXPECT_EQ(ops::matmul_output_dtype(w, 100, Device::cuda), DType::f32);
  EXPECT_THROW(ops::matmul(many, w, y100), Error);
  EXPECT_EQ(ops::matmul_output_dtype(w, 100, Device::cpu), DType::f32);
}

// Load-time preparation tiles GPU weights only in the bf16 mode, only once, and a tiled weight
// copied back to the host is refused by the CPU kernels instead of being misread.
TEST_F(Cuda, prepare_weight_tiles_in_bf16_mode_only) {
  Rng rng(23);
  const Weight w = test::random_quantized(32, 128, 4, 64, DType::bf16, rng);
  Weight exact = gpu(w), fast = gpu(w), odd = gpu(test::random_quantized(40, 128, 4, 64, DType::bf16, rng));
  {
    PrecisionScope p(ops::MatmulPrecision::f32);
    ops::prepare_weight(exact);
  }
  {
    PrecisionScope p(ops::MatmulPrecision::bf16);
    ops::prepare_weight(fast);
    ops::prepare_weight(fast);  // already tiled: unchanged
    ops::prepare_weight(odd);   // 40 rows: not whole tiles
  }
  EXPECT_EQ(exact.layout, WeightLayout::rows);
  EXPECT_EQ(odd.layout, WeightLayout::rows);
  ASSERT_EQ(fast.layout, WeightLayout::tiles);
  expect_same_bytes(tiled_on_host(w), fast, "prepared");
  Weight back = fast;
  back.data = host(fast.data);
  back.scales = host(fast.scales);
  back.biases = host(fast.biases);
  Tensor x = Tensor::zeros({1, 128}, DType::f32), y = Tensor::zeros({1, 32}, DType::f32);
  EXPECT_THROW(ops::matmul(x, back, y), Error);
}

// Weights stacked on the device (GatedDeltaNet's qkv/z/b/a, an MLP's gate/up) hold the parts' bytes
// in order, and a stacked mat-vec gives each part's result within the kernels' rounding.
TEST_F(Cuda, stacked_weights_on_the_device) {
  Rng rng(14);
  const std::vector<Weight> parts = {test::random_quantized(1024, 640, 4, 64, DType::bf16, rng),
                                     test::random_quantized(512, 640, 4, 64, DType::bf16, rng),
                                     test::random_quantized(48, 640, 4, 64, DType::bf16, rng)};
  std::vector<Weight> on_gpu;
  for (const Weight& w : parts) on_gpu.push_back(gpu(w));
  std::vector<const Weight*> host_list, gpu_list;
  for (size_t i = 0; i < parts.size(); ++i) host_list.push_back(&parts[i]), gpu_list.push_back(&on_gpu[i]);
  const Weight want = ops::stack_rows(host_list, "stacked");
  const Weight got = ops::stack_rows(gpu_list, "stacked");
  ASSERT_EQ(got.data.device(), Device::cuda);
  for (auto [a, b] : {std::pair{&want.data, &got.data}, {&want.scales, &got.scales}, {&want.biases, &got.biases}}) {
    const Tensor back = host(*b);
    ASSERT_EQ(std::memcmp(back.raw(), a->raw(), a->nbytes()), 0);
  }
  for (ops::MatmulPrecision p : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16}) {
    PrecisionScope scope(p);
    for (int64_t n : {1, 3}) {
      Tensor x = test::random_tensor({n, 640}, DType::f32, rng);
      Tensor all = Tensor::zeros({n, got.rows}, DType::f32, Device::cuda);
      ops::matmul(gpu(x), got, all);
      int64_t c0 = 0;
      for (const Weight& w : parts) {
        Tensor ref = Tensor::zeros({n, w.rows}, DType::f32);
        ops::ref::matmul(x, w, ref);
        EXPECT_LE(matmul_error(x, w, host(all).slice(1, c0, c0 + w.rows), ref), p == ops::MatmulPrecision::f32 ? 2e-5 : 4e-3)
            << ops::matmul_precision_name(p) << " n=" << n << " part at " << c0;
        c0 += w.rows;
      }
    }
  }
}

TEST_F(Cuda, dense_matmul_matches_ref_for_every_dtype) {
  Rng rng(12);
  PrecisionScope exact(ops::MatmulPrecision::f32);
  for (DType dt : {DType::bf16, DType::f16, DType::f32})
    for (auto [m, k] : {std::pair<int64_t, int64_t>{33, 31}, {65, 256}, {7, 1000}}) {
      Weight w = dense_weight(test::random_tensor({m, k}, dt, rng), "w");
      for (int64_t n : {1, 2, 8, 17}) check_matmul(w, n, rng, 2e-5, label("dense %s", dtype_name(dt)));
    }
}

TEST_F(Cuda, bf16_tensor_core_prefill_stays_within_bf16_rounding) {
  Rng rng(13);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  Weight q = test::random_quantized(300, 512, 4, 64, DType::bf16, rng);
  Weight d = dense_weight(test::random_tensor({300, 512}, DType::bf16, rng), "w");
  for (int64_t n : {9, 64, 133}) {
    check_matmul(q, n, rng, 1e-2, "q4 bf16 gemm");
    check_matmul(d, n, rng, 1e-2, "dense bf16 gemm");
  }
  // Every code width, group and scale type the word-wise dequantization takes, odd row counts.
  for (int bits : {4, 8})
    for (int group : {32, 64, 128})
      for (DType st : {DType::f32, DType::bf16, DType::f16}) {
        Weight w = test::random_quantized(37, 384, bits, group, st, rng);
        check_matmul(w, 11, rng, 1e-2, label("q%d g%d %s bf16 gemm", bits, group, dtype_name(st)));
      }
}

TEST_F(Cuda, strided_rows_in_and_out) {
  Rng rng(14);
  PrecisionScope exact(ops::MatmulPrecision::f32);
  Weight w = test::random_quantized(48, 128, 4, 32, DType::bf16, rng);
  Tensor base = Tensor::zeros({5, 128 + 4}, DType::f32);
  Tensor x = base.slice(1, 4, 132);
  test::fill_normal(x, rng);
  Tensor ref = Tensor::zeros({5, 48}, DType::f32);
  ops::ref::matmul(x, w, ref);
  Tensor ybase = Tensor::zeros({5, 60}, DType::f32, Device::cuda);
  Tensor y = ybase.slice(1, 8, 56);
  Tensor xg = Tensor::zeros({5, 132}, DType::f32, Device::cuda);
  xg.copy_from(base);
  ops::matmul(xg.slice(1, 4, 132), gpu(w), y);
  EXPECT_LE(matmul_error(x, w, y, ref), 2e-5);
}

TEST_F(Cuda, embedding_dense_and_quantized) {
  Rng rng(15);
  std::vector<int32_t> ids = {0, 5, 5, 99, 17, 3, 98};
  for (int bits : {0, 4, 8}) {
    Weight w =
        bits ? test::random_quantized(100, 96, bits, 32, DType::bf16, rng) : dense_weight(test::random_tensor({100, 96}, DType::bf16, rng));
    Tensor ref = Tensor::zeros({7, 96}, DType::f32), out = Tensor::zeros({7, 96}, DType::f32, Device::cuda);
    ops::ref::embedding(w, ids, ref);
    ops::embedding(gpu(w), ids, out);
    EXPECT_LE(relative_error(out, ref), 1e-6) << bits;
  }
}

TEST_F(Cuda, rms_norm_with_and_without_offset) {
  Rng rng(16);
  // Rows of whole 16-byte chunks up to 8,192 take the chunked kernel (4: one warp; 2052: a chunk count
  // off the threads), the others and 10,000 (past 8 values per thread) the plain one.
  for (int64_t d : {1, 4, 33, 256, 1023, 2052, 5120, 8192, 10000})
    for (float offset : {0.0f, 1.0f}) {
      Tensor x = test::random_tensor({7, d}, DType::f32, rng), w = test::random_tensor({d}, DType::bf16, rng);
      Tensor ref = Tensor::zeros({7, d}, DType::f32), out = Tensor::zeros({7, d}, DType::f32, Device::cuda);
      ops::ref::rms_norm(x, w, 1e-6f, ref, offset);
      ops::rms_norm(gpu(x), gpu(w), 1e-6f, out, offset);
      EXPECT_LE(relative_error(out, ref), 1e-5) << d;
    }
}

TEST_F(Cuda, add_rms_norm_is_bitwise_add_then_rms_norm) {
  Rng rng(28);
  // Rows of whole 16-byte chunks up to 8,192 take the chunked kernel (4: one warp; 2052: a chunk count
  // off the threads), the others and 10,000 (past 8 values per thread) the plain one.
  for (int64_t d : {1, 4, 33, 256, 1023, 2052, 5120, 8192, 10000})
    for (float offset : {0.0f, 1.0f}) {
      Tensor h = test::random_tensor({5, d}, DType::f32, rng), delta = test::random_tensor({5, d}, DType::f32, rng);
      Tensor w = test::random_tensor({d}, DType::bf16, rng);
      Tensor ref_h = h.clone(), ref = Tensor::zeros({5, d}, DType::f32);
      ops::ref::add(ref_h, delta, ref_h);
      ops::ref::rms_norm(ref_h, w, 1e-6f, ref, offset);
      Tensor fused_h = gpu(h), fused = Tensor::zeros({5, d}, DType::f32, Device::cuda);
      ops::add_rms_norm(fused_h, gpu(delta), gpu(w), 1e-6f, fused, offset);
      EXPECT_LE(relative_error(fused, ref), 1e-5) << d;
      EXPECT_LE(relative_error(fused_h, ref_h), 0.0) << d;
      Tensor split_h = gpu(h), split = Tensor::zeros({5, d}, DType::f32, Device::cuda);
      ops::add(split_h, gpu(delta), split_h);
      ops::rms_norm(split_h, gpu(w), 1e-6f, split, offset);
      const Tensor a = fused.to(Device::cpu), b = split.to(Device::cpu);
      EXPECT_EQ(0, std::memcmp(a.raw(), b.raw(), a.nbytes())) << d;
      // bf16 out (a prompt GEMM's input): each f32 result rounded once, h as with f32 out.
      Tensor h16 = gpu(h), out16 = Tensor::zeros({5, d}, DType::bf16, Device::cuda),
             norm16 = Tensor::zeros({5, d}, DType::bf16, Device::cuda);
      ops::add_rms_norm(h16, gpu(delta), gpu(w), 1e-6f, out16, offset);
      ops::rms_norm(split_h, gpu(w), 1e-6f, norm16, offset);
      EXPECT_LE(relative_error(h16, ref_h), 0.0) << d << " bf16 out";
      EXPECT_EQ(not_rounded(out16, a), 0) << d << " bf16 out (add_rms_norm)";
      EXPECT_EQ(not_rounded(norm16, a), 0) << d << " bf16 out (rms_norm)";
      // bf16 delta (a prompt GEMM's output): the bits of the f32 delta of the same values, either out.
      const Tensor delta16 = test::random_tensor({5, d}, DType::bf16, rng);
      Tensor widened = Tensor::zeros({5, d}, DType::f32);
      for (int64_t i = 0; i < widened.numel(); ++i) widened.data<float>()[i] = load_as_f32(delta16.raw(), DType::bf16, i);
      for (DType out_type : {DType::f32, DType::bf16}) {
        Tensor from16_h = gpu(h), from32_h = gpu(h);
        Tensor from16 = Tensor::zeros({5, d}, out_type, Device::cuda), from32 = Tensor::zeros({5, d}, out_type, Device::cuda);
        ops::add_rms_norm(from16_h, gpu(delta16), gpu(w), 1e-6f, from16, offset);
        ops::add_rms_norm(from32_h, gpu(widened), gpu(w), 1e-6f, from32, offset);
        for (auto [got, want] : {std::pair{&from16_h, &from32_h}, std::pair{&from16, &from32}}) {
          const Tensor g = got->to(Device::cpu), e = want->to(Device::cpu);
          EXPECT_EQ(0, std::memcmp(g.raw(), e.raw(), g.nbytes())) << d << " bf16 delta, " << dtype_name(out_type) << " out";
        }
      }
    }
  Tensor cpu_x = test::random_tensor({2, 64}, DType::f32, rng), cpu_out = Tensor::zeros({2, 64}, DType::bf16);
  EXPECT_THROW(ops::rms_norm(cpu_x, test::random_tensor({64}, DType::f32, rng), 1e-6f, cpu_out), Error) << "bf16 out on the CPU";
  Tensor cpu_h = test::random_tensor({2, 64}, DType::f32, rng), cpu_f32_out = Tensor::zeros({2, 64}, DType::f32);
  EXPECT_THROW(ops::add_rms_norm(cpu_h, test::random_tensor({2, 64}, DType::bf16, rng), test::random_tensor({64}, DType::f32, rng), 1e-6f,
                                 cpu_f32_out),
               Error)
      << "bf16 delta on the CPU";
}

// A decode step's position-dependent ops (RoPE, the KV store, attention) recorded once with the
// position in device memory, then replayed at other positions: each replay must give the bits the
// same ops give with host positions, in both precision modes (the fast one splits keys).
TEST_F(Cuda, recorded_step_reads_its_position_from_device_memory) {
  Rng rng(27);
  const int64_t heads = 8, kv = 2, d = 64, capacity = 768;
  ops::RopeConfig rc;
  rc.head_dim = static_cast<int>(d);
  rc.rotary_dim = 32;
  rc.theta = 1e6;
  const ops::RopeTable table(rc);
  const float scale = 0.125f;
  for (auto precision : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16}) {
    PrecisionScope scope(precision);
    Tensor q_src = gpu(test::random_tensor({1, heads, d}, DType::f32, rng));
    Tensor k_src = gpu(test::random_tensor({1, kv * d}, DType::f32, rng)), v_src = gpu(test::random_tensor({1, kv * d}, DType::f32, rng));
    Tensor cache_k = gpu(test::random_tensor({capacity, kv, d}, DType::f32, rng));
    Tensor cache_v = gpu(test::random_tensor({capacity, kv, d}, DType::f32, rng));
    Tensor step = Tensor::zeros({1}, DType::i32, Device::cuda);
    Tensor q = Tensor::zeros({1, heads, d}, DType::f32, Device::cuda), k = Tensor::zeros({1, kv * d}, DType::f32, Device::cuda);
    Tensor out = Tensor::zeros({1, heads, d}, DType::f32, Device::cuda);
    std::vector<int32_t> host_position{0};
    // The step's ops on a given cache with given positions.
    auto step_ops = [&](Tensor& ck, Tensor& cv, const ops::Positions& pos) {
      ops::copy(q_src, q);
      ops::copy(k_src, k);
      Tensor q3 = q, k3 = k.reshape({1, kv, d});
      ops::rope(q3, pos, table);
      ops::rope(k3, pos, table);
      Tensor ck2 = ck.reshape({capacity, kv * d}), cv2 = cv.reshape({capacity, kv * d});
      ops::store_rows(k, ck2, pos);
      ops::store_rows(v_src, cv2, pos);
      ops::attention(q3, ck, cv, pos, scale, out);
    };
    StepGraph graph;
    step_ops(cache_k, cache_v, {host_position, &step});  // once directly, as a model does: first uses allocate (the RoPE table)
    ASSERT_TRUE(graph.record([&] { step_ops(cache_k, cache_v, {host_position, &step}); })) << graph.last_error();
    for (int32_t p : {0, 1, 37, 300, 767}) {
      Tensor eager_k = cache_k.clone(), eager_v = cache_v.clone();
      device_memory::cuda_copy(step.raw(), &p, sizeof(p), device_memory::CopyKind::host_to_device);
      graph.replay();
      const Tensor replayed = out.to(Device::cpu), replayed_k = cache_k.to(Device::cpu);
      std::vector<int32_t> at{p};
      step_ops(eager_k, eager_v, {at, nullptr});
      const Tensor eager = out.to(Device::cpu), eager_kc = eager_k.to(Device::cpu);
      EXPECT_EQ(0, std::memcmp(replayed.raw(), eager.raw(), replayed.nbytes())) << "attention output at position " << p;
      EXPECT_EQ(0, std::memcmp(replayed_k.raw(), eager_kc.raw(), replayed_k.nbytes())) << "stored K rows at position " << p;
    }
  }
}

// (heads, kv heads, head dim, rotary dim, tokens) of the RoPE + cache-store tests below.
using HeadCase = std::tuple<int64_t, int64_t, int64_t, int, int64_t>;

// The attention layer's RoPE and KV-cache store in one launch give the four ops' bits: q, k and v
// as column views of one stacked projection, partial and full rotary dims, a few tokens (blocks of
// two heads; seven heads leave the last block one) and a prompt (a block per token), host positions
// and (in a recorded step) device positions.
TEST_F(Cuda, rope_and_store_gives_the_separate_ops_bits) {
  Rng rng(31);
  const int64_t capacity = 300;
  for (auto [heads, kv, d, rotary, n] :
       {HeadCase{8, 2, 64, 32, 5}, HeadCase{4, 4, 128, 128, 1}, HeadCase{6, 1, 256, 64, 17}, HeadCase{12, 4, 128, 96, 70}}) {
    ops::RopeConfig rc;
    rc.head_dim = static_cast<int>(d);
    rc.rotary_dim = rotary;
    rc.theta = 1e6;
    const ops::RopeTable table(rc);
    const Tensor stacked = gpu(test::random_tensor({n, (heads + 2 * kv) * d}, DType::f32, rng));
    const Tensor cache0 = gpu(test::random_tensor({capacity, kv * d}, DType::f32, rng));
    auto views = [&](Tensor& all) {
      return std::tuple{all.slice(1, 0, heads * d).reshape({n, heads, d}), all.slice(1, heads * d, (heads + kv) * d).reshape({n, kv, d}),
                        all.slice(1, (heads + kv) * d, (heads + 2 * kv) * d)};
    };
    for (int32_t first : {0, 40, static_cast<int32_t>(capacity - n)}) {
      std::vector<int32_t> pos(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = first + static_cast<int32_t>(i);
      Tensor a = stacked.clone(), b = stacked.clone();
      Tensor ka = cache0.clone(), va = cache0.clone(), kb = cache0.clone(), vb = cache0.clone();
      auto [qa, k3a, v2a] = views(a);
      ops::rope(qa, ops::Positions{pos, nullptr}, table);
      ops::rope(k3a, ops::Positions{pos, nullptr}, table);
      ops::store_rows(k3a.reshape({n, kv * d}), ka, ops::Positions{pos, nullptr});
      ops::store_rows(v2a, va, ops::Positions{pos, nullptr});
      auto [qb, k3b, v2b] = views(b);
      ops::rope_and_store(qb, k3b, v2b, ops::Positions{pos, nullptr}, table, kb, vb);
      const std::string what =
          label("d=%lld rotary=%d n=%lld first=%d", static_cast<long long>(d), rotary, static_cast<long long>(n), first);
      EXPECT_LE(relative_error(b, host(a)), 0.0) << what << ": q and k";
      EXPECT_LE(relative_error(kb, host(ka)), 0.0) << what << ": cached k";
      EXPECT_LE(relative_error(vb, host(va)), 0.0) << what << ": cached v";
    }
    // Recorded with the position on the device, replayed at several positions.
    Tensor device_pos = Tensor::zeros({n}, DType::i32, Device::cuda);
    std::vector<int32_t> host_pos(static_cast<size_t>(n), 0);
    Tensor c = stacked.clone(), kc = cache0.clone(), vc = cache0.clone();
    auto [qc, k3c, v2c] = views(c);
    auto step = [&] { ops::rope_and_store(qc, k3c, v2c, ops::Positions{host_pos, &device_pos}, table, kc, vc); };
    step();
    StepGraph graph;
    ASSERT_TRUE(graph.record(step)) << graph.last_error();
    for (int32_t first : {3, 100}) {
      std::vector<int32_t> pos(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = first + static_cast<int32_t>(i);
      ops::copy(stacked, c);
      device_memory::cuda_copy(device_pos.raw(), pos.data(), pos.size() * sizeof(int32_t), device_memory::CopyKind::host_to_device);
      graph.replay();
      Tensor a = stacked.clone(), ka = kc.clone(), va = vc.clone();
      auto [qa, k3a, v2a] = views(a);
      ops::rope(qa, ops::Positions{pos, nullptr}, table);
      ops::rope(k3a, ops::Positions{pos, nullptr}, table);
      ops::store_rows(k3a.reshape({n, kv * d}), ka, ops::Positions{pos, nullptr});
      ops::store_rows(v2a, va, ops::Positions{pos, nullptr});
      EXPECT_LE(relative_error(c, host(a)), 0.0) << "replayed at " << first;
      EXPECT_LE(relative_error(kc, host(ka)), 0.0) << "replayed at " << first;
      EXPECT_LE(relative_error(vc, host(va)), 0.0) << "replayed at " << first;
    }
  }
}

// Gated attention's per-head norms of q and k before rope_and_store, in one launch: the bits of
// rms_norm, rms_norm and rope_and_store, with q and its gate interleaved per head as the model
// leaves them (one token: views of the stacked projection; more: rows of their own), f32 and bf16
// norm weights (with the "w - 1" offset), rotary dims short of head_dim, rows of one chunk per lane
// and of lanes without one (d 96), and replayed from a recorded step at device positions. Prompts
// (64 tokens or more) keep the three launches.
TEST_F(Cuda, norm_rope_and_store_gives_the_separate_ops_bits) {
  Rng rng(32);
  const int64_t capacity = 200;
  for (auto [heads, kv, d, rotary, n] : {HeadCase{16, 2, 256, 64, 1}, HeadCase{24, 4, 256, 64, 1}, HeadCase{8, 2, 128, 128, 5},
                                         HeadCase{6, 1, 96, 32, 40}, HeadCase{4, 4, 512, 128, 3}, HeadCase{3, 1, 64, 64, 1}})
    for (DType wdtype : {DType::f32, DType::bf16}) {
      ops::RopeConfig rc;
      rc.head_dim = static_cast<int>(d);
      rc.rotary_dim = rotary;
      rc.theta = 1e7;
      const ops::RopeTable table(rc);
      const float eps = 1e-6f, offset = wdtype == DType::bf16 ? 1.0f : 0.0f;
      const Tensor qw = gpu(test::random_tensor({d}, wdtype, rng)), kw = gpu(test::random_tensor({d}, wdtype, rng));
      const Tensor stacked = gpu(test::random_tensor({n, (2 * heads + 2 * kv) * d}, DType::f32, rng));
      const Tensor cache0 = gpu(test::random_tensor({capacity, kv * d}, DType::f32, rng));
      // The layer's tensors over a copy of `stacked`: q_in, k and v, and q and the cache to write.
      struct Layer {
        Tensor all, q_in, k, v, q, cache_k, cache_v;
      };
      auto layer = [&](const Tensor& cache_k, const Tensor& cache_v) {
        Layer l{stacked.clone(), {}, {}, {}, Tensor::zeros({n, heads, d}, DType::f32, Device::cuda), cache_k.clone(), cache_v.clone()};
        Tensor qg = l.all.slice(1, 0, 2 * heads * d), k = l.all.slice(1, 2 * heads * d, (2 * heads + kv) * d);
        if (n > 1) qg = qg.clone(), k = k.clone();  // as the model copies them for a prompt
        l.q_in = qg.reshape({n, heads, 2 * d}).slice(2, 0, d).reshape({n * heads, d});
        l.k = k.reshape({n, kv, d});
        l.v = l.all.slice(1, (2 * heads + kv) * d, (2 * heads + 2 * kv) * d);
        return l;
      };
      auto separate = [&](Layer& l, const std::vector<int32_t>& pos) {
        Tensor q_rows = l.q.reshape({n * heads, d}), k_rows = l.k.reshape({n * kv, d});
        ops::rms_norm(l.q_in, qw, eps, q_rows, offset);
        ops::rms_norm(k_rows, kw, eps, k_rows, offset);
        ops::rope_and_store(l.q, l.k, l.v, ops::Positions{pos, nullptr}, table, l.cache_k, l.cache_v);
      };
      auto fused = [&](Layer& l, const ops::Positions& positions) {
        ops::norm_rope_and_store(l.q_in, qw, kw, eps, offset, l.q, l.k, l.v, positions, table, l.cache_k, l.cache_v);
      };
      auto expect_same = [&](const Layer& got, const Layer& want, const std::string& what) {
        EXPECT_LE(relative_error(got.q, host(want.q)), 0.0) << what << ": q";
        EXPECT_LE(relative_error(got.k, host(want.k)), 0.0) << what << ": k";
        EXPECT_LE(relative_error(got.all, host(want.all)), 0.0) << what << ": q_in and v untouched";
        EXPECT_LE(relative_error(got.cache_k, host(want.cache_k)), 0.0) << what << ": cached k";
        EXPECT_LE(relative_error(got.cache_v, host(want.cache_v)), 0.0) << what << ": cached v";
      };
      const std::string what =
          label("heads=%lld/%lld d=%lld rotary=%d n=%lld %s", static_cast<long long>(heads), static_cast<long long>(kv),
                static_cast<long long>(d), rotary, static_cast<long long>(n), dtype_name(wdtype));
      std::vector<int32_t> pos(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = 60 + static_cast<int32_t>(i);
      Layer a = layer(cache0, cache0), b = layer(cache0, cache0);
      const Tensor prompt = Tensor::zeros({64, kv, d}, DType::f32, Device::cuda),
                   prompt_q = Tensor::zeros({64, heads, d}, DType::f32, Device::cuda);
      EXPECT_FALSE(ops::cuda::norm_rope_and_store_fused(prompt_q.reshape({64 * heads, d}), prompt_q, prompt)) << what;
      separate(a, pos);
      EXPECT_TRUE(ops::cuda::norm_rope_and_store_fused(b.q_in, b.q, b.k)) << what;
      fused(b, ops::Positions{pos, nullptr});
      expect_same(b, a, what);

      // Recorded with the positions on the device, replayed at others.
      Tensor device_pos = Tensor::zeros({n}, DType::i32, Device::cuda);
      std::vector<int32_t> host_pos(static_cast<size_t>(n), 0);
      Layer c = layer(cache0, cache0);
      auto step = [&] { fused(c, ops::Positions{host_pos, &device_pos}); };
      step();
      StepGraph graph;
      ASSERT_TRUE(graph.record(step)) << graph.last_error();
      for (int32_t first : {0, static_cast<int32_t>(capacity - n)}) {
        for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = first + static_cast<int32_t>(i);
        Layer e = layer(c.cache_k, c.cache_v);  // the inputs afresh, and the cache as the replays left it
        ops::copy(e.all, c.all);
        if (n > 1) {
          ops::copy(e.q_in, c.q_in);
          ops::copy(e.k, c.k);
        }
        device_memory::cuda_copy(device_pos.raw(), pos.data(), pos.size() * sizeof(int32_t), device_memory::CopyKind::host_to_device);
        graph.replay();
        separate(e, pos);
        expect_same(c, e, what + " replayed at " + std::to_string(first));
      }
    }
}

// A batch's rotations and stores in one launch per 64 sequences, plain and with the head norms, into
// f32 and bf16 caches: each sequence's q, k and cache rows the bits of its own launch. 70 decode
// sequences (two launches) and a few of several rows, positions on the host and on the device (a
// recorded step, replayed at other positions).
TEST_F(Cuda, batched_rotations_and_stores_give_each_sequence_its_own_bits) {
  Rng rng(47);
  struct Case {
    int64_t heads, kv, d;
    int rotary;
    std::vector<int64_t> rows;
  };
  const std::vector<int64_t> decode(70, 1);
  for (const Case& c : {Case{24, 4, 256, 64, decode}, Case{14, 2, 64, 64, {1, 3, 1, 2}}, Case{8, 2, 128, 128, decode}})
    for (ops::KvFormat format : {ops::KvFormat::bf16, ops::KvFormat::f32})
      for (bool normed : {false, true})
        for (bool device_positions : {false, true}) {
          SCOPED_TRACE(label("heads=%lld/%lld d=%lld sequences=%zu %s%s%s", static_cast<long long>(c.heads), static_cast<long long>(c.kv),
                             static_cast<long long>(c.d), c.rows.size(), format == ops::KvFormat::bf16 ? "bf16" : "f32",
                             normed ? " normed" : "", device_positions ? " device positions" : ""));
          ops::RopeConfig rc;
          rc.head_dim = static_cast<int>(c.d);
          rc.rotary_dim = c.rotary;
          rc.theta = 1e6;
          const ops::RopeTable table(rc);
          const int64_t n = std::accumulate(c.rows.begin(), c.rows.end(), int64_t{0}), heads = c.heads, d = c.d;
          const Tensor q0 = gpu(test::random_tensor({n, heads, d}, DType::f32, rng)),
                       k0 = gpu(test::random_tensor({n, c.kv, d}, DType::f32, rng));
          const Tensor v = gpu(test::random_tensor({n, c.kv * d}, DType::f32, rng)),
                       q_in = gpu(test::random_tensor({n * heads, d}, DType::f32, rng));
          const Tensor qw = gpu(test::random_tensor({d}, DType::bf16, rng)), kw = gpu(test::random_tensor({d}, DType::bf16, rng));
          std::vector<int32_t> all_pos;
          std::vector<ops::SequenceCache> batch, solo;
          for (size_t s = 0, begin = 0; s < c.rows.size(); begin += static_cast<size_t>(c.rows[s]), ++s) {
            const int32_t first = static_cast<int32_t>(rng.integer(0, 40));
            for (int64_t i = 0; i < c.rows[s]; ++i) all_pos.push_back(first + static_cast<int32_t>(i));
            const ops::KvRows a = ops::KvRows::zeros(first + c.rows[s] + 3, c.kv, d, format, Device::cuda);
            const ops::KvRows b = ops::KvRows::zeros(a.rows(), c.kv, d, format, Device::cuda);
            batch.push_back({static_cast<int64_t>(begin), static_cast<int64_t>(begin) + c.rows[s], {}, a, a});
            solo.push_back({static_cast<int64_t>(begin), static_cast<int64_t>(begin) + c.rows[s], {}, b, b});
          }
          // K and v into one cache each side of a sequence: distinct ones.
          for (auto* seqs : {&batch, &solo})
            for (ops::SequenceCache& s : *seqs) s.v = ops::KvRows::zeros(s.k.rows(), c.kv, d, format, Device::cuda);
          Tensor pos_dev = gpu(Tensor::zeros({n}, DType::i32));
          device_memory::cuda_copy(pos_dev.raw(), all_pos.data(), all_pos.size() * sizeof(int32_t),
                                   device_memory::CopyKind::host_to_device);
          std::vector<Tensor> slices;
          slices.reserve(batch.size());
          for (ops::SequenceCache& s : batch) slices.push_back(pos_dev.slice(0, s.begin, s.end));
          for (size_t i = 0; i < batch.size(); ++i) {
            const std::span<const int32_t> host_rows(all_pos.data() + batch[i].begin, static_cast<size_t>(batch[i].end - batch[i].begin));
            batch[i].positions = {host_rows, device_positions ? &slices[i] : nullptr};
            solo[i].positions = {host_rows, nullptr};
          }
          Tensor qb = q0.clone(), kb = k0.clone(), qs = q0.clone(), ks = k0.clone();
          auto run_batch = [&] {
            if (normed) ops::norm_rope_and_store(q_in, qw, kw, 1e-6f, 1.0f, qb, kb, v, all_pos, table, batch);
            else ops::rope_and_store(qb, kb, v, all_pos, table, batch);
          };
          auto run_solo = [&] {
            for (const ops::SequenceCache& s : solo) {
              Tensor qr = qs.slice(0, s.begin, s.end), kr = ks.slice(0, s.begin, s.end);
              if (normed)
                ops::norm_rope_and_store(q_in.slice(0, s.begin * heads, s.end * heads), qw, kw, 1e-6f, 1.0f, qr, kr,
                                         v.slice(0, s.begin, s.end), s.positions, table, s.k, s.v);
              else ops::rope_and_store(qr, kr, v.slice(0, s.begin, s.end), s.positions, table, s.k, s.v);
            }
          };
          auto expect_same = [&](const std::string& what) {
            EXPECT_LE(relative_error(qb, host(qs)), 0.0) << what << ": q";
            EXPECT_LE(relative_error(kb, host(ks)), 0.0) << what << ": k";
            for (size_t i = 0; i < batch.size(); ++i) {
              const Tensor bk = host(batch[i].k.data), sk = host(solo[i].k.data), bv = host(batch[i].v.data), sv = host(solo[i].v.data);
              ASSERT_EQ(std::memcmp(bk.raw(), sk.raw(), bk.nbytes()), 0) << what << ": cached k of sequence " << i;
              ASSERT_EQ(std::memcmp(bv.raw(), sv.raw(), bv.nbytes()), 0) << what << ": cached v of sequence " << i;
            }
          };
          run_batch();
          run_solo();
          expect_same("launched");
          if (!device_positions) continue;
          StepGraph graph;
          ASSERT_TRUE(graph.record(run_batch)) << graph.last_error();
          for (int32_t& p : all_pos) p += 1;  // the next positions: the device's copy is what the replay reads
          device_memory::cuda_copy(pos_dev.raw(), all_pos.data(), all_pos.size() * sizeof(int32_t),
                                   device_memory::CopyKind::host_to_device);
          ops::copy(q0, qb);
          ops::copy(k0, kb);
          ops::copy(q0, qs);
          ops::copy(k0, ks);
          graph.replay();
          run_solo();
          expect_same("replayed a position later");
        }
}

TEST_F(Cuda, recording_refuses_allocation_and_host_waits) {
  StepGraph graph;
  EXPECT_FALSE(graph.record([] { Tensor::zeros({16}, DType::f32, Device::cuda); }));
  EXPECT_NE(graph.last_error().find("while recording"), std::string::npos) << graph.last_error();
  Tensor t = Tensor::zeros({16}, DType::f32, Device::cuda);
  EXPECT_FALSE(graph.record([&] { (void)t.to(Device::cpu); }));
  EXPECT_FALSE(graph.recorded());
  // The stream still works afterwards.
  ops::add(t, t, t);
  EXPECT_EQ(t.to(Device::cpu).data<float>()[0], 0.0f);
}

// A step recorded again over other buffers (a decode step after its sequences' caches moved) updates
// the kept recording in place, and the replay reads the new buffers; a step of other launches
// (another batch size) builds a recording of its own. Both replay what a direct run computes.
TEST_F(Cuda, a_step_recorded_again_over_other_buffers_updates_in_place) {
  Rng rng(5);
  const Tensor a = gpu(test::random_tensor({37, 19}, DType::f32, rng)), b = gpu(test::random_tensor({37, 19}, DType::f32, rng));
  Tensor out = Tensor::zeros({37, 19}, DType::f32, Device::cuda), other = Tensor::zeros({37, 19}, DType::f32, Device::cuda);
  StepGraph graph;
  ASSERT_TRUE(graph.record([&] { ops::add(a, a, out); })) << graph.last_error();
  EXPECT_FALSE(graph.updated_in_place());
  graph.replay();
  Tensor want = Tensor::zeros({37, 19}, DType::f32, Device::cuda);
  ops::add(a, a, want);
  EXPECT_LE(relative_error(out, host(want)), 0.0) << "first recording";

  graph.clear();
  EXPECT_FALSE(graph.recorded());
  ASSERT_TRUE(graph.record([&] { ops::add(b, a, other); })) << graph.last_error();
  EXPECT_TRUE(graph.updated_in_place()) << "same launch over other buffers";
  graph.replay();
  ops::add(b, a, want);
  EXPECT_LE(relative_error(other, host(want)), 0.0) << "updated recording reads the new buffers";

  ASSERT_TRUE(graph.record([&] {
    ops::add(a, b, out);
    ops::add(out, b, other);
  })) << graph.last_error();
  EXPECT_FALSE(graph.updated_in_place()) << "two launches where one was recorded";
  ops::copy(a, out);
  ops::copy(a, other);
  graph.replay();
  ops::add(a, b, want);
  EXPECT_LE(relative_error(out, host(want)), 0.0) << "rebuilt recording, first launch";
  ops::add(want, b, want);
  EXPECT_LE(relative_error(other, host(want)), 0.0) << "rebuilt recording, second launch";
}

TEST_F(Cuda, rope_partial_and_yarn) {
  Rng rng(17);
  for (auto [type, rotary] :
       {std::pair{ops::RopeConfig::Type::standard, 64}, {ops::RopeConfig::Type::standard, 16}, {ops::RopeConfig::Type::yarn, 64}}) {
    ops::RopeConfig c;
    c.type = type;
    c.head_dim = 64;
    c.rotary_dim = rotary;
    c.theta = 1e6;
    c.factor = type == ops::RopeConfig::Type::yarn ? 4.0 : 1.0;
    c.original_max_position = 4096;
    ops::RopeTable table(c);
    std::vector<int32_t> pos = {0, 1, 7, 4095, 70000};
    Tensor x = test::random_tensor({5, 3, 64}, DType::f32, rng);
    Tensor g = gpu(x);
    ops::ref::rope(x, pos, table);
    ops::rope(g, pos, table);
    EXPECT_LE(relative_error(g, x), 2e-6) << rotary;
  }
}

TEST_F(Cuda, elementwise_ops_and_softmax) {
  Rng rng(18);
  Tensor a = test::random_tensor({9, 77}, DType::f32, rng), b = test::random_tensor({9, 77}, DType::f32, rng);
  Tensor ref = Tensor::zeros({9, 77}, DType::f32), out = Tensor::zeros({9, 77}, DType::f32, Device::cuda);
  ops::ref::add(a, b, ref);
  ops::add(gpu(a), gpu(b), out);
  EXPECT_LE(relative_error(out, ref), 1e-7);
  ops::ref::silu_mul(a, b, ref);
  ops::silu_mul(gpu(a), gpu(b), out);
  EXPECT_LE(relative_error(out, ref), 1e-6);
  Tensor sm = a.clone(), smg = gpu(a);
  ops::ref::softmax(sm);
  ops::softmax(smg);
  EXPECT_LE(relative_error(smg, sm), 1e-6);
  Tensor bias = test::random_tensor({77}, DType::bf16, rng);
  Tensor y = a.clone(), yg = gpu(a);
  ops::ref::add_bias(y, bias);
  ops::add_bias(yg, gpu(bias));
  EXPECT_LE(relative_error(yg, y), 1e-7);
  // sigmoid_mul against its definition, and a strided copy.
  Tensor sg = Tensor::zeros({9, 77}, DType::f32, Device::cuda);
  ops::sigmoid_mul(gpu(a), gpu(b), sg);
  Tensor expect = Tensor::zeros({9, 77}, DType::f32);
  for (int64_t i = 0; i < a.numel(); ++i) expect.data<float>()[i] = a.data<float>()[i] / (1.0f + std::exp(-b.data<float>()[i]));
  EXPECT_LE(relative_error(sg, expect), 1e-6);
  Tensor wide = gpu(test::random_tensor({4, 3, 10}, DType::f32, rng));
  Tensor narrow = Tensor::zeros({4, 3, 5}, DType::f32, Device::cuda);
  ops::copy(wide.slice(2, 5, 10), narrow);
  EXPECT_LE(relative_error(narrow, host(wide).slice(2, 5, 10).clone()), 0.0);
}

TEST_F(Cuda, attention_prefill_decode_split_k_and_gqa) {
  Rng rng(19);
  struct Case {
    int64_t n, pos0, heads, kv_heads, d;
  };
  // Exact mode: the flash kernel at every n, unsplit. Fast mode: the decode kernel up to 8 queries,
  // the flash kernel with key splits between 9 and 63 (n = 17 at 700 keys splits), cuBLAS beyond.
  for (auto precision : {ops::MatmulPrecision::f32, ops::MatmulPrecision::bf16})
    for (Case c : {Case{1, 0, 4, 2, 64}, Case{1, 3000, 8, 2, 128}, Case{37, 0, 4, 4, 64}, Case{17, 100, 6, 2, 256}, Case{5, 40, 4, 1, 48},
                   Case{70, 200, 2, 1, 32}, Case{17, 700, 2, 1, 64}}) {
      PrecisionScope scope(precision);
      if (precision != ops::MatmulPrecision::f32 && c.n >= 64) continue;  // the cuBLAS path has its own test and tolerance
      const int64_t total = c.pos0 + c.n;
      Tensor q = test::random_tensor({c.n, c.heads, c.d}, DType::f32, rng);
      Tensor k = test::random_tensor({total + 3, c.kv_heads, c.d}, DType::f32, rng).slice(0, 0, total);
      Tensor v = test::random_tensor({total + 3, c.kv_heads, c.d}, DType::f32, rng).slice(0, 0, total);
      const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
      Tensor ref = Tensor::zeros({c.n, c.heads, c.d}, DType::f32), out = Tensor::zeros({c.n, c.heads, c.d}, DType::f32, Device::cuda);
      ops::ref::attention(q, k, v, c.pos0, scale, ref);
      Tensor kg = gpu(k), vg = gpu(v);
      ops::attention(gpu(q), kg, vg, c.pos0, scale, out);
      EXPECT_LE(relative_error(out, ref), 1e-5) << "n=" << c.n << " pos0=" << c.pos0 << " d=" << c.d;
    }
}

// One attention case against the reference. K/V sit in a cache with a spare head and spare rows, so
// the token stride exceeds kv_heads * d, as in the model's KV cache.
void check_attention(int64_t n, int64_t pos0, int64_t heads, int64_t kv_heads, int64_t d, double tolerance, Rng& rng) {
  const int64_t total = pos0 + n;
  Tensor q = test::random_tensor({n, heads, d}, DType::f32, rng);
  Tensor kbase = test::random_tensor({total + 3, kv_heads + 1, d}, DType::f32, rng);
  Tensor vbase = test::random_tensor({total + 3, kv_heads + 1, d}, DType::f32, rng);
  Tensor k = kbase.slice(0, 0, total).slice(1, 0, kv_heads), v = vbase.slice(0, 0, total).slice(1, 1, kv_heads + 1);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  Tensor ref = Tensor::zeros({n, heads, d}, DType::f32), out = Tensor::zeros({n, heads, d}, DType::f32, Device::cuda);
  ops::ref::attention(q, k, v, pos0, scale, ref);
  Tensor kg = gpu(kbase), vg = gpu(vbase);
  ops::attention(gpu(q), kg.slice(0, 0, total).slice(1, 0, kv_heads), vg.slice(0, 0, total).slice(1, 1, kv_heads + 1), pos0, scale, out);
  EXPECT_LE(relative_error(out, ref), tolerance)
      << "n=" << n << " pos0=" << pos0 << " heads=" << heads << "/" << kv_heads << " d=" << d << " " << test::seed_note();
}

TEST_F(Cuda, attention_decode_kernel_for_one_to_eight_queries) {
  Rng rng(25);
  PrecisionScope fast(ops::MatmulPrecision::bf16);  // exact mode sends every n to the flash kernel
  // d=30 takes the 4-byte-load path; 48 and 256 the 16-byte one; long caches split the keys.
  for (int64_t n = 1; n <= 8; ++n)
    for (auto [heads, kv_heads, d] : {std::tuple<int64_t, int64_t, int64_t>{24, 4, 256}, {4, 4, 48}, {6, 2, 30}, {8, 1, 128}, {2, 2, 64}})
      for (int64_t pos0 : {int64_t{0}, int64_t{5}, int64_t{700}, int64_t{4100}}) check_attention(n, pos0, heads, kv_heads, d, 1e-5, rng);
}

// Decode attention plans its key splits on the device from the live keys, so a query's bits do not
// depend on how many rows its cache has room for (granules or copies grow caches to different
// capacities; a recorded step holds its capacity's launch): bf16 caches of one content at several
// capacities, rows past the live ones filled with other values, give the same bits.
TEST_F(Cuda, decode_attention_bits_do_not_depend_on_the_cache_capacity) {
  Rng rng(29);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (auto [heads, kv, d] : {std::tuple<int64_t, int64_t, int64_t>{16, 2, 256}, {24, 4, 256}, {8, 1, 128}})
    for (int64_t n : {1, 3})
      for (int64_t live : {int64_t{5}, int64_t{200}, int64_t{777}}) {
        const int64_t pos0 = live - n;
        const Tensor q = gpu(test::random_tensor({n, heads, d}, DType::f32, rng));
        const Tensor content_k = test::random_tensor({1024, kv, d}, DType::bf16, rng),
                     content_v = test::random_tensor({1024, kv, d}, DType::bf16, rng);
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        std::vector<int32_t> pos(static_cast<size_t>(n));
        std::iota(pos.begin(), pos.end(), static_cast<int32_t>(pos0));
        Tensor first;
        for (int64_t capacity : {live, live + 37, int64_t{1024}}) {
          Tensor k = test::random_tensor({capacity, kv, d}, DType::bf16, rng), v = test::random_tensor({capacity, kv, d}, DType::bf16, rng);
          std::memcpy(k.raw(), content_k.raw(), static_cast<size_t>(live * kv * d) * 2);
          std::memcpy(v.raw(), content_v.raw(), static_cast<size_t>(live * kv * d) * 2);
          const ops::KvRows kr{gpu(k), {}, ops::KvFormat::bf16, d}, vr{gpu(v), {}, ops::KvFormat::bf16, d};
          Tensor out = Tensor::zeros({n, heads, d}, DType::f32, Device::cuda);
          ops::attention(q, kr, vr, ops::Positions{pos, nullptr}, scale, out);
          const std::string what =
              label("heads=%lld/%lld d=%lld n=%lld live=%lld capacity=%lld", static_cast<long long>(heads), static_cast<long long>(kv),
                    static_cast<long long>(d), static_cast<long long>(n), static_cast<long long>(live), static_cast<long long>(capacity));
          if (!first) first = host(out);
          else EXPECT_LE(relative_error(out, first), 0.0) << what;
        }
      }
}

// Gated attention's output gate applied where the decode kernel writes (unsplit) or where the split
// merge does: the bits of attention then sigmoid_mul, for one to eight queries, GQA groups of 1 to 8,
// the 4-byte-load path (d 30), short caches (one split) and long ones, the gate read in place from
// the rows that interleave each head's query and gate. The exact mode keeps the separate launch.
TEST_F(Cuda, gated_attention_decode_applies_the_gate_on_the_way_out) {
  Rng rng(28);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  for (int64_t n : {int64_t{1}, int64_t{3}, int64_t{8}})
    for (auto [heads, kv, d] : {std::tuple<int64_t, int64_t, int64_t>{16, 2, 256}, {24, 4, 256}, {8, 1, 128}, {6, 2, 30}, {4, 4, 64}})
      for (int64_t pos0 : {int64_t{0}, int64_t{9}, int64_t{700}}) {
        const int64_t capacity = pos0 + n + 40;
        const Tensor q = gpu(test::random_tensor({n, heads, d}, DType::f32, rng)),
                     qg = gpu(test::random_tensor({n, heads, 2 * d}, DType::f32, rng));
        const Tensor k = gpu(test::random_tensor({capacity, kv, d}, DType::f32, rng)),
                     v = gpu(test::random_tensor({capacity, kv, d}, DType::f32, rng));
        const Tensor gate = qg.slice(2, d, 2 * d);
        std::vector<int32_t> pos(static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) pos[static_cast<size_t>(i)] = static_cast<int32_t>(pos0 + i);
        const ops::Positions positions{pos, nullptr};
        Tensor want = Tensor::zeros({n, heads, d}, DType::f32, Device::cuda), got = Tensor::zeros({n, heads, d}, DType::f32, Device::cuda);
        ops::attention(q, k, v, positions, 0.1f, want);
        Tensor want_rows = want.reshape({n * heads, d});
        ops::sigmoid_mul(want_rows, gate.reshape({n * heads, d}), want_rows);
        ASSERT_TRUE(ops::cuda::attention_takes_gate(n));
        ops::gated_attention(q, k, v, positions, 0.1f, gate, got);
        EXPECT_LE(relative_error(got, host(want)), 0.0)
            << label("n=%lld heads=%lld/%lld d=%lld pos0=%lld", static_cast<long long>(n), static_cast<long long>(heads),
                     static_cast<long long>(kv), static_cast<long long>(d), static_cast<long long>(pos0));
      }
  EXPECT_FALSE(ops::cuda::attention_takes_gate(9));
  PrecisionScope exact(ops::MatmulPrecision::f32);
  EXPECT_FALSE(ops::cuda::attention_takes_gate(1));
}

// From 64 queries the fast mode runs on the tensor cores: the bf16 flash kernel for head dims 64, 128
// and 256 (bf16 Q, K, V and P: errors of a few 1e-3 of the largest output), cuBLAS in TF32 for the
// others. Odd query counts leave the last 64-query block part empty; a cache position ahead of the
// queries (a prompt continued after a cached prefix) shifts the causal diagonal into the key tiles,
// and key counts off the tile size leave the last tile part empty.
TEST_F(Cuda, attention_fast_mode_long_prefill) {
  Rng rng(26);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  check_attention(300, 0, 6, 2, 128, 1e-2, rng);
  check_attention(77, 0, 8, 1, 128, 1e-2, rng);
  check_attention(130, 700, 4, 1, 256, 1e-2, rng);
  check_attention(200, 33, 24, 4, 256, 1e-2, rng);
  check_attention(1000, 0, 16, 2, 256, 1e-2, rng);
  check_attention(64, 2047, 2, 2, 256, 1e-2, rng);
  check_attention(129, 2048, 4, 1, 128, 1e-2, rng);
  check_attention(64, 0, 4, 4, 128, 1e-2, rng);      // one 128-query block, its second warpgroup idle
  check_attention(1000, 37, 32, 8, 128, 1e-2, rng);  // the 24B shape's heads
  check_attention(64, 3, 3, 3, 48, 1e-2, rng);       // cuBLAS
  check_attention(100, 0, 2, 1, 96, 1e-2, rng);      // cuBLAS
  check_attention(2100, 0, 2, 1, 64, 1e-2, rng);     // many query blocks
  check_attention(65, 4031, 4, 2, 64, 1e-2, rng);    // one full block and one row
  check_attention(40, 10, 4, 2, 64, 1e-5, rng);      // under 64 queries: the f32 flash kernel, exact
}

// The Hopper flash kernel forms the same products as the mma.sync one (bf16 Q, K, V and P, f32
// sums and softmax), so the two differ only by the order of f32 sums, the exponent's rounding (the
// scale folded into one fma, the approximate 2^x) and the P that then rounds to bf16 the other way:
// a few 1e-4 of the largest output, far below the bf16 error both carry against the f32 reference,
// and far below what a misplaced tile or mask would do. Shapes: a last query
// block part empty and one whose second warpgroup has no query, a cache ahead of the queries that
// moves the diagonal into a tile, key counts off the 64-key tile, GQA groups of 1, 4 and 8.
TEST_F(Cuda, wgmma_flash_attention_matches_the_mma_sync_kernel) {
  if (!ops::cuda::wg::wgmma_runs()) GTEST_SKIP() << "no sm_90a code for this GPU";
  Rng rng(27);
  struct Shape {
    int64_t n, pos0, heads, kv_heads;
  };
  for (Shape c : {Shape{300, 0, 6, 2}, Shape{64, 0, 2, 2}, Shape{129, 2048, 4, 1}, Shape{1000, 37, 32, 8}, Shape{200, 4031, 8, 1}}) {
    constexpr int64_t d = 128;
    const int64_t keys = c.pos0 + c.n;
    Tensor q = gpu(test::random_tensor({c.n, c.heads, d}, DType::f32, rng));
    Tensor k = gpu(test::random_tensor({keys, c.kv_heads, d}, DType::f32, rng)),
           v = gpu(test::random_tensor({keys, c.kv_heads, d}, DType::f32, rng));
    Tensor fast = Tensor::zeros({c.n, c.heads, d}, DType::f32, Device::cuda),
           mma = Tensor::zeros({c.n, c.heads, d}, DType::f32, Device::cuda);
    const float scale = 1.0f / std::sqrt(static_cast<float>(d));
    auto view = [&](Tensor& out) { return ops::cuda::attn_view(q, k, v, c.pos0, nullptr, scale, out); };
    ASSERT_TRUE(ops::cuda::attention_flash_wgmma_ok(view(fast)));
    ops::cuda::attention_flash_wgmma(view(fast));
    ops::cuda::attention_flash_bf16(view(mma));
    Tensor ref = Tensor::zeros({c.n, c.heads, d}, DType::f32);
    ops::ref::attention(host(q), host(k), host(v), c.pos0, scale, ref);
    const std::string what = "n=" + std::to_string(c.n) + " pos0=" + std::to_string(c.pos0) + " heads=" + std::to_string(c.heads) + "/" +
                             std::to_string(c.kv_heads) + " " + test::seed_note();
    EXPECT_LE(relative_error(fast, mma), 1e-3) << what;
    EXPECT_LE(relative_error(fast, ref), 1e-2) << what;
    // A second call over the same inputs gives the same bits.
    Tensor again = Tensor::zeros({c.n, c.heads, d}, DType::f32, Device::cuda);
    ops::cuda::attention_flash_wgmma(view(again));
    EXPECT_EQ(relative_error(again, fast), 0.0) << what;
  }
  // Other head dims stay on the mma.sync kernel.
  Tensor q = gpu(test::random_tensor({100, 2, 64}, DType::f32, rng)), kv = gpu(test::random_tensor({100, 2, 64}, DType::f32, rng));
  Tensor out = Tensor::zeros({100, 2, 64}, DType::f32, Device::cuda);
  EXPECT_FALSE(ops::cuda::attention_flash_wgmma_ok(ops::cuda::attn_view(q, kv, kv, 0, nullptr, 0.125f, out)));
}

// Attention into bf16 (attention_output_dtype): the f32 result rounded once, bit for bit, whether
// the Hopper kernel writes it (head dim 128, long prompts) or another path's f32 result is rounded
// (head dim 64, or no sm_90a code); offered only where the Hopper kernel runs, and never in the
// exact mode or on the CPU.
TEST_F(Cuda, attention_bf16_out_is_the_f32_out_rounded) {
  Rng rng(31);
  PrecisionScope fast(ops::MatmulPrecision::bf16);
  struct Shape {
    int64_t n, pos0, heads, kv_heads, d;
  };
  for (Shape c : {Shape{300, 0, 6, 2, 128}, Shape{129, 2048, 4, 1, 128}, Shape{1000, 37, 32, 8, 128}, Shape{100, 5, 4, 2, 64}}) {
    const int64_t keys = c.pos0 + c.n;
    const Tensor q = gpu(test::random_tensor({c.n, c.heads, c.d}, DType::f32, rng));
    const Tensor k = gpu(test::random_tensor({keys, c.kv_heads, c.d}, DType::f32, rng)),
                 v = gpu(test::random_tensor({keys, c.kv_heads, c.d}, DType::f32, rng));
    Tensor f32 = Tensor::zeros({c.n, c.heads, c.d}, DType::f32, Device::cuda),
           b16 = Tensor::zeros({c.n, c.heads, c.d}, DType::bf16, Device::cuda);
    const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
    ops::attention(q, k, v, c.pos0, scale, f32);
    ops::attention(q, k, v, c.pos0, scale, b16);
    const std::string what = "n=" + std::to_string(c.n) + " d=" + std::to_string(c.d);
    EXPECT_EQ(not_rounded(b16, f32), 0) << what;
    EXPECT_EQ(ops::attention_output_dtype(c.n, c.d, Device::cuda) == DType::bf16, c.d == 128 && ops::cuda::wg::wgmma_runs()) << what;
  }
  EXPECT_EQ(ops::attention_output_dtype(63, 128, Device::cuda), DType::f32) << "under 64 queries";
  EXPECT_EQ(ops::attention_output_dtype(300, 128, Device::cpu), DType::f32) << "CPU";
  {
    PrecisionScope exact(ops::MatmulPrecision::f32);
    EXPECT_EQ(ops::attention_output_dtype(300, 128, Device::cuda), DType::f32) << "exact mode";
  }
  Tensor q = test::random_tensor({4, 2, 16}, DType::f32, rng), kv = test::random_tensor({4, 2, 16}, DType::f32, rng);
  Tensor cpu_b16 = Tensor::zeros({4, 2, 16}, DType::bf16);
  EXPECT_THROW(ops::attention(q, kv, kv, 0, 0.25f, cpu_b16), Error) << "bf16 out on the CPU";
}

TEST_F(Cuda, conv1d_with_rolling_state_across_calls) {
  Rng rng(20);
  for (int64_t channels : {5, 130, 1024}) {
    const int64_t kernel = 4;
    Tensor w = test::random_tensor({channels, kernel}, DType::bf16, rng);
    Tensor taps = ops::conv1d_taps(w);
    Tensor state_ref = test::random_tensor({kernel - 1, channels}, DType::f32, rng);
    Tensor state_gpu = gpu(state_ref);
    for (int64_t n : {1, 9, 64}) {
      Tensor x = test::random_tensor({n, channels}, DType::f32, rng);
      Tensor ref = Tensor::zeros({n, channels}, DType::f32), out = Tensor::zeros({n, channels}, DType::f32, Device::cuda);
      ops::ref::causal_conv1d_silu(x, state_ref, w, ref);
      ops::causal_conv1d_silu_taps(gpu(x), state_gpu, gpu(taps), out);
      EXPECT_LE(relative_error(out, ref), 1e-5) << channels << " n=" << n;
      EXPECT_LE(relative_error(state_gpu, state_ref), 0.0);
    }
  }
}

// The gated delta rule on the GPU against the reference for each (key heads, key dim, value heads,
// value dim), over calls of `lengths` tokens in turn, the state carried from one call to the next.
void expect_gated_delta_matches_reference(Rng& rng, std::initializer_list<std::tuple<int64_t, int64_t, int64_t, int64_t>> shapes,
                                          std::initializer_list<int64_t> lengths, DType dt_bias_type) {
  for (auto [hk, dk, hv, dv] : shapes) {
    ops::GatedDeltaShape s{hk, dk, hv, dv};
    Tensor a_log = test::random_tensor({hv}, DType::f32, rng, 0.5f), dt_bias = test::random_tensor({hv}, dt_bias_type, rng, 0.5f);
    Tensor state_ref = test::random_tensor({hv, dv, dk}, DType::f32, rng, 0.1f);
    Tensor state_gpu = gpu(state_ref);
    for (int64_t n : lengths) {
      Tensor q = test::random_tensor({n, hk * dk}, DType::f32, rng), k = test::random_tensor({n, hk * dk}, DType::f32, rng);
      Tensor v = test::random_tensor({n, hv * dv}, DType::f32, rng), a = test::random_tensor({n, hv}, DType::f32, rng);
      Tensor b = test::random_tensor({n, hv}, DType::f32, rng);
      Tensor ref = Tensor::zeros({n, hv * dv}, DType::f32), out = Tensor::zeros({n, hv * dv}, DType::f32, Device::cuda);
      ops::ref::gated_delta_rule(q, k, v, a, b, a_log, dt_bias, s, state_ref, ref);
      ops::gated_delta_rule(gpu(q), gpu(k), gpu(v), gpu(a), gpu(b), gpu(a_log), gpu(dt_bias), s, state_gpu, out);
      EXPECT_LE(relative_error(out, ref), 1e-4) << "dk=" << dk << " dv=" << dv << " n=" << n;
      EXPECT_LE(relative_error(state_gpu, state_ref), 1e-4) << "dk=" << dk << " dv=" << dv << " n=" << n;
    }
  }
}

TEST_F(Cuda, gated_delta_rule_decode_and_prefill_including_odd_key_dims) {
  Rng rng(21);
  expect_gated_delta_matches_reference(rng, {{2, 32, 4, 32}, {2, 128, 6, 128}, {1, 48, 3, 40}}, {1, 7, 130}, DType::bf16);
}

// Decode takes a kernel of its own for one token; token by token it gives the bits of the walk over
// the same tokens in one call (a prompt's short tail and decode agree with a longer walk).
TEST_F(Cuda, gated_delta_rule_one_token_steps_give_the_walks_bits) {
  Rng rng(29);
  for (auto [hk, dk, hv, dv] : {std::tuple<int64_t, int64_t, int64_t, int64_t>{2, 128, 6, 128}, {1, 48, 3, 40}, {2, 256, 4, 72}}) {
    ops::GatedDeltaShape s{hk, dk, hv, dv};
    const int64_t n = 9;
    Tensor a_log = gpu(test::random_tensor({hv}, DType::f32, rng, 0.5f)), dt_bias = gpu(test::random_tensor({hv}, DType::bf16, rng, 0.5f));
    Tensor state0 = test::random_tensor({hv, dv, dk}, DType::f32, rng, 0.1f);
    Tensor q = gpu(test::random_tensor({n, hk * dk}, DType::f32, rng)), k = gpu(test::random_tensor({n, hk * dk}, DType::f32, rng));
    Tensor v = gpu(test::random_tensor({n, hv * dv}, DType::f32, rng)), a = gpu(test::random_tensor({n, hv}, DType::f32, rng));
    Tensor b = gpu(test::random_tensor({n, hv}, DType::f32, rng));
    Tensor walk_state = gpu(state0), step_state = gpu(state0);
    Tensor walk = Tensor::zeros({n, hv * dv}, DType::f32, Device::cuda), steps = Tensor::zeros({n, hv * dv}, DType::f32, Device::cuda);
    ops::gated_delta_rule(q, k, v, a, b, a_log, dt_bias, s, walk_state, walk);
    for (int64_t t = 0; t < n; ++t) {
      Tensor row = steps.slice(0, t, t + 1);
      ops::gated_delta_rule(q.slice(0, t, t + 1), k.slice(0, t, t + 1), v.slice(0, t, t + 1), a.slice(0, t, t + 1), b.slice(0, t, t + 1),
                            a_log, dt_bias, s, step_state, row);
    }
    EXPECT_LE(relative_error(steps, host(walk)), 0.0) << "dk=" << dk << " dv=" << dv;
    EXPECT_LE(relative_error(step_state, host(walk_state)), 0.0) << "dk=" << dk << " dv=" << dv;
  }
}

TEST_F(Cuda, conv1d_parallel_prefill_for_other_kernel_sizes) {
  Rng rng(27);
  for (int64_t kernel : {2, 8})
    for (int64_t channels : {7, 300}) {
      Tensor w = test::random_tensor({channels, kernel}, DType::f32, rng);
      Tensor taps = ops::conv1d_taps(w);
      Tensor state_ref = test::random_tensor({kernel - 1, channels}, DType::f32, rng);
      Tensor state_gpu = gpu(state_ref);
      for (int64_t n : {300, 3, 17, 1}) {  // parallel, sequential, parallel with a partial run, decode
        Tensor x = test::random_tensor({n, channels}, DType::f32, rng);
        Tensor ref = Tensor::zeros({n, channels}, DType::f32), out = Tensor::zeros({n, channels}, DType::f32, Device::cuda);
        ops::ref::causal_conv1d_silu(x, state_ref, w, ref);
        ops::causal_conv1d_silu_taps(gpu(x), state_gpu, gpu(taps), out);
        EXPECT_LE(relative_error(out, ref), 1e-5) << "kernel=" << kernel << " channels=" << channels << " n=" << n;
        EXPECT_LE(relative_error(state_gpu, state_ref), 0.0) << "kernel=" << kernel << " channels=" << channels << " n=" << n;
      }
    }
}

TEST_F(Cuda, gated_delta_rule_long_prefill_and_wide_key_heads) {
  Rng rng(28);
  // 1000 tokens cross many staged tiles with a partial last one; dk=256 takes the 8-token tiles.
  expect_gated_delta_matches_reference(rng, {{2, 128, 6, 128}, {1, 256, 2, 72}, {2, 64, 2, 20}}, {1000, 1, 65}, DType::f32);
}

TEST_F(Cuda, gated_rms_norm_in_place) {
  Rng rng(22);
  Tensor x = test::random_tensor({5, 4 * 48}, DType::f32, rng), z = test::random_tensor({5, 4 * 48}, DType::f32, rng);
  Tensor w = test::random_tensor({48}, DType::f32, rng);
  Tensor ref = Tensor::zeros({5, 4 * 48}, DType::f32);
  ops::ref::gated_rms_norm(x, z, w, 1e-6f, ref);
  Tensor xg = gpu(x);
  ops::gated_rms_norm(xg, gpu(z), gpu(w), 1e-6f, xg);
  EXPECT_LE(relative_error(xg, ref), 1e-5);
}

TEST_F(Cuda, moe_row_moves_and_combine) {
  Rng rng(23);
  Tensor x = test::random_tensor({6, 40}, DType::f32, rng);
  std::vector<int32_t> src = {5, 0, 3}, dst = {0, 2, 1};
  Tensor out = Tensor::zeros({3, 40}, DType::f32, Device::cuda), expect = Tensor::zeros({3, 40}, DType::f32);
  ops::copy_rows(gpu(x), src, out, dst);
  ops::copy_rows(x, src, expect, dst);
  EXPECT_LE(relative_error(out, expect), 0.0);
  Tensor per_rank = test::random_tensor({6, 40}, DType::f32, rng), shared = test::random_tensor({3, 40}, DType::f32, rng);
  std::vector<float> w = {0.5f, 0.25f, 1.0f, -0.5f, 0.1f, 0.2f}, sw = {0.3f, 0.6f, 0.9f};
  Tensor combined = Tensor::zeros({3, 40}, DType::f32, Device::cuda), ref = Tensor::zeros({3, 40}, DType::f32);
  Tensor shared_gpu = gpu(shared);
  ops::moe_combine(gpu(per_rank), w, &shared_gpu, sw, combined);
  ops::moe_combine(per_rank, w, &shared, sw, ref);
  EXPECT_LE(relative_error(combined, ref), 1e-6);
}

TEST_F(Cuda, ops_refuse_tensors_on_two_devices) {
  Rng rng(24);
  Tensor a = test::random_tensor({2, 8}, DType::f32, rng);
  Tensor out = Tensor::zeros({2, 8}, DType::f32, Device::cuda);
  EXPECT_THROW(ops::add(a, gpu(a), out), Error);
}

TEST_F(Cuda, memory_limit_is_enforced_with_a_clear_error) {
  const size_t before = device_memory::cuda_memory_in_use();
  device_memory::set_cuda_memory_limit(before + (size_t{1} << 20));
  try {
    (void)Tensor::zeros({int64_t{1} << 24}, DType::f32, Device::cuda);
    ADD_FAILURE() << "a 64 MiB allocation passed a 1 MiB headroom";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gpu-memory-limit-mb"), std::string::npos) << e.what();
  }
  device_memory::set_cuda_memory_limit(0);
}

}  // namespace
}  // namespace sanctum
