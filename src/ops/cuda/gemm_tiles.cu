// The prefill GEMM over 4-bit tiled weights (WeightLayout::tiles, matvec_tiles.cuh) on Hopper's
// warpgroup MMA: y (n, rows) = x (n, k) · wᵀ, the weight dequantized in registers on its way into the
// tensor cores instead of into a bf16 copy of the whole matrix for cuBLAS (2.6 bytes of traffic per
// weight per forward, which a 512-token prompt does not amortise).
//
// A block takes 128 weight rows (two warpgroups of one m64 slab; each warp one row tile) and 256
// tokens (two MMAs of n = 128 per A fragment). Per 64-column step a lane loads its 16-byte share of
// its row tile (the tiled layout's one load per lane) with the scale and bias pair, three steps
// ahead, and turns them into the MMA's A fragments: w = scale * code + bias, one bf16 fma per pair
// of values. A step's MMAs go in two halves, one running while the other's fragments are made.
//
// x is rewritten once per call into per-step tiles already in the 128-byte swizzle the MMA reads
// (x_to_swizzled_tiles), so one bulk copy per step (32 KB, four stages, counted by shared-memory
// barriers) brings a block's 256 tokens in, with no per-thread copies and no proxy fence.
//
// A lane's 16 codes of a row are columns 16 t .. 16 t + 15 of the step; the cheap way to unpack
// them pairs code i with code i + 4 of a word, so the k16 slices see the columns in an order of
// their own: slice j position 2 t + e holds column 16 t + 8 (j / 2) + 2 (j % 2) + 4 e, position
// 2 t + 8 + e the one after it. x is written into that order when it is rounded to bf16 (any
// order of a dot product's terms gives the same sum in exact arithmetic; the f32 sums differ from
// cuBLAS's only by order).
//
// Weights with few row blocks split their columns over blockIdx.z into a workspace that one more
// kernel adds up in split order, so the result never depends on which block finishes first.
#include <cuda_bf16.h>

#include <cstdint>

#include "base/tuning.h"
#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/gemm_tiles.h"
#include "ops/cuda/tensor_core.cuh"
#include "ops/cuda/wgmma.cuh"

