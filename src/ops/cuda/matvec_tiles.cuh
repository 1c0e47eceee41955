#pragma once
// The tensor-core 4-bit mat-vec over weights reordered for it at load (WeightLayout::tiles), as a
// template over its tuning knobs so that a perf test can time the others.
//
// Layout, per block of 16 rows (row tile rt) and 64 columns (column tile kt): the tile's 512 code
// bytes lie together at tile index rt * k_tiles + kt, lane l's 16 bytes at 16 l: the 8 bytes of
// row g = l / 4 and the 8 of row g + 8 that hold columns 16 t .. 16 t + 15 (t = l % 4), in the MLX
// order. So a warp reads each tile with one 16-byte load per lane, all 512 bytes contiguous, where
// the row layout took two 8-byte loads per lane from 16 rows. Scales (and biases alike): per row
// tile, groups × 16 values, value (group, 2 g + h) for row g + 8 h, so that one 4-byte load gives a
// lane the pair (row g, row g + 8).
//
// The arithmetic is that of the row-layout kernel (matvec_mma_kernel.cuh), in the same order, so the
// two give the same bits where they split the columns alike: codes enter mma.sync as bf16 128 + q, x as bf16 in the lanes' code
// order, and y += scale * sum(code * x) + (bias - 128 scale) * sum(x) per group, the sums of x from
// one more mma with an all-ones A.
//
// Knobs: KS warps splitting a row tile's columns (tile kt to warp kt % KS), RT row tiles per warp
// sharing each x fragment, GT column tiles per scale group (1 for groups of 64, 2 for 128), DEPTH
// tiles in flight per warp, MINB blocks per multiprocessor.
//
// Gate/up pairs: an MLP's gate and up stacked into one weight (gate rows, then up rows) can leave
// silu(gate) * up instead of the 2 x rows sums: each warp takes a gate row tile and the up row tile
// of the same output rows (two row tiles per warp), so the SwiGLU needs no launch of its own. The
// sums are the unpaired kernel's; silu is the silu_mul kernel's, so the bits are those of the two.
// A MoE layer's chosen gate and up experts pair the same way, from their two tables.
//
// Column parts: where a matrix has too few row tiles to fill the GPU in whole waves (the 5120-row
// projections made 160 blocks for 264 places), blockIdx.y splits the columns into `parts` ranges.
// Each block leaves its sums in a workspace; the block that finishes a row range last adds the
// parts in order 0, 1, ... and writes y, so the result does not depend on which block ends last.
//
// Launched early (common.cuh): the first DEPTH tiles' loads are in flight before the kernel waits
// for the one that writes x, so the weight stream starts while that kernel finishes.
//
// The RMSNorm between two sub-blocks, split across the two mat-vecs around it (one x row; FUSE):
// the mat-vec that ends a sub-block (kResidualOut) adds its y to the residual stream h in place and
// leaves u = h * (norm weight + offset) and, per block row, the sum of the squares of its h values;
// the one that begins the next (kScaledIn) reads u as x and scales its sums by rsqrt(mean square +
// eps), which the partial sums give it at the end. So no add + RMSNorm launch stands between them,
// and neither reads more than it did. The sums are bf16(u) products scaled once, where the norm
// kernel's are of bf16(u * rsqrt): another rounding of the same size.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "base/tuning.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/matvec_mma_kernel.cuh"
#include "ops/cuda/matvec_split.h"
#include "ops/cuda/moe_combine.cuh"
#include "ops/cuda/moe_route.cuh"
#include "ops/cuda/norm_split.cuh"
#include "ops/cuda/tensor_core.cuh"
#include "ops/moe.h"

namespace sanctum::ops::cuda::tiles {

using mma::kWarps;

struct Args {
  const uint4* codes;
  const uint32_t* scales;  // 16-bit pairs, as above
  const uint32_t* biases;
  int64_t row_tiles;
  int k_tiles, groups;
  const float* x;
  int64_t x_stride;
  int n;
  float* y;
  int64_t y_stride;
  // Column parts (1: none): part p covers column tiles [p part_tiles, (p + 1) part_tiles), a
  // multiple of GT; part_sums holds (parts, n, rows) f32, part_counters one zero per block row.
  int parts = 1, part_tiles = 0;
  float* part_sums = nullptr;
  int* part_counters = nullptr;
  // Gate and up (launch's PAIRS): row tiles per half. A warp's two row tiles are q of the gate (from
  // codes, scales, biases) and q of the up projection (from UpTiles: for a gate and up stacked in one
  // weight, its second half), and y (n, 16 pair_tiles) receives silu(gate) * up in place of the
  // sums; row_tiles counts both halves.
  int64_t pair_tiles = 0;
  // Weight loads marked first to leave L2: they are read once per step, and so do not push out x or
  // the step's other data, which later kernels read again.
  bool evict_first = false;
};

// Where a gate/up pair's up row tiles live (launch's PAIRS): their codes, scales and biases, laid
// out as the gate's. Kept apart from Args: a larger Args made the plain kernel compile to 13% more
// instructions, with spills.
struct UpTiles {
  const uint4* codes = nullptr;
  const uint32_t* scales = nullptr;
  const uint32_t* biases = nullptr;
};

// The norm split across two mat-vecs (see the top).
enum Fuse : int { kPlain = 0, kResidualOut = 1, kScaledIn = 2 };
struct NormFusion {
  // kResidualOut: the stream (norm_split.cuh), squares one per block row.
  ResidualOut residual;
  // kScaledIn: y *= rsqrt(sum(squares[0, count)) / cols + eps).
  const float* in_squares = nullptr;
  int count = 0;
  float cols = 0.0f, eps = 0.0f;
};

// What the fused ends of a launch read, copied into shared memory as soon as the kernel may read it
// (the copies need no registers and nothing waits on them until the block's end, where a read from
// L2 had added its latency to every block): kScaledIn, the squares (count <= kMaxSquares);
// kResidualOut, h and the norm's weights for the block's rows (at most kStageRows, contiguous).
// Aligned for the 16-byte copies: a kernel's other shared variables may come first.
constexpr int kMaxSquares = 512, kStageRows = 256;
struct alignas(16) FusionStage {
  float values[kStageRows > kMaxSquares ? kStageRows : kMaxSquares];
  float weights[kStageRows];  // as stored: f32, or 16-bit values in the first half
};

__device__ __forceinline__ void copy_async(void* dst, const void* src, int bytes, int64_t available) {
  for (int i = threadIdx.x; i * 16 < bytes; i += blockDim.x)
    tc::copy16_async(static_cast<char*>(dst) + 16 * i, static_cast<const char*>(src) + 16 * i, 16 * int64_t{i} < available);
}

// kResidualOut: rows [row0, row0 + rows) of h (of h_rows) and of the norm's weights.
__device__ __forceinline__ void stage_residual(const ResidualOut& r, int64_t row0, int rows, int64_t h_rows, FusionStage& st) {
  const int esize = r.kind == FloatKind::f32 ? 4 : 2;
  const int64_t left = h_rows - row0;
  copy_async(st.values, r.h + row0, rows * 4, left * 4);
  copy_async(st.weights, static_cast<const char*>(r.weight) + row0 * esize, rows * esize, left * esize);
  tc::commit_copies();
}

__device__ __forceinline__ void stage_squares(const NormFusion& f, FusionStage& st) {
  copy_async(st.values, f.in_squares, (f.count + 3) / 4 * 16, int64_t{f.count} * 4);
  tc::commit_copies();
}

__device__ __forceinline__ float staged_weight(FloatKind kind, const FusionStage& st, int i) {
  switch (kind) {
    case FloatKind::bf16: return __bfloat162float(reinterpret_cast<const __nv_bfloat16*>(st.weights)[i]);
    case FloatKind::f16: return __half2float(reinterpret_cast<const __half*>(st.weights)[i]);
    default: return st.weights[i];
  }
}

// The RT row tiles of row group q (kWarps / KS groups per block): q RT .. q RT + RT - 1, or with
// gate/up pairs q and q + pair_tiles (as rows of the two halves counted together).
struct RowTiles {
  int64_t first, step;
  __device__ __forceinline__ int64_t operator[](int r) const { return first + r * step; }
};
template <int RT, bool PAIRS>
__device__ __forceinline__ RowTiles row_tiles_of(const Args& a, int64_t q) {
  if constexpr (PAIRS) return RowTiles{q, a.pair_tiles};
  else return RowTiles{q * RT, 1};
}

// The x rows of a grouped expert launch (grouped_expert_matvec): column c of the mma takes x row
// slots[c] / fan and its sums go to y row slots[c], so one expert's tiles serve up to 8 of its
// (token, rank) slots at once. Unused (slots null) in every other launch.
struct Gather {
  const int32_t* slots = nullptr;
  int fan = 1;
};

// Experts picked on the device (MoE decode): block row blockIdx.y is output row `slot` of expert
// ids[slot], whose addresses come from a (E, 3) table of codes, scales and biases; x row slot / fan.
// Two projections of the same shape over the same x (gate and up) share a launch: blockIdx.z picks
// table and y; or, as gate/up pairs, y[0] receives silu(gate) * up.
struct ExpertArgs {
  const int64_t* table[2];
  float* y[2];
  const int32_t* ids;
  int64_t row_tiles;  // of one expert
  int k_tiles, groups;
  const float* x;
  int64_t x_stride;
  int fan;
  int64_t y_stride;
  bool evict_first = false;  // as Args
  // Rows of each table, where the routed gate/up and the down + combine launches stage the tables in
  // shared memory (0: they read them in global memory; expert_matvec always does).
  int entries = 0;
};

// The expert tables, constant through a step, copied into shared memory (3 * entries words each)
// while the kernel waits for the one ahead: once a block knows its expert, the addresses are a
// shared-memory read rather than an L2 round trip more in the step's dependent chain. Returns e
// with its tables there; the caller's barrier makes the copies visible.
__device__ __forceinline__ ExpertArgs stage_tables(ExpertArgs e, int tables, int64_t* staged) {
  if (e.entries == 0) return e;
  const int words = 3 * e.entries;
  for (int t = 0; t < tables; ++t) {
    for (int i = threadIdx.x; i < words; i += blockDim.x) staged[t * words + i] = e.table[t][i];
    e.table[t] = staged + t * words;
  }
  return e;
}
// Shared memory for stage_tables.
inline size_t staged_table_bytes(const ExpertArgs& e, int tables) { return static_cast<size_t>(e.entries) * 3 * sizeof(int64_t) * tables; }

// Weights stream past L1 (read once; left to L1 they evict x, which every tile reads again); x stays.
// In L2 they keep the priority of `policy` (weight_policy).
__device__ __forceinline__ uint4 load_weight(const uint4* p, uint64_t policy) {
  uint4 v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
      : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
      : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint32_t load_weight(const uint32_t* p, uint64_t policy) {
  uint32_t v;
  asm("ld.global.nc.L1::no_allocate.L2::cache_hint.u32 %0, [%1], %2;" : "=r"(v) : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint64_t weight_policy(bool evict_first) {
  uint64_t first, normal;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(first));
  asm("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(normal));
  return evict_first ? first : normal;
}
__device__ __forceinline__ float4 load_x(const float* p) {
  float4 v;
  asm("ld.global.L1::evict_last.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
  return v;
}

template <class S>
__device__ __forceinline__ float pair_lo(uint32_t v) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return __uint_as_float(v << 16);
  else return __half2float(__ushort_as_half(static_cast<unsigned short>(v & 0xFFFFu)));
}
template <class S>
__device__ __forceinline__ float pair_hi(uint32_t v) {
  if constexpr (std::is_same_v<S, __nv_bfloat16>) return __uint_as_float(v & 0xFFFF0000u);
  else return __half2float(__ushort_as_half(static_cast<unsigned short>(v >> 16)));
}

// (a & mask) | bits in one instruction (the compiler otherwise spends two, as LOP3 takes one constant).
__device__ __forceinline__ uint32_t mask_or(uint32_t a, uint32_t mask, uint32_t bits) {
  uint32_t d;
  asm("lop3.b32 %0, %1, %2, %3, 0xEA;" : "=r"(d) : "r"(a), "r"(mask), "r"(bits));
  return d;
}

// x's 64 columns of one tile at xt as this lane's mma B fragments (bf16 pairs in the codes' order),
// with the sums of bf16(x) for columns 2t and 2t + 1 from one more mma with an all-ones A.
struct XFragment {
  uint32_t b[4][2];
  float sum[4];
};
__device__ __forceinline__ XFragment x_fragment(const float* xt) {
  const uint32_t ones = 0x3F803F80u;
  const float4 v0 = load_x(xt), v1 = load_x(xt + 4), v2 = load_x(xt + 8), v3 = load_x(xt + 12);
  XFragment x;
  x.b[0][0] = mma::bf16_pair(v0.x, v1.x);
  x.b[0][1] = mma::bf16_pair(v0.y, v1.y);
  x.b[1][0] = mma::bf16_pair(v0.z, v1.z);
  x.b[1][1] = mma::bf16_pair(v0.w, v1.w);
  x.b[2][0] = mma::bf16_pair(v2.x, v3.x);
  x.b[2][1] = mma::bf16_pair(v2.y, v3.y);
  x.b[3][0] = mma::bf16_pair(v2.z, v3.z);
  x.b[3][1] = mma::bf16_pair(v2.w, v3.w);
#pragma unroll
  for (int i = 0; i < 4; ++i) x.sum[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < 4; ++s) mma::mma_bf16(x.sum, ones, ones, ones, ones, x.b[s][0], x.b[s][1]);
  return x;
}

// What the loop computes per tile. kOneRow: x has one row, so the sums of the odd columns (acc[r][1]
// and [3]) are never stored and their FFMAs are skipped (12 of a 27B gate/up loop step's 263
// instructions at sm_90a); the even columns' sums keep their bits. The last two forms give wrong
// sums and exist for the perf test alone, as ceilings for what trimming the loop can buy: kOneRow
// with the codes entering the mma unpacked, and the loads with almost nothing computed from them.
enum LoopForm : int { kAllColumns = 0, kOneRow = 1, kRawCodes = 2, kLoadsOnly = 3 };

// One tile's share of y: acc[r] += the 16 x 64 weight tile of row tile r (this lane's codes, scale
// pairs and bias pairs) times x's tile fragment (FORM: kAllColumns, kOneRow or kRawCodes).
template <class S, int RT, int FORM = kAllColumns>
__device__ __forceinline__ void tile_dot(const uint4 (&codes)[RT], const uint32_t (&scale_pairs)[RT], const uint32_t (&bias_pairs)[RT],
                                         const XFragment& x, float (&acc)[RT][4]) {
  const uint32_t low_nibbles = 0x000F000Fu, bf16_128 = 0x43004300u;
  const auto& b = x.b;
  const auto& xsum = x.sum;
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    // Step s takes words x (s < 2) or y of rows g and g + 8, code pairs (j, j + 4) for j = 2 (s % 2), + 1.
    const uint32_t words[4] = {codes[r].x, codes[r].y, codes[r].z, codes[r].w};
    float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if constexpr (FORM == kRawCodes) {  // the loaded words as the A fragment of every step: no unpacking, no copies
#pragma unroll
      for (int s = 0; s < 4; ++s) mma::mma_bf16(c, words[0], words[1], words[2], words[3], b[s][0], b[s][1]);
    } else {
      uint32_t pairs[4][4];  // [word][j]: bf16 (128 + code j, 128 + code j + 4)
#pragma unroll
      for (int w = 0; w < 4; ++w)
#pragma unroll
        for (int j = 0; j < 4; ++j) pairs[w][j] = mask_or(words[w] >> (4 * j), low_nibbles, bf16_128);
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int wl = s >> 1, wh = 2 + (s >> 1), j = 2 * (s & 1);
        mma::mma_bf16(c, pairs[wl][j], pairs[wh][j], pairs[wl][j + 1], pairs[wh][j + 1], b[s][0], b[s][1]);
      }
    }
    const float sg = pair_lo<S>(scale_pairs[r]), sh = pair_hi<S>(scale_pairs[r]);
    const float bg = pair_lo<S>(bias_pairs[r]), bh = pair_hi<S>(bias_pairs[r]);
    const float og = fmaf(-128.0f, sg, bg), oh = fmaf(-128.0f, sh, bh);  // bias with the codes' 128 taken out
    acc[r][0] = fmaf(sg, c[0], fmaf(og, xsum[0], acc[r][0]));
    if constexpr (FORM == kAllColumns) acc[r][1] = fmaf(sg, c[1], fmaf(og, xsum[1], acc[r][1]));
    acc[r][2] = fmaf(sh, c[2], fmaf(oh, xsum[0], acc[r][2]));
    if constexpr (FORM == kAllColumns) acc[r][3] = fmaf(sh, c[3], fmaf(oh, xsum[1], acc[r][3]));
  }
}

// tile_dot over NB column blocks of x rows (8 each; x rows 8 nb .. 8 nb + 7 at xt + xoff[nb]): each
// row tile's codes are unpacked once and enter NB mmas, one per block. A column's sums are those
// tile_dot gives it alone (an mma's columns do not meet), so a row's result does not depend on the
// rows beside it.
template <class S, int RT, int NB>
__device__ __forceinline__ void tile_dot_blocks(const uint4 (&codes)[RT], const uint32_t (&scale_pairs)[RT],
                                                const uint32_t (&bias_pairs)[RT], const float* xt, const int (&xoff)[NB],
                                                float (&acc)[NB][RT][4]) {
  const uint32_t low_nibbles = 0x000F000Fu, bf16_128 = 0x43004300u;
  uint32_t pairs[RT][4][4];  // [row tile][word][j]: bf16 (128 + code j, 128 + code j + 4)
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const uint32_t words[4] = {codes[r].x, codes[r].y, codes[r].z, codes[r].w};
#pragma unroll
    for (int w = 0; w < 4; ++w)
#pragma unroll
      for (int j = 0; j < 4; ++j) pairs[r][w][j] = mask_or(words[w] >> (4 * j), low_nibbles, bf16_128);
  }
#pragma unroll
  for (int nb = 0; nb < NB; ++nb) {
    const XFragment x = x_fragment(xt + xoff[nb]);
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      float c[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const int wl = s >> 1, wh = 2 + (s >> 1), j = 2 * (s & 1);
        mma::mma_bf16(c, pairs[r][wl][j], pairs[r][wh][j], pairs[r][wl][j + 1], pairs[r][wh][j + 1], x.b[s][0], x.b[s][1]);
      }
      const float sg = pair_lo<S>(scale_pairs[r]), sh = pair_hi<S>(scale_pairs[r]);
      const float bg = pair_lo<S>(bias_pairs[r]), bh = pair_hi<S>(bias_pairs[r]);
      const float og = fmaf(-128.0f, sg, bg), oh = fmaf(-128.0f, sh, bh);
      acc[nb][r][0] = fmaf(sg, c[0], fmaf(og, x.sum[0], acc[nb][r][0]));
      acc[nb][r][1] = fmaf(sg, c[1], fmaf(og, x.sum[1], acc[nb][r][1]));
      acc[nb][r][2] = fmaf(sh, c[2], fmaf(oh, x.sum[0], acc[nb][r][2]));
      acc[nb][r][3] = fmaf(sh, c[3], fmaf(oh, x.sum[1], acc[nb][r][3]));
    }
  }
}