namespace sanctum::ops::cuda {

namespace {

constexpr int kTokens = 128;  // the MMA's n: a token tile
// A block: two warpgroups of one m64 slab each (128 rows) and two token tiles (256 tokens), so each
// dequantized A fragment feeds two MMAs (238 registers, one block per multiprocessor). On an H200 at
// 512 to 2,048 tokens this ran 5-12% faster than one token tile in two blocks per multiprocessor,
// which had run 0-10% faster than four warpgroups (256 rows) and one token tile (cuda_perf_test
// prefill_gemm; bench/RESULTS.md).
constexpr int kWarpgroups = 2;
constexpr int kBlockRowTiles = 4 * kWarpgroups;
constexpr int kThreads = 128 * kWarpgroups;
constexpr int kTokenTiles = 2;
constexpr int kBlockTokens = kTokenTiles * kTokens;
constexpr int kStages = 4;                                  // x tiles: the one read and up to three on their way
constexpr int kStageBytes = kBlockTokens * 128;             // 256 tokens x 64 bf16 columns
constexpr int kSharedBytes = kStages * kStageBytes + 1024;  // + room to align to 1,024
// Where it is preferred over the dequantized copy and cuBLAS (cuda_perf_test prefill_gemm on an H200,
// the 24B and 27B shapes; bench/RESULTS.md): up to 512 tokens, weights of 24M values or more (1.02-1.49x;
// the 5120 x 4096 o_proj, 21M, 0.92x); up to 1,024 tokens, weights of 48M values or more (1.01-1.30x);
// up to 2,048 tokens, those with 8,192 rows or more too (1.06-1.08x; the 5120-row down projections
// 0.98-1.02x). At 4,096 tokens the copy's cost is amortised and cuBLAS's GEMM as fast (0.93-1.01x).
constexpr int64_t kMinValues512 = int64_t{24} << 20;
constexpr int64_t kLargeValues = int64_t{48} << 20;
constexpr int64_t kLargeRows = 8192;

struct GemmArgs {
  const uint4* codes;
  const uint32_t* scales;  // 16-bit pairs (row g, row g + 8), per row tile and group
  const uint32_t* biases;
  int64_t row_tiles;
  int k_tiles, groups, group_shift;  // a step's group: its column tile >> group_shift
  const __nv_bfloat16* x;            // x_to_swizzled_tiles's tiles
  int64_t n, n_padded;
  void* y;  // (n, y_stride) rows of the kernel's T, or per split one (n, 16 row_tiles) f32 slab of a workspace
  int64_t y_stride, split_elems;
  int split_tiles;  // column tiles per split
};

#if SANCTUM_HAS_WGMMA
// Codes i and i + 4 of a word as the bf16 pair (128 + code) — the code in the low mantissa bits of
// 128 — with the mask and the or in one instruction (the compiler spends two: LOP3 takes one constant).
__device__ __forceinline__ __nv_bfloat162 code_pair(uint32_t word, int i) {
  uint32_t v;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(v) : "r"(word >> (4 * i)), "r"(0x000F000Fu), "r"(0x43004300u));
  return *reinterpret_cast<const __nv_bfloat162*>(&v);
}
__device__ __forceinline__ uint32_t bits_of(__nv_bfloat162 v) { return *reinterpret_cast<const uint32_t*>(&v); }
// The low (h = 0) or high 16 bits of a pair word, in both halves.
__device__ __forceinline__ __nv_bfloat162 broadcast(uint32_t pair, int h) {
  const uint32_t v = __byte_perm(pair, 0, h == 0 ? 0x1010 : 0x3232);
  return *reinterpret_cast<const __nv_bfloat162*>(&v);
}

// The A fragments of k16 slices 2 h and 2 h + 1 (half h of a step) from a lane's share of its row
// tile: scale * code + bias rounded once to bf16 (scale and bias are bf16, so the product is exact
// and the fma the only rounding, as in the dequantized copy).
__device__ __forceinline__ void dequantize_half(uint4 q, uint32_t s, uint32_t b, int h, uint32_t (&frag)[2][4]) {
  const __nv_bfloat162 k128 = __floats2bfloat162_rn(128.0f, 128.0f);
  const __nv_bfloat162 s_lo = broadcast(s, 0), s_hi = broadcast(s, 1), b_lo = broadcast(b, 0), b_hi = broadcast(b, 1);
  const uint32_t lo_word = h == 0 ? q.x : q.y, hi_word = h == 0 ? q.z : q.w;  // rows g and g + 8
#pragma unroll
  for (int jj = 0; jj < 2; ++jj) {
    const int i = 2 * jj;
    frag[jj][0] = bits_of(__hfma2(__hsub2(code_pair(lo_word, i), k128), s_lo, b_lo));
    frag[jj][1] = bits_of(__hfma2(__hsub2(code_pair(hi_word, i), k128), s_hi, b_hi));
    frag[jj][2] = bits_of(__hfma2(__hsub2(code_pair(lo_word, i + 1), k128), s_lo, b_lo));
    frag[jj][3] = bits_of(__hfma2(__hsub2(code_pair(hi_word, i + 1), k128), s_hi, b_hi));
  }
}
#endif

// T: the output's element type (float, or __nv_bfloat16: each f32 sum rounded once).
template <class T>
__global__ void __launch_bounds__(kThreads, 1) tiles_gemm_kernel(GemmArgs a) {
#if SANCTUM_HAS_WGMMA
  extern __shared__ uint8_t shared_raw[];
  __shared__ alignas(8) uint64_t full[kStages];  // stage s holds its step's x tile
  const uint32_t raw_address = tc::shared_address(shared_raw);
  const uint32_t tiles = raw_address + ((1024 - (raw_address & 1023)) & 1023);

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int64_t token0 = static_cast<int64_t>(blockIdx.x) * kBlockTokens;
  const int64_t rt = static_cast<int64_t>(blockIdx.y) * kBlockRowTiles + warp;
  const bool row_ok = rt < a.row_tiles;
  const int64_t row_tile = row_ok ? rt : a.row_tiles - 1;  // past the end: read the last tile, write nothing
  const int tile0 = blockIdx.z * a.split_tiles;
  const int steps = min(a.split_tiles, a.k_tiles - tile0);

  // Step i's x tile (contiguous, swizzled already) into stage i % kStages, by one thread.
  auto load_x = [&](int i) {
    const int stage = i % kStages;
    const __nv_bfloat16* src = a.x + (static_cast<int64_t>(tile0 + i) * a.n_padded + token0) * 64;
    wg::bulk_copy(tiles + stage * kStageBytes, src, kStageBytes, tc::shared_address(&full[stage]));
  };
  // Weight loads run kAhead steps ahead, step i's in slot i % kAhead; the step loop is unrolled by
  // kAhead so that the slots are registers fixed at compile time (a rotation cost 18 moves a step).
  constexpr int kAhead = 3;
  const uint4* codes = a.codes + (row_tile * a.k_tiles + tile0) * 32 + lane;
  const uint32_t* scales = a.scales + row_tile * a.groups * 8 + g;
  const uint32_t* biases = a.biases + row_tile * a.groups * 8 + g;
  uint4 q[kAhead];
  uint32_t sc[kAhead], bi[kAhead];
  auto load_w = [&](int i, int slot) {
    const uint32_t group = static_cast<uint32_t>(tile0 + i) >> a.group_shift;
    q[slot] = __ldg(codes + static_cast<uint32_t>(i) * 32u);
    sc[slot] = __ldg(scales + group * 8u);
    bi[slot] = __ldg(biases + group * 8u);
  };

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) wg::barrier_init(tc::shared_address(&full[s]), 1);
    wg::fence_shared_for_async();
  }
  __syncthreads();
  if (tid == 0)
    for (int i = 0; i < kStages - 1 && i < steps; ++i) load_x(i);