// kLoadsOnly's tile: x's 64 columns loaded as x_fragment loads them, and every loaded word folded into
// column 0's sums with a few instructions, so that no load is dropped.
template <int RT>
__device__ __forceinline__ void fold_loads(const uint4 (&codes)[RT], const uint32_t (&scale_pairs)[RT], const uint32_t (&bias_pairs)[RT],
                                           const float* xt, float (&acc)[RT][4]) {
  const float4 v0 = load_x(xt), v1 = load_x(xt + 4), v2 = load_x(xt + 8), v3 = load_x(xt + 12);
  const float xs = (v0.x + v0.y + v0.z + v0.w) + (v1.x + v1.y + v1.z + v1.w) + (v2.x + v2.y + v2.z + v2.w) + (v3.x + v3.y + v3.z + v3.w);
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const uint32_t bits = codes[r].x ^ codes[r].y ^ codes[r].z ^ codes[r].w ^ scale_pairs[r] ^ bias_pairs[r];
    acc[r][0] += __uint_as_float(bits & 0x3F7FFFFFu) + xs;
  }
}

// The end of a block: the KS warps of a row group add their sums in warp order, and lane (g, t) of
// the first writes its y elements, or with gate/up pairs silu(gate) * up (with column parts, first
// its part's sums; the block that ends a row range last adds the parts in order). Every thread of
// the block calls this. acc[nb]: the sums of x rows 8 nb .. 8 nb + 7 (NB blocks of 8).
// FUSE: kScaledIn multiplies the sums by the norm's scale; kResidualOut adds them to f.h instead of
// writing y (n 1; see NormFusion). st: what the launch staged for it (row0: its first row).
template <int KS, int RT, bool PAIRS, int FUSE = kPlain, int NB = 1, bool GATHER = false>
__device__ __forceinline__ void store_sums(const Args& a, float (&acc)[NB][RT][4], int64_t block, int part, const NormFusion& f = {},
                                           FusionStage* st = nullptr, int64_t row0 = 0, const Gather& gather = {}) {
  static_assert(NB == 1 || FUSE == kPlain, "a fused end takes one x row");
  static_assert(!GATHER || (NB == 1 && FUSE == kPlain), "gathered rows fill one column block of a plain launch");
  __shared__ float partial[KS > 1 ? kWarps : 1][RT][4][32];
  if constexpr (FUSE != kPlain) {
    tc::wait_copies<0>();  // the stage (and no copy may outlive a block that ends early, below)
    __syncthreads();       // every thread's copies
  }
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, slice = warp % KS;
  const int n = a.n;
  const RowTiles rt = row_tiles_of<RT, PAIRS>(a, block * (kWarps / KS) + warp / KS);  // recomputed: nothing held through the loop
#pragma unroll
  for (int nb = 0; nb < NB; ++nb) {
    if (KS > 1 && nb > 0) __syncthreads();  // the first warps have read the last block's partials
    mma::add_slices<KS, RT>(partial, acc[nb], warp, lane, slice);
  }
  // Element (r, q) of this lane in column block nb: y row and column, and whether it is one of y's.
  auto row_of = [&](int r, int q) { return rt[r] * 16 + g + (q >> 1) * 8; };
  auto col_of = [&](int nb, int q) { return 8 * nb + 2 * t + (q & 1); };
  auto stored = [&](int nb, int r, int q) { return slice == 0 && rt[r] < a.row_tiles && col_of(nb, q) < n; };
  // y's row of column c: c, or the column's slot in a grouped launch (read only where stored).
  auto y_row = [&](int c) -> int64_t {
    if constexpr (GATHER) return gather.slots[c];
    else return c;
  };
  if (a.parts > 1) {
    const int64_t rows = a.row_tiles * 16;
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (stored(nb, r, q)) a.part_sums[(static_cast<int64_t>(part) * n + col_of(nb, q)) * rows + row_of(r, q)] = acc[nb][r][q];
    __threadfence();
    __syncthreads();
    __shared__ bool last;
    if (threadIdx.x == 0) {
      last = atomicAdd(&a.part_counters[block], 1) == a.parts - 1;
      if (last) a.part_counters[block] = 0;  // ready for the next launch
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (stored(nb, r, q)) {
            const float* p = a.part_sums + static_cast<int64_t>(col_of(nb, q)) * rows + row_of(r, q);
            float sum = __ldcg(p);  // past L1: other multiprocessors wrote these
#pragma unroll 1
            for (int k = 1; k < a.parts; ++k) sum += __ldcg(p + static_cast<int64_t>(k) * n * rows);
            acc[nb][r][q] = sum;
          }
  }
  if constexpr (FUSE == kScaledIn) {
    const float k = norm_scale(st->values, f.count, f.cols, f.eps);  // every warp alike
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int q = 0; q < 4; ++q) acc[0][r][q] *= k;
  }
  if constexpr (FUSE == kResidualOut) {
    static_assert(!PAIRS, "a residual projection is a plain one");
    __shared__ float warp_squares[kWarps];
    float squares = 0.0f;
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (stored(0, r, q)) {  // column 0 only: n is 1
          const int64_t row = row_of(r, q);
          const int i = static_cast<int>(row - row0);
          const float v = add_to_stream(f.residual, row, st->values[i], acc[0][r][q], staged_weight(f.residual.kind, *st, i));
          squares += v * v;
        }
    squares = warp_sum(squares);
    if (lane == 0) warp_squares[warp] = squares;
    __syncthreads();
    if (threadIdx.x == 0) {
      float sum = 0.0f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) sum += warp_squares[w];
      f.residual.squares[block] = sum;
    }
  } else if constexpr (PAIRS) {  // the up row exists exactly where the pair does
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int q = 0; q < 4; ++q)
        if (stored(nb, 1, q)) a.y[y_row(col_of(nb, q)) * a.y_stride + row_of(0, q)] = silu(acc[nb][0][q]) * acc[nb][1][q];
  } else {
#pragma unroll
    for (int nb = 0; nb < NB; ++nb)
#pragma unroll
      for (int r = 0; r < RT; ++r)
#pragma unroll
        for (int q = 0; q < 4; ++q)
          if (stored(nb, r, q)) a.y[y_row(col_of(nb, q)) * a.y_stride + row_of(r, q)] = acc[nb][r][q];
  }
}

// Block `block` of the grid: kWarps / KS groups of RT row tiles. y (n, rows) f32, n <= 8 NB.
//
// The loop is kept lean (at one row tile per warp, 72 instructions per tile where per-tile pointer
// arithmetic, a branch on the x rows and spills had made 99), which is what let two row tiles per
// warp fit in 128 registers: pointers advance once per DEPTH tiles and the tiles between take
// immediate offsets; every lane reads an x row (row g, or 0 past n), so no branch splits the warp,
// and the B columns past n hold copies whose results are never stored.
// FUSE, f: the norm split across two mat-vecs (NormFusion). FORM: LoopForm (kOneRow and the perf
// test's forms: a.n is 1). NB: column blocks of 8 x rows, each tile's codes unpacked once for all
// (tile_dot_blocks; the plain form only). GATHER: x rows and y rows through `gather` (a grouped
// expert launch; a.x and a.y are the bases).
template <class S, int KS, int RT, int GT, int DEPTH, bool PAIRS = false, int FUSE = kPlain,
          int FORM = FUSE != kPlain ? kOneRow : kAllColumns, int NB = 1, bool GATHER = false>
__device__ __forceinline__ void matvec_body(const Args& a, int64_t block, int part, const UpTiles& up = {}, const NormFusion& f = {},
                                            const Gather& gather = {}) {
  static_assert((DEPTH * KS) % GT == 0, "a step of DEPTH tiles must cover whole scale groups");
  static_assert(NB == 1 || (FORM == kAllColumns && FUSE == kPlain), "several column blocks in the plain form only");
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, t = lane & 3, slice = warp % KS;
  const RowTiles rt = row_tiles_of<RT, PAIRS>(a, block * (kWarps / KS) + warp / KS);
  const int k_tiles = a.k_tiles, n = a.n, kt0 = part * a.part_tiles;
  const int count = (min(a.part_tiles, k_tiles - kt0) - slice + KS - 1) / KS;
  // Tile d of a step: codes + d * KS * 32 words, groups + (d * KS) / GT pairs of 8 (whole for d * KS
  // even; KS = 1 has slice 0), x + d * KS * 64 floats.
  const uint4* cp[RT];
  const uint32_t *sp[RT], *bp[RT];
#pragma unroll
  for (int r = 0; r < RT; ++r) {
    const uint4* codes = a.codes;
    const uint32_t *scales = a.scales, *biases = a.biases;
    int64_t tile = rt[r] < a.row_tiles ? rt[r] : a.row_tiles - 1;  // past the end: recompute the last tile, not written
    if constexpr (PAIRS) {                                         // tile q of each half, from its own tensors
      tile = rt[0] < a.pair_tiles ? rt[0] : a.pair_tiles - 1;
      if (r == 1) codes = up.codes, scales = up.scales, biases = up.biases;
    }
    cp[r] = codes + (tile * k_tiles + kt0 + slice) * 32 + lane;
    sp[r] = scales + (tile * a.groups + kt0 / GT + slice / GT) * 8 + g;
    bp[r] = biases + (tile * a.groups + kt0 / GT + slice / GT) * 8 + g;
  }
  const int64_t x_row = GATHER ? gather.slots[g < n ? g : 0] / gather.fan : (g < n ? g : 0);
  const float* xp = a.x + x_row * a.x_stride + 16 * t + (kt0 + slice) * 64;
  int xoff[NB];  // column block nb's x row for this lane (row 8 nb + g, or 0 past n), from xp's
#pragma unroll
  for (int nb = 0; nb < NB; ++nb) xoff[nb] = static_cast<int>(((8 * nb + g < n ? 8 * nb + g : 0) - (g < n ? g : 0)) * a.x_stride);
  const uint64_t policy = weight_policy(a.evict_first);
  float acc[NB][RT][4];
#pragma unroll
  for (int nb = 0; nb < NB; ++nb)
#pragma unroll
    for (int r = 0; r < RT; ++r)
#pragma unroll
      for (int i = 0; i < 4; ++i) acc[nb][r][i] = 0.0f;

  struct Tile {
    uint4 c[RT];
    uint32_t s[RT], b[RT];
  };
  auto fetch = [&](Tile& f, int d) {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      f.c[r] = load_weight(cp[r] + d * (KS * 32), policy);
      f.s[r] = load_weight(sp[r] + (d * KS) / GT * 8, policy);
      f.b[r] = load_weight(bp[r] + (d * KS) / GT * 8, policy);
    }
  };
  auto advance = [&] {
#pragma unroll
    for (int r = 0; r < RT; ++r) {
      cp[r] += DEPTH * KS * 32;
      sp[r] += DEPTH * KS / GT * 8;
      bp[r] += DEPTH * KS / GT * 8;
    }
  };
  // kOneRow: x has one row, as at the fused ends (NormFusion) and in the experts' gate/up pairs (a slot
  // is one token's row).
  auto process = [&](const Tile& f, const float* xt) {
    if constexpr (FORM == kLoadsOnly) fold_loads<RT>(f.c, f.s, f.b, xt, acc[0]);
    else if constexpr (NB > 1) tile_dot_blocks<S, RT, NB>(f.c, f.s, f.b, xt, xoff, acc);
    else tile_dot<S, RT, FORM>(f.c, f.s, f.b, x_fragment(xt), acc[0]);
  };

  // DEPTH tiles in flight per warp: each step processes DEPTH tiles and issues the loads of the next
  // DEPTH, so a tile's loads go out DEPTH tiles before it is used.
  Tile buf[DEPTH];