#pragma unroll
  for (int d = 0; d < kAhead; ++d)
    if (d < steps) load_w(d, d);

  float acc[kTokenTiles][64];
#pragma unroll
  for (int u = 0; u < kTokenTiles; ++u)
#pragma unroll
    for (int i = 0; i < 64; ++i) acc[u][i] = 0.0f;
  uint32_t frag[2][2][4];
  for (int i0 = 0; i0 < steps; i0 += kAhead) {
#pragma unroll
    for (int d = 0; d < kAhead; ++d) {
      const int i = i0 + d;
      if (i >= steps) break;
      const int stage = i % kStages;
      wg::barrier_wait(tc::shared_address(&full[stage]), (i / kStages) & 1);
      const uint32_t x_tile = tiles + stage * kStageBytes;
      // Groups complete in order: waiting until one is left frees the half about to be rewritten.
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        dequantize_half(q[d], sc[d], bi[d], h, frag[h]);
        if (h == 1 && i + kAhead < steps) load_w(i + kAhead, d);  // the slot is free once both halves are made
        wg::fence();
#pragma unroll
        for (int jj = 0; jj < 2; ++jj)
#pragma unroll
          for (int u = 0; u < kTokenTiles; ++u)
            wg::mma_m64n128k16(acc[u], frag[h][jj], wg::swizzled_k_major(x_tile + u * kTokens * 128 + 32 * (2 * h + jj)));
        wg::commit();
        wg::wait<1>();
      }
      __syncthreads();  // step i - 1's MMAs are done in every warp: its stage takes step i + kStages - 1
      if (tid == 0 && i + kStages - 1 < steps) load_x(i + kStages - 1);
    }
  }
  wg::wait<0>();

  if (!row_ok) return;
  T* y = static_cast<T*>(a.y) + blockIdx.z * a.split_elems;
  const int64_t row = row_tile * 16 + g;
#pragma unroll
  for (int u = 0; u < kTokenTiles; ++u)
#pragma unroll
    for (int j = 0; j < 16; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t token = token0 + u * kTokens + 8 * j + 2 * t + e;
        if (token < a.n) {
          y[token * a.y_stride + row] = float_as<T>(acc[u][4 * j + e]);
          y[token * a.y_stride + row + 8] = float_as<T>(acc[u][4 * j + 2 + e]);
        }
      }
#else
  __trap();  // never launched: the host offers this kernel only where wg::wgmma_runs() found it