#pragma unroll
  for (int d = 0; d < DEPTH; ++d)
    if (d < count) fetch(buf[d], d);
  advance();
  allow_next_early();
  wait_for_previous();
  __shared__ std::conditional_t<FUSE == kPlain, char, FusionStage> staged[1];
  FusionStage* stage = nullptr;
  constexpr int64_t kBlockRows = int64_t{kWarps} / KS * RT * 16;
  static_assert(kBlockRows <= kStageRows || FUSE != kResidualOut, "a residual block's rows fit the stage");
  if constexpr (FUSE != kPlain) stage = &staged[0];
  if constexpr (FUSE == kScaledIn) stage_squares(f, *stage);
  if constexpr (FUSE == kResidualOut)
    stage_residual(f.residual, block * kBlockRows, static_cast<int>(kBlockRows), a.row_tiles * 16, *stage);
  int i = 0;
  for (; i + 2 * DEPTH <= count; i += DEPTH) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      process(buf[d], xp + d * (KS * 64));
      fetch(buf[d], d);
    }
    advance();
    xp += DEPTH * KS * 64;
  }
  // The last DEPTH to 2 DEPTH - 1 tiles: the loads of the final partial step are guarded.
  if (i + DEPTH <= count) {
#pragma unroll
    for (int d = 0; d < DEPTH; ++d) {
      process(buf[d], xp + d * (KS * 64));
      if (i + d + DEPTH < count) fetch(buf[d], d);
    }
    i += DEPTH;
    xp += DEPTH * KS * 64;
  }
#pragma unroll
  for (int d = 0; d < DEPTH; ++d)
    if (i + d < count) process(buf[d], xp + d * (KS * 64));

  store_sums<KS, RT, PAIRS, FUSE, NB, GATHER>(a, acc, block, part, f, stage, block * kBlockRows, gather);
}

template <class S, int KS, int RT, int GT, int DEPTH, int MINB, bool PAIRS, int FUSE = kPlain,
          int FORM = FUSE != kPlain ? kOneRow : kAllColumns, int NB = 1>