#endif
}

// y (n, rows) = the splits' slabs added in order (in f32, then rounded once to T).
template <class T>
__global__ void add_splits(const float* __restrict__ parts, int splits, int64_t n, int64_t rows, T* __restrict__ y, int64_t y_stride) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * rows) return;
  float v = parts[i];
  for (int s = 1; s < splits; ++s) v += parts[s * n * rows + i];
  y[(i / rows) * y_stride + i % rows] = float_as<T>(v);
}

// Column slice position p of a 64-column step (see the top of the file) → the column it holds.
__device__ __forceinline__ int column_at(int p) {
  const int j = p >> 4, r = p & 15;
  return 16 * ((r & 7) >> 1) + 8 * (j >> 1) + 2 * (j & 1) + (r >> 3) + 4 * (r & 1);
}

// x (n, k) f32 or bf16 rows → bf16 tiles as the GEMM's stages take them: per 64-column step, the
// n_padded tokens' 128-byte rows one after another (tokens past n zero), each row's columns in the
// slices' order and its 16-byte chunk c stored at chunk c ^ (token % 8), the MMA's swizzle. A
// thread writes one chunk.
template <class T>
__global__ void x_to_swizzled_tiles(const T* __restrict__ x, int64_t stride, int64_t n, int64_t n_padded, int64_t k,
                                    __nv_bfloat16* __restrict__ out) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x, chunks = k / 8;
  if (i >= n_padded * chunks) return;
  const int64_t token = i / chunks, rest = i - token * chunks, tile = rest >> 3;
  const int chunk = static_cast<int>(rest & 7);
  __align__(16) __nv_bfloat16 v[8];
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const int64_t col = tile * 64 + column_at(chunk * 8 + e);
    if (token >= n) v[e] = __float2bfloat16(0.0f);
    else if constexpr (sizeof(T) == 4) v[e] = __float2bfloat16(x[token * stride + col]);
    else v[e] = x[token * stride + col];
  }
  __nv_bfloat16* dst = out + (tile * n_padded + token) * 64 + ((chunk ^ static_cast<int>(token & 7)) * 8);
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
}

Tensor& x_tiles_scratch() {
  static Tensor t;
  return t;
}
Tensor& split_scratch() {
  static Tensor t;
  return t;
}

// Column splits for a grid of `blocks` over `k_tiles` steps and an (n, rows) output: the fewest that
// minimise waves x steps per block (+ 3 steps a block spends filling its pipeline and writing out),
// plus, with splits, the adding of the slabs, counted as a step (about a microsecond on an H200) per
// 3 MB they move.
int column_splits(int64_t blocks, int k_tiles, int64_t outputs) {
  const int64_t places = multiprocessor_count();  // one block per multiprocessor
  int best = 1;
  int64_t best_cost = INT64_MAX;
  for (int s = 1; s <= 8 && (s == 1 || k_tiles / s >= 4); ++s) {
    const int64_t waves = (blocks * s + places - 1) / places, adding = s == 1 ? 0 : (s + 1) * outputs * 4 / 3'000'000;
    const int64_t cost = waves * ((k_tiles + s - 1) / s + 3) + adding;
    if (cost < best_cost) best = s, best_cost = cost;
  }
  return best;
}

bool wgmma_present() {
  static const bool present = [] {
    if (!wg::wgmma_runs()) return false;
    for (const void* kernel :
         {reinterpret_cast<const void*>(tiles_gemm_kernel<float>), reinterpret_cast<const void*>(tiles_gemm_kernel<__nv_bfloat16>)})
      check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes), "tiles gemm");
    return true;
  }();
  return present;
}