__global__ void __launch_bounds__(kWarps * 32, MINB) matvec(Args a, NormFusion f) {
  if constexpr (PAIRS)  // the stack's second half
    matvec_body<S, KS, RT, GT, DEPTH, PAIRS, FUSE, FORM, NB>(a, blockIdx.x, blockIdx.y,
                                                             {a.codes + a.pair_tiles * a.k_tiles * 32,
                                                              a.scales + a.pair_tiles * a.groups * 8,
                                                              a.biases + a.pair_tiles * a.groups * 8},
                                                             f);
  else matvec_body<S, KS, RT, GT, DEPTH, PAIRS, FUSE, FORM, NB>(a, blockIdx.x, blockIdx.y, {}, f);
}

// Expert `id`'s mat-vec in an expert launch: its tiles from table blockIdx.z (with PAIRS, table 0's
// gate experts as the first half of the pairs), n x rows from x, and y from row y_row of the launch's
// y (blockIdx.z's).
template <bool PAIRS>
__device__ __forceinline__ Args expert_launch_args(const ExpertArgs& e, int64_t id, const float* x, int n, int64_t y_row) {
  const int64_t* ent = (blockIdx.z == 0 ? e.table[0] : e.table[1]) + 3 * id;
  Args a{reinterpret_cast<const uint4*>(ent[0]),
         reinterpret_cast<const uint32_t*>(ent[1]),
         reinterpret_cast<const uint32_t*>(ent[2]),
         e.row_tiles,
         e.k_tiles,
         e.groups,
         x,
         e.x_stride,
         n,
         (blockIdx.z == 0 ? e.y[0] : e.y[1]) + y_row * e.y_stride,
         e.y_stride,
         1,
         e.k_tiles};
  a.evict_first = e.evict_first;
  if constexpr (PAIRS) {  // the stack of gate and up row tiles
    a.row_tiles = 2 * e.row_tiles;
    a.pair_tiles = e.row_tiles;
  }
  return a;
}

// Expert `id`'s up half of a gate/up pair launch (table 1).
__device__ __forceinline__ UpTiles expert_up_tiles(const ExpertArgs& e, int64_t id) {
  const int64_t* up = e.table[1] + 3 * id;
  return {reinterpret_cast<const uint4*>(up[0]), reinterpret_cast<const uint32_t*>(up[1]), reinterpret_cast<const uint32_t*>(up[2])};
}

// Block row `slot` of an expert launch through expert `id`. PAIRS: table[0] and table[1] are an
// MLP's gate and up experts, and y[0] receives silu(gate) * up (gridDim.z 1), each warp taking the
// gate and the up row tile of the same rows.
template <class S, int KS, int RT, int GT, int DEPTH, bool PAIRS>
__device__ __forceinline__ void expert_body(const ExpertArgs& e, int slot, int64_t id) {
  static_assert(RT == (PAIRS ? 2 : 1), "an expert row group is one row tile, or a gate/up pair");
  const Args a = expert_launch_args<PAIRS>(e, id, e.x + static_cast<int64_t>(slot / e.fan) * e.x_stride, 1, slot);
  if constexpr (PAIRS) matvec_body<S, KS, RT, GT, DEPTH, PAIRS, kPlain, kOneRow>(a, blockIdx.x, 0, expert_up_tiles(e, id));
  else  // the general loop: with kOneRow, ptxas spilled 148 bytes in the down + combine launch against its 16
    matvec_body<S, KS, RT, GT, DEPTH, PAIRS>(a, blockIdx.x, 0);
}

template <class S, int KS, int RT, int GT, int DEPTH, int MINB, bool PAIRS = false>
__global__ void __launch_bounds__(kWarps * 32, MINB) expert_matvec(ExpertArgs e) {
  wait_for_previous();  // the ids (and x) come from the kernels ahead; nothing is known before them
  expert_body<S, KS, RT, GT, DEPTH, PAIRS>(e, blockIdx.y, e.ids[blockIdx.y]);
}

// The MoE combine at the end of a decode token's down launch (its shared expert the last of k + 1
// ranks), straight into the residual stream with the next norm prepared, as the combine kernel's
// residual form does (moe.cu; norm_split.cuh): the block of each block column that ends last (an
// atomic count per column, as the column parts' hand-over) combines that column's rows, reading the
// other ranks' rows from L2, so no combine launch stands between the experts and the next layer.
// One sum of squares per block column.
struct DownCombine {
  const float* weights;  // (k) routing weights
  const float* shared_logit;
  int k;
  int* counters;  // one zero per block column, left zero
  ResidualOut residual;
};

template <class S, int KS, int GT, int DEPTH, int MINB>
__global__ void __launch_bounds__(kWarps * 32, MINB) expert_down_combine(ExpertArgs e, DownCombine c) {
  extern __shared__ int64_t staged_tables[];
  e = stage_tables(e, 1, staged_tables);
  wait_for_previous();  // the ids (and x) come from the kernels ahead
  const int32_t id = e.ids[blockIdx.y];
  __syncthreads();  // the staged table
  expert_body<S, KS, 1, GT, DEPTH, false>(e, blockIdx.y, id);
  __shared__ bool last;
  __shared__ float scratch[32];
  __threadfence();  // this block's rows, before its count
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(&c.counters[blockIdx.x], 1) == static_cast<int>(gridDim.y) - 1;
    if (last) c.counters[blockIdx.x] = 0;  // ready for the next launch
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  constexpr int kBlockRows = kWarps / KS * 16;
  static_assert(kBlockRows <= kWarps * 32, "a thread per row of the block column");
  const int64_t j = static_cast<int64_t>(blockIdx.x) * kBlockRows + threadIdx.x;
  float v = 0.0f;
  if (static_cast<int>(threadIdx.x) < kBlockRows && j < e.row_tiles * 16) {
    const float* y = e.y[0] + j;
    const auto rank = [&](int64_t r) { return __ldcg(y + r * e.y_stride); };  // past L1: other multiprocessors wrote these
    const float o = combine_column(c.weights, c.k, rank, true, *c.shared_logit);
    v = add_to_stream(c.residual, j, c.residual.h[j], o, load_float(c.residual.weight, c.residual.kind, j));
  }
  const float squares = block_sum(v * v, scratch);
  if (threadIdx.x == 0) c.residual.squares[blockIdx.x] = squares;
}

// The routing inside a gate/up pair launch (MoE decode): block row `slot` serves rank slot % ranks
// of token slot / ranks, and routes that token itself from its router logits with moe_route's code
// (moe_route.cuh; E <= 32 kRoutedLogitsPerLane), so no routing launch stands between the router and
// the experts. Rank k (ranks = k + 1) is the appended expert. Block (0, slot) writes ids[slot] for
// the launches after it. The routing weights, which no block of the launch needs, come from one block
// per token in `tokens` more block rows, beside the mat-vec blocks rather than ahead of any of them.
struct ExpertRouting {
  const float* logits;
  int64_t logits_stride;
  int E, k, tokens;
  int32_t appended_id;
  bool softmax_first, normalize;
  int32_t* ids;
  float* weights;
};

template <class S, int KS, int GT, int DEPTH, int MINB>
__global__ void __launch_bounds__(kWarps * 32, MINB) routed_expert_pairs(ExpertArgs e, ExpertRouting ro) {
  __shared__ int32_t chosen;
  extern __shared__ int64_t staged_tables[];
  e = stage_tables(e, 2, staged_tables);
  wait_for_previous();  // the logits and x come from the kernels ahead
  const int slots = static_cast<int>(gridDim.y) - ro.tokens;
  if (static_cast<int>(blockIdx.y) >= slots) {  // token blockIdx.y - slots: its k weights, from block x 0's first warp
    if (blockIdx.x != 0 || threadIdx.x >= 32) return;
    const int64_t t = blockIdx.y - slots;
    int32_t my_id = 0;
    float w = 0.0f;
    route::choose<kRoutedLogitsPerLane>(ro.logits + t * ro.logits_stride, ro.E, ro.k, ro.softmax_first, ro.normalize, my_id, w);
    if (static_cast<int>(threadIdx.x) < ro.k) ro.weights[t * ro.k + threadIdx.x] = w;
    return;
  }
  const int ranks = ro.appended_id >= 0 ? ro.k + 1 : ro.k;
  const int slot = blockIdx.y, rank = slot % ranks;
  if (threadIdx.x < 32) {
    int32_t id = ro.appended_id;
    if (rank < ro.k) {
      float v[kRoutedLogitsPerLane];
      route::load_logits(ro.logits + static_cast<int64_t>(slot / ranks) * ro.logits_stride, ro.E, v);
      int32_t my_id = 0;
      float my_logit = 0.0f;
      route::top_k(v, ro.E, rank + 1, my_id, my_logit);  // the first rank + 1 choices: this rank's is the last
      id = __shfl_sync(0xFFFFFFFFu, my_id, rank);
    }
    if (threadIdx.x == 0) {
      chosen = id;
      if (blockIdx.x == 0) ro.ids[slot] = id;
    }
  }
  __syncthreads();  // chosen, and the staged tables
  expert_body<S, KS, 2, GT, DEPTH, true>(e, slot, chosen);
}

// Grouped experts (MoE decode of many tokens): the (token, rank) slots that chose one expert, up to
// kExpertTaskSlots of them, form a task (ops::moe_expert_tasks), and block row blockIdx.y runs task
// blockIdx.y with the task's x rows as the mma's columns, so the expert's tiles are read once for
// all of them where expert_matvec reads them once per slot. A column's sums are those it has alone
// (the columns of an mma do not meet; kOneRow keeps the even columns' bits), so every slot gets
// expert_matvec's bits under the same column split. The grid has a block row per slot, the most
// tasks there can be; rows past the count end at once. PAIRS: gate/up pairs into y[0], as
// expert_body's.
template <class S, int KS, int RT, int GT, int DEPTH, int MINB, bool PAIRS = false>
__global__ void __launch_bounds__(kWarps * 32, MINB) grouped_expert_matvec(ExpertArgs e, const int32_t* tasks) {
  static_assert(RT == (PAIRS ? 2 : 1), "an expert row group is one row tile, or a gate/up pair");
  wait_for_previous();  // the tasks (and x) come from the kernels ahead
  if (static_cast<int>(blockIdx.y) >= tasks[0]) return;
  const int32_t* task = tasks + 1 + static_cast<int64_t>(blockIdx.y) * kExpertTaskWords;
  const int64_t id = task[0];
  const Args a = expert_launch_args<PAIRS>(e, id, e.x, task[1], 0);  // x and y rows through the gather
  const Gather gather{task + 2, e.fan};
  matvec_body<S, KS, RT, GT, DEPTH, PAIRS, kPlain, kAllColumns, 1, true>(a, blockIdx.x, 0, PAIRS ? expert_up_tiles(e, id) : UpTiles{}, {},
                                                                         gather);
}

inline Args args_of(const Weight& w, const float* x, int64_t xs, int n, float* y, int64_t ys) {
  return Args{static_cast<const uint4*>(w.data.raw()),
              static_cast<const uint32_t*>(w.scales.raw()),
              static_cast<const uint32_t*>(w.biases.raw()),
              w.rows / 16,
              static_cast<int>(w.cols / 64),
              static_cast<int>(w.cols / w.quant.group_size),
              x,
              xs,
              n,
              y,
              ys,
              1,
              static_cast<int>(w.cols / 64)};
}

static_assert(kSplitWarps == kWarps, "matvec_split.h counts the block's warps");

inline int column_split(int64_t row_tiles, int rt, int64_t k_tiles) {
  return tiles::column_split(row_tiles, rt, k_tiles, multiprocessor_count());
}

// Where fewer, longer blocks pay (matvec_split.h; tuning matvec_split_waves=0: column_split alone,
// for comparisons).
template <int MINB>
int dense_split(int64_t row_tiles, int rt, int64_t k_tiles) {
  return current_tuning().on(Knob::matvec_split_waves) ? dense_column_split(row_tiles, rt, k_tiles, multiprocessor_count(), MINB)
                                                       : column_split(row_tiles, rt, k_tiles);
}

// The column parts' workspace (matvec_tiles.cu; sizes in matvec_split.h): made once at its full
// size, so that the addresses a recorded step holds stay valid; kPartCounters zeros, which each
// launch leaves zero.
float* part_sums_workspace();
int* part_counters_workspace();

// Launches with the columns in `parts` parts (1: none). PAIRS: a.pair_tiles gate/up pairs (two row
// tiles per warp). FUSE, f: NormFusion. FORM: matvec_body's (the perf test times the others).
// Returns the block rows (kResidualOut: the squares written).
template <class S, int KS, int RT, int GT, int DEPTH, int MINB, bool PAIRS = false, int FUSE = kPlain,
          int FORM = FUSE != kPlain ? kOneRow : kAllColumns, int NB = 1>
int64_t launch_parts(Args a, int parts, const NormFusion& f = {}) {
  static_assert(!PAIRS || RT == 2, "a gate/up pair is two row tiles per warp");
  check((FORM == kAllColumns && FUSE == kPlain) || a.n == 1, ErrorKind::internal, "a fused end or a one-row loop form takes one x row");
  check(a.n >= 1 && a.n <= 8 * NB, ErrorKind::internal, "the tiled mat-vec's column blocks take 8 x rows each");
  constexpr int64_t tiles_per_block = kWarps / KS * RT;
  const int64_t blocks = (a.row_tiles + tiles_per_block - 1) / tiles_per_block;
  if (parts > 1) {
    a.part_tiles = (a.k_tiles + parts - 1) / parts;
    a.part_tiles += (GT - a.part_tiles % GT) % GT;
    a.parts = (a.k_tiles + a.part_tiles - 1) / a.part_tiles;
    a.part_sums = part_sums_workspace();
    a.part_counters = part_counters_workspace();
  }
  launch_early(matvec<S, KS, RT, GT, DEPTH, MINB, PAIRS, FUSE, FORM, NB>,
               dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(a.parts)), dim3(kWarps * 32), 0, a, f);
  return blocks;
}