// x in the kernel's tiles, and the arguments but the output and the column splits.
GemmArgs prepare(const Tensor& x, const Weight& w) {
  const int64_t n = x.dim(0), k = w.cols, n_padded = (n + kBlockTokens - 1) / kBlockTokens * kBlockTokens;
  auto* xs = static_cast<__nv_bfloat16*>(scratch_bytes(x_tiles_scratch(), static_cast<size_t>(n_padded * k) * 2));
  const unsigned blocks = blocks_for(n_padded * k / 8, 256);
  if (x.dtype() == DType::f32) x_to_swizzled_tiles<<<blocks, 256, 0, stream()>>>(x.data<float>(), x.stride(0), n, n_padded, k, xs);
  else x_to_swizzled_tiles<<<blocks, 256, 0, stream()>>>(x.data<__nv_bfloat16>(), x.stride(0), n, n_padded, k, xs);
  check_launch("tiles_gemm x");
  GemmArgs a{};
  a.codes = static_cast<const uint4*>(w.data.raw());
  a.scales = static_cast<const uint32_t*>(w.scales.raw());
  a.biases = static_cast<const uint32_t*>(w.biases.raw());
  a.row_tiles = w.rows / 16;
  a.k_tiles = static_cast<int>(k / 64);
  a.groups = static_cast<int>(k / w.quant.group_size);
  a.group_shift = w.quant.group_size == 128 ? 1 : 0;
  a.x = xs;
  a.n = n;
  a.n_padded = n_padded;
  return a;
}

}  // namespace

bool tiles_gemm_supported() { return current_tuning().on(Knob::tiles_gemm) && wgmma_present(); }

bool tiles_gemm_ok(const Weight& w, const Tensor& x) {
  return w.layout == WeightLayout::tiles && w.scales.dtype() == DType::bf16 && (x.dtype() == DType::f32 || x.dtype() == DType::bf16) &&
         x.ndim() == 2 && x.dim(0) > 0 && x.dim(0) <= int64_t{65535} * kBlockTokens && w.rows / 16 <= int64_t{65535} * kBlockRowTiles &&
         tiles_gemm_supported();
}

bool tiles_gemm_preferred(const Weight& w, int64_t n) {
  const int64_t values = w.rows * w.cols;
  if (n <= 512) return values >= kMinValues512;
  if (n <= 1024) return values >= kLargeValues;
  return n <= 2048 && values >= kLargeValues && w.rows >= kLargeRows;
}

void tiles_gemm(const Tensor& x, const Weight& w, Tensor& y) {
  check(tiles_gemm_ok(w, x), ErrorKind::internal, "tiles_gemm: weight '" + w.name + "' or x is not one the tiled GEMM takes");
  GemmArgs a = prepare(x, w);
  const int64_t n = a.n, rows = w.rows;
  const dim3 blocks(static_cast<unsigned>(a.n_padded / kBlockTokens),
                    static_cast<unsigned>((a.row_tiles + kBlockRowTiles - 1) / kBlockRowTiles));
  const int splits = column_splits(static_cast<int64_t>(blocks.x) * blocks.y, a.k_tiles, n * rows);
  a.split_tiles = (a.k_tiles + splits - 1) / splits;
  const int used = (a.k_tiles + a.split_tiles - 1) / a.split_tiles;  // splits that get columns
  const dim3 grid(blocks.x, blocks.y, static_cast<unsigned>(used));
  const bool bf16_out = y.dtype() == DType::bf16;
  if (used == 1) {
    a.y = y.raw();
    a.y_stride = y.stride(0);
    if (bf16_out) tiles_gemm_kernel<__nv_bfloat16><<<grid, kThreads, kSharedBytes, stream()>>>(a);
    else tiles_gemm_kernel<float><<<grid, kThreads, kSharedBytes, stream()>>>(a);
    check_launch("tiles_gemm");
    return;
  }
  auto* parts = static_cast<float*>(scratch_bytes(split_scratch(), static_cast<size_t>(used * n * rows) * 4));
  a.y = parts;
  a.y_stride = rows;
  a.split_elems = n * rows;
  tiles_gemm_kernel<float><<<grid, kThreads, kSharedBytes, stream()>>>(a);
  check_launch("tiles_gemm");
  const unsigned add_blocks = blocks_for(n * rows, 256);
  if (bf16_out) add_splits<<<add_blocks, 256, 0, stream()>>>(parts, used, n, rows, y.data<__nv_bfloat16>(), y.stride(0));
  else add_splits<<<add_blocks, 256, 0, stream()>>>(parts, used, n, rows, y.data<float>(), y.stride(0));
  check_launch("tiles_gemm splits");
}

}  // namespace sanctum::ops::cuda