// max_parts > 1: split the columns into parts where that fills the GPU better (column_parts, for the
// blocks per multiprocessor this kernel reaches).
template <class S, int KS, int RT, int GT, int DEPTH, int MINB, bool PAIRS = false, int FUSE = kPlain,
          int FORM = FUSE != kPlain ? kOneRow : kAllColumns, int NB = 1>
int64_t launch(const Args& a, int max_parts = 1, const NormFusion& f = {}) {
  int parts = 1;
  if (max_parts > 1) {
    static const int per_multiprocessor = [] {
      int b = 0;
      check_cuda(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&b, matvec<S, KS, RT, GT, DEPTH, MINB, PAIRS, FUSE, FORM, NB>, kWarps * 32,
                                                               0),
                 "mat-vec occupancy");
      return b;
    }();
    constexpr int64_t tiles_per_block = kWarps / KS * RT;
    parts = column_parts((a.row_tiles + tiles_per_block - 1) / tiles_per_block, int64_t{per_multiprocessor} * multiprocessor_count(),
                         a.k_tiles, KS, static_cast<int64_t>(a.n) * a.row_tiles * 16, max_parts);
  }
  return launch_parts<S, KS, RT, GT, DEPTH, MINB, PAIRS, FUSE, FORM, NB>(a, parts, f);
}

// Warps per row tile and column parts chosen together (dense_launch_shape; tuning matvec_joint_split=0:
// one after the other, for comparisons).
template <class S, int RT, int GT, int DEPTH, int MINB, bool PAIRS = false, int FUSE = kPlain,
          int FORM = FUSE != kPlain ? kOneRow : kAllColumns, int NB = 1>
int64_t launch_split(const Args& a, int max_parts = kMaxParts, const NormFusion& f = {}) {
  if (!current_tuning().on(Knob::matvec_joint_split) || max_parts <= 1)
    return with_split(dense_split<MINB>(a.row_tiles, RT, a.k_tiles),
                      [&]<int KS>() { return launch<S, KS, RT, GT, DEPTH, MINB, PAIRS, FUSE, FORM, NB>(a, max_parts, f); });
  const LaunchShape shape =
      dense_launch_shape(a.row_tiles, RT, a.k_tiles, multiprocessor_count(), MINB, max_parts, static_cast<int64_t>(a.n) * a.row_tiles * 16);
  return with_split(shape.ks, [&]<int KS>() { return launch_parts<S, KS, RT, GT, DEPTH, MINB, PAIRS, FUSE, FORM, NB>(a, shape.parts, f); });
}

// projections: 1, or 2 when table[1] / y[1] hold a second one; slots: rows of y. PAIRS: the two
// projections as gate/up pairs into y[0] (RT 2).
// routing (gate/up pairs only): the launch routes its tokens (routed_expert_pairs) and e.ids is ignored.
// tasks: the slots grouped by expert (grouped_expert_matvec, the same grid); e.ids is ignored.
template <class S, int KS, int RT, int GT, int DEPTH, int MINB, bool PAIRS = false>
void launch_experts(const ExpertArgs& e, int slots, int projections, const ExpertRouting* routing = nullptr,
                    const int32_t* tasks = nullptr) {
  const dim3 grid(static_cast<unsigned>((e.row_tiles + kWarps / KS - 1) / (kWarps / KS)), static_cast<unsigned>(slots),
                  static_cast<unsigned>(PAIRS ? 1 : projections));
  if (tasks != nullptr) return launch_early(grouped_expert_matvec<S, KS, RT, GT, DEPTH, MINB, PAIRS>, grid, dim3(kWarps * 32), 0, e, tasks);
  if constexpr (PAIRS) {
    if (routing != nullptr) {
      const dim3 routed(grid.x, static_cast<unsigned>(slots + routing->tokens));
      return launch_early(routed_expert_pairs<S, KS, GT, DEPTH, MINB>, routed, dim3(kWarps * 32), staged_table_bytes(e, 2), e, *routing);
    }
  }
  launch_early(expert_matvec<S, KS, RT, GT, DEPTH, MINB, PAIRS>, grid, dim3(kWarps * 32), 0, e);
}

// Expert matrices are small: a second wave of blocks would wait out the first's whole latency, so
// the column split stops where the blocks still fit on the multiprocessors at once.
inline int expert_column_split(int64_t row_tiles, int64_t k_tiles, int min_blocks) {
  int ks = column_split(row_tiles, 1, k_tiles);
  while (ks > 1 && row_tiles * ks > int64_t{kWarps} * min_blocks * multiprocessor_count()) ks /= 2;
  return ks;
}

// split_minb: the blocks per multiprocessor the column split is chosen for (MINB unless a caller keeps
// another tuning's split, and so its sums). The split depends on the slots alone, so a grouped launch
// (tasks) gives each slot the sums the per-slot launch gives it.
template <class S, int RT, int GT, int DEPTH, int MINB, bool PAIRS = false>
void launch_experts_split(const ExpertArgs& e, int slots, int projections, int split_minb = MINB, const ExpertRouting* routing = nullptr,
                          const int32_t* tasks = nullptr) {
  with_split(expert_column_split(e.row_tiles * slots * projections, e.k_tiles, split_minb),
             [&]<int KS>() { launch_experts<S, KS, RT, GT, DEPTH, MINB, PAIRS>(e, slots, projections, routing, tasks); });
}

// The down launch with the combine (expert_down_combine), with launch_experts_split's column split
// for one projection, so that its sums are expert_matvec's. Returns the block columns (the squares).
template <class S, int GT, int DEPTH, int MINB>
int64_t launch_experts_combine(const ExpertArgs& e, int slots, const DownCombine& c) {
  return with_split(expert_column_split(e.row_tiles * slots, e.k_tiles, MINB), [&]<int KS>() {
    const dim3 grid(static_cast<unsigned>((e.row_tiles + kWarps / KS - 1) / (kWarps / KS)), static_cast<unsigned>(slots));
    launch_early(expert_down_combine<S, KS, GT, DEPTH, MINB>, grid, dim3(kWarps * 32), staged_table_bytes(e, 1), e, c);
    return static_cast<int64_t>(grid.x);
  });
}

}  // namespace sanctum::ops::cuda::tiles
