// Long-prefill attention on Hopper's warpgroup MMA (wgmma, sm_90a), head dim 128, flash-attention
// style: the same sums as attention_flash_bf16.cu (bf16 Q, K, V and P, f32 scores, online softmax in
// base 2, f32 output), with the products on the warpgroup MMA instead of mma.sync.
//
// A block takes 128 queries of one head, two warpgroups of 64. Q stays in registers as the MMA's A
// fragments for the whole key walk. Per 64-key tile a warpgroup computes S = Q Kᵀ (m64n64k16, K read
// K-major from shared memory), masks and exponentiates it in registers, and adds P V (m64n128k16, P
// from registers: the layout S comes out in is the one A goes in, V read MN-major from shared memory).
//
// K and V are rewritten once per call into 64-key tiles already in the 128-byte swizzle the MMA reads
// (kv_to_swizzled_tiles: f32 rows rounded, bf16 rows copied, q8 and q4 rows dequantized), a tile's K and V
// next to each other, so one bulk copy per tile (three stages, counted by shared-memory barriers)
// brings both in, with no per-thread copies and no proxy fence. Keys past the end are zero rows:
// masked scores give P = 0, and 0 · 0 adds nothing.
//
// Blocks start with the last queries, which see the most keys, so the short causal blocks fill the
// tail; a query head reads its KV head's tiles (GQA without copies).
#include <cuda_bf16.h>

#include <cstdint>

#include "base/tuning.h"
#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/kv_access.cuh"
#include "ops/cuda/tensor_core.cuh"
#include "ops/cuda/wgmma.cuh"

namespace sanctum::ops::cuda {

namespace {

constexpr int kD = 128;                                     // head dim
constexpr int kKeys = 64;                                   // keys per tile
constexpr int kGroups = 2;                                  // warpgroups per block
constexpr int kQueries = 64 * kGroups;                      // queries per block
constexpr int kStages = 3;                                  // tiles in flight
constexpr int kHalfBytes = kKeys * 128;                     // 64 keys x 64 dims of bf16: one swizzled 8 KB block
constexpr int kTileBytes = kD / 64 * kHalfBytes;            // K (or V) of one tile
constexpr int kStageBytes = 2 * kTileBytes;                 // K then V
constexpr int kSharedBytes = kStages * kStageBytes + 1024;  // + room to align the stages to 1,024 bytes

struct WgmmaArgs {
  const __nv_bfloat16* q;  // [heads][n][128]
  const uint8_t* kv;       // [kv_heads][tiles][K | V][2][64 keys][64], swizzled
  float* out;              // or, where set, out16: the rows rounded to bf16 once (for a GEMM that rounds them anyway)
  __nv_bfloat16* out16;
  int64_t o_s0, o_s1;
  int64_t n, q_pos0;
  int64_t tiles;  // key tiles per KV head
  int64_t group;  // query heads per KV head
  float scale_log2;
};

// dst = K and V of every KV head as swizzled tiles, one thread per 16-byte chunk written: chunk c of
// key row r of a 64 x 64 block lands at chunk c ^ (r % 8), as swizzled_k_major and swizzled_mn_major read.
template <KvElem K, KvElem V>
__global__ void kv_to_swizzled_tiles(KvSide k, KvSide v, int64_t keys, int64_t kv_heads, int64_t tiles, uint4* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  constexpr int kHalves = kD / 64;
  if (i >= kv_heads * tiles * 2 * kHalves * 512) return;
  const int slot = static_cast<int>(i % 8), r = static_cast<int>(i / 8 % 64);
  const int64_t block = i / 512;
  const int half = static_cast<int>(block % kHalves), which = static_cast<int>(block / kHalves % 2);
  const int64_t tile = block / kHalves / 2 % tiles, head = block / kHalves / 2 / tiles;
  const int64_t key = tile * kKeys + r;
  const int c = slot ^ (r & 7);
  if (key >= keys) dst[i] = make_uint4(0, 0, 0, 0);
  else dst[i] = which == 0 ? kv_bf16x8<K>(k, key, head, half * 64 + c * 8) : kv_bf16x8<V>(v, key, head, half * 64 + c * 8);
}

// The running softmax of a thread's shares of rows g and g + 8 over one tile of raw scores: the causal
// mask on tiles that reach past the warp's first query, the new row maxima, and P = 2^(scale_log2 (s -
// max)) as bf16 A fragments (k16 slice j is S's n8 blocks 2 j and 2 j + 1). The row sums take the old
// maxima's factor; keep_a and keep_b are the factors the output must be scaled by. Maxima are taken
// over raw scores, which the positive scale keeps in order.
#if SANCTUM_HAS_WGMMA
// 2^x on the special-function unit; inputs that far below 0 give 0 rather than a subnormal.
__device__ __forceinline__ float exp2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

struct RowSoftmax {
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;  // l: this thread's share of the row sum
  float keep_a = 0.0f, keep_b = 0.0f;

  // k0: the tile's first key; first: the warp's first query position; last_a, last_b: the positions of
  // rows g and g + 8 (the last keys they see).
  __device__ __forceinline__ void step(const float (&raw)[32], int64_t k0, int64_t first, int64_t last_a, int64_t last_b, int t,
                                       float scale_log2, uint32_t (&p)[kKeys / 16][4]) {
    // A copy: the MMA's accumulators are not written here, or the compiler serializes the MMAs.
    float s[32];
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = raw[i];
    if (k0 + kKeys - 1 > first) {  // the warp's diagonal: columns past a row's position are masked
      const int lim_a = static_cast<int>(max(min(last_a - k0, int64_t{kKeys}), int64_t{-1}));
      const int lim_b = static_cast<int>(max(min(last_b - k0, int64_t{kKeys}), int64_t{-1}));
#pragma unroll
      for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int col = 8 * j + 2 * t + e;
          if (col > lim_a) s[4 * j + e] = -INFINITY;
          if (col > lim_b) s[4 * j + 2 + e] = -INFINITY;
        }
    }
    float max_a = -INFINITY, max_b = -INFINITY;
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      max_a = fmaxf(max_a, fmaxf(s[4 * j], s[4 * j + 1]));
      max_b = fmaxf(max_b, fmaxf(s[4 * j + 2], s[4 * j + 3]));
    }
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
      max_a = fmaxf(max_a, __shfl_xor_sync(0xffffffffu, max_a, x));
      max_b = fmaxf(max_b, __shfl_xor_sync(0xffffffffu, max_b, x));
    }
    // Key 0 is in the first tile and every query sees it, so the new maxima are finite.
    const float new_a = fmaxf(m_a, max_a), new_b = fmaxf(m_b, max_b);
    keep_a = exp2_approx((m_a - new_a) * scale_log2);  // 0 on the first tile
    keep_b = exp2_approx((m_b - new_b) * scale_log2);
    m_a = new_a;
    m_b = new_b;
    const float off_a = -new_a * scale_log2, off_b = -new_b * scale_log2;
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int j = 0; j < kKeys / 8; ++j) {
      const float p0 = exp2_approx(fmaf(s[4 * j], scale_log2, off_a)), p1 = exp2_approx(fmaf(s[4 * j + 1], scale_log2, off_a));
      const float p2 = exp2_approx(fmaf(s[4 * j + 2], scale_log2, off_b)), p3 = exp2_approx(fmaf(s[4 * j + 3], scale_log2, off_b));
      sum_a += p0 + p1;
      sum_b += p2 + p3;
      p[j / 2][(j & 1) * 2] = tc::bf16_pair(p0, p1);
      p[j / 2][(j & 1) * 2 + 1] = tc::bf16_pair(p2, p3);
    }
    l_a = l_a * keep_a + sum_a;
    l_b = l_b * keep_b + sum_b;
  }
};
#endif

// Two warpgroups that run apart, so that one's softmax overlaps the other's MMAs: the warp that hands
// a stage back last (a count in shared memory) brings the stage's next tile in, and no barrier joins
// the warpgroups per tile. Within a warpgroup, tile i + 1's S is issued before tile i's P V, and its
// softmax runs while P V does.
__global__ void __launch_bounds__(kGroups * 128, 1) flash_wgmma(WgmmaArgs a) {
#if SANCTUM_HAS_WGMMA
  extern __shared__ uint8_t shared_raw[];
  __shared__ alignas(8) uint64_t full[kStages];  // stage s holds its tile's K and V
  __shared__ int handed_back[kStages];           // warps done with stage s's tile
  const uint32_t raw_address = tc::shared_address(shared_raw);
  const uint32_t stages = raw_address + ((1024 - (raw_address & 1023)) & 1023);

  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int64_t h = blockIdx.x, kv_head = h / a.group;
  const int64_t q0 = (static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y) * kQueries;
  const int64_t block_rows = a.n - q0 < kQueries ? a.n - q0 : kQueries;
  const int tiles = static_cast<int>((a.q_pos0 + q0 + block_rows + kKeys - 1) / kKeys);  // tiles any query of the block sees

  if (tid == 0) {
#pragma unroll
    for (int s = 0; s < kStages; ++s) {
      wg::barrier_init(tc::shared_address(&full[s]), 1);
      handed_back[s] = 0;
    }
    wg::fence_shared_for_async();
  }
  __syncthreads();
  const uint8_t* kv = a.kv + kv_head * a.tiles * kStageBytes;
  auto load = [&](int tile) {
    const int s = tile % kStages;
    wg::bulk_copy(stages + s * kStageBytes, kv + static_cast<int64_t>(tile) * kStageBytes, kStageBytes, tc::shared_address(&full[s]));
  };
  if (tid == 0)
    for (int i = 0; i < kStages && i < tiles; ++i) load(i);

  const int64_t group_q0 = q0 + 64 * (warp >> 2);                                         // the warpgroup's first query
  const int64_t group_last = a.q_pos0 + (group_q0 + 63 < a.n ? group_q0 + 63 : a.n - 1);  // the last key it sees
  // Tiles the warpgroup computes (none past n); the block's later tiles it only hands back.
  const int own_tiles = group_q0 < a.n ? static_cast<int>(group_last / kKeys) + 1 : 0;
  const int64_t first = a.q_pos0 + group_q0 + 16 * (warp & 3);  // the warp's first query position
  const int64_t last_a = first + g, last_b = last_a + 8;        // the last keys rows g, g + 8 see
  auto wait_full = [&](int tile) { wg::barrier_wait(tc::shared_address(&full[tile % kStages]), (tile / kStages) & 1); };
  // Every warp hands every tile back, in order, after its MMAs on it have ended; the last one refills the
  // stage (the count is reset before anyone can count the next tile in it: that waits for this load).
  auto hand_back = [&](int tile) {
    __syncwarp();
    if (lane == 0 && atomicAdd(&handed_back[tile % kStages], 1) == kGroups * 4 - 1) {
      handed_back[tile % kStages] = 0;
      if (tile + kStages < tiles) load(tile + kStages);
    }
  };
  auto stage_of = [&](int tile) { return stages + (tile % kStages) * kStageBytes; };

  // Q as A fragments: k16 slice s holds dims 16 s + 2 t (+1) and + 8, rows g and g + 8 of the warp's 16.
  // Rows past n read the last row: finite scores, never written out.
  uint32_t qa[kD / 16][4];
  {
    const int64_t ra = group_q0 + 16 * (warp & 3) + g, rb = ra + 8;
    const auto* qh = reinterpret_cast<const uint32_t*>(a.q + h * a.n * kD);
    const uint32_t* qra = qh + (ra < a.n ? ra : a.n - 1) * (kD / 2);
    const uint32_t* qrb = qh + (rb < a.n ? rb : a.n - 1) * (kD / 2);
#pragma unroll
    for (int s = 0; s < kD / 16; ++s) {
      qa[s][0] = qra[8 * s + t];
      qa[s][1] = qrb[8 * s + t];
      qa[s][2] = qra[8 * s + 4 + t];
      qa[s][3] = qrb[8 * s + 4 + t];
    }
  }

  float o[kD / 2], s[32];
#pragma unroll
  for (int i = 0; i < kD / 2; ++i) o[i] = 0.0f;
  wg::hold(o);
  auto issue_scores = [&](int tile) {  // s = Q Kᵀ of the tile, asynchronously
    const uint32_t k_tile = stage_of(tile);
#pragma unroll
    for (int i = 0; i < 32; ++i) s[i] = 0.0f;
    wg::hold(s);  // zeroed before the fence: defined among the MMAs, it would serialize them
    wg::fence();
#pragma unroll
    for (int ks = 0; ks < kD / 16; ++ks) wg::mma_m64n64k16(s, qa[ks], wg::swizzled_k_major(k_tile + ks / 4 * kHalfBytes + 32 * (ks % 4)));
    wg::commit();
  };
  RowSoftmax soft;
  // P of the tile whose P V is next, and of the one after: two sets used in turn, since a copy from one
  // to the other lands among the next MMAs and serializes them.
  uint32_t p0[kKeys / 16][4], p1[kKeys / 16][4];
  auto issue_values = [&](int tile, uint32_t(&p)[kKeys / 16][4]) {  // o += P V of the tile, asynchronously
    const uint32_t v_tile = stage_of(tile) + kTileBytes;
    wg::fence();
#pragma unroll
    for (int ks = 0; ks < kKeys / 16; ++ks) wg::mma_m64n128k16<1>(o, p[ks], wg::swizzled_mn_major(v_tile + ks * 16 * 128, kHalfBytes));
    wg::commit();
  };
  // Tile i's P V with tile i + 1's scores: these issued first, so their softmax (into `next`) runs
  // while P V does; o takes the new maxima's factor once P V is done.
  auto overlapped = [&](int i, uint32_t(&p)[kKeys / 16][4], uint32_t(&next)[kKeys / 16][4]) {
    wait_full(i + 1);
    issue_scores(i + 1);
    issue_values(i, p);
    wg::wait<1>();  // groups complete in order: the scores are in, P V may still run
    wg::hold(s);
    soft.step(s, static_cast<int64_t>(i + 1) * kKeys, first, last_a, last_b, t, a.scale_log2, next);
    wg::wait<0>();
    wg::hold(o);
    wg::hold(p);
    hand_back(i);
#pragma unroll
    for (int j = 0; j < kD / 8; ++j) {
      o[4 * j] *= soft.keep_a;
      o[4 * j + 1] *= soft.keep_a;
      o[4 * j + 2] *= soft.keep_b;
      o[4 * j + 3] *= soft.keep_b;
    }
    wg::hold(o);
  };
  auto last = [&](int i, uint32_t(&p)[kKeys / 16][4]) {
    issue_values(i, p);
    wg::wait<0>();
    wg::hold(o);
    hand_back(i);
  };
  if (own_tiles > 0) {
    wait_full(0);
    issue_scores(0);
    wg::wait<0>();
    wg::hold(s);
    soft.step(s, 0, first, last_a, last_b, t, a.scale_log2, p0);  // o is still 0: nothing to rescale
    int i = 0;
    for (; i + 2 < own_tiles; i += 2) {
      overlapped(i, p0, p1);
      overlapped(i + 1, p1, p0);
    }
    if (i + 1 < own_tiles) {
      overlapped(i, p0, p1);
      last(i + 1, p1);
    } else {
      last(i, p0);
    }
  }
  for (int i = own_tiles; i < tiles; ++i) {  // in order, so no hand-back runs ahead of the stage's phase
    wait_full(i);
    hand_back(i);
  }

  float l_a = soft.l_a, l_b = soft.l_b;
#pragma unroll
  for (int x = 1; x <= 2; x <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
  }
  const int64_t qa_row = group_q0 + 16 * (warp & 3) + g, qb_row = qa_row + 8;
  // Row qa takes the lane's values 4 j and 4 j + 1, row qb 4 j + 2 and 4 j + 3.
  auto store_row = [&](int64_t row, int e, float inv) {
    const int64_t at = row * a.o_s0 + h * a.o_s1 + 2 * t;
#pragma unroll
    for (int j = 0; j < kD / 8; ++j) {
      const float lo = o[4 * j + e] * inv, hi = o[4 * j + e + 1] * inv;
      if (a.out16) *reinterpret_cast<uint32_t*>(a.out16 + at + 8 * j) = tc::bf16_pair(lo, hi);
      else *reinterpret_cast<float2*>(a.out + at + 8 * j) = make_float2(lo, hi);
    }
  };
  if (qa_row < a.n) store_row(qa_row, 0, 1.0f / l_a);
  if (qb_row < a.n) store_row(qb_row, 2, 1.0f / l_b);
#else
  __trap();  // never launched: the host offers this kernel only where wgmma_runs() found it
#endif
}

bool wgmma_flash_present() {
  static const bool present = [] {
    if (!wg::wgmma_runs()) return false;
    check_cuda(cudaFuncSetAttribute(flash_wgmma, cudaFuncAttributeMaxDynamicSharedMemorySize, kSharedBytes),
               "flash attention (wgmma) smem");
    return true;
  }();
  return present && current_tuning().on(Knob::flash_wgmma);
}

Tensor& q_rows_scratch() {
  static Tensor t;
  return t;
}
Tensor& kv_tiles_scratch() {
  static Tensor t;
  return t;
}

}  // namespace

bool attention_flash_wgmma_present() { return wgmma_flash_present(); }

bool attention_flash_wgmma_ok(const AttnView& a) {
  // The tiles are written 8 values at a time: q8 and q4 rows of whole 8-byte words (f32 and bf16 rows
  // are whole 16-byte vectors where attention_flash_bf16_ok holds).
  const auto rows_ok = [](const KvSide& s, KvElem e) { return (e != KvElem::q8 && e != KvElem::q4) || kv_rows_aligned(s, e, 8); };
  return a.d == kD && a.scale > 0.0f && attention_flash_bf16_ok(a) && rows_ok(a.k, a.k_elem) && rows_ok(a.v, a.v_elem) &&
         wgmma_flash_present();
}

void attention_flash_wgmma(const AttnView& a) {
  const int64_t keys = a.q_pos0 + a.n, tiles = (keys + kKeys - 1) / kKeys;
  auto* q = static_cast<__nv_bfloat16*>(scratch_bytes(q_rows_scratch(), static_cast<size_t>(a.n * a.heads * kD) * 2));
  auto* kv = static_cast<uint4*>(scratch_bytes(kv_tiles_scratch(), static_cast<size_t>(a.kv_heads * tiles) * kStageBytes));
  bf16_head_major(a.q, a.q_s0, a.q_s1, a.n, a.heads, kD, q);
  const int64_t chunks = a.kv_heads * tiles * kStageBytes / 16;
  const unsigned blocks = blocks_for(chunks, 256);
  switch (a.k_elem) {
    case KvElem::f32:
      kv_to_swizzled_tiles<KvElem::f32, KvElem::f32><<<blocks, 256, 0, stream()>>>(a.k, a.v, keys, a.kv_heads, tiles, kv);
      break;
    case KvElem::bf16:
      kv_to_swizzled_tiles<KvElem::bf16, KvElem::bf16><<<blocks, 256, 0, stream()>>>(a.k, a.v, keys, a.kv_heads, tiles, kv);
      break;
    case KvElem::q8:
      if (a.v_elem == KvElem::q4)
        kv_to_swizzled_tiles<KvElem::q8, KvElem::q4><<<blocks, 256, 0, stream()>>>(a.k, a.v, keys, a.kv_heads, tiles, kv);
      else kv_to_swizzled_tiles<KvElem::q8, KvElem::q8><<<blocks, 256, 0, stream()>>>(a.k, a.v, keys, a.kv_heads, tiles, kv);
      break;
    case KvElem::q4: break;  // keys are never q4 (attention_kv checks the pair)
  }
  check_launch("attention (K and V tiles)");
  WgmmaArgs f{};
  f.q = q;
  f.kv = reinterpret_cast<const uint8_t*>(kv);
  f.out = a.out;
  f.out16 = a.out16;
  f.o_s0 = a.o_s0;
  f.o_s1 = a.o_s1;
  f.n = a.n;
  f.q_pos0 = a.q_pos0;
  f.tiles = tiles;
  f.group = a.heads / a.kv_heads;
  f.scale_log2 = a.scale * 1.4426950408889634f;  // scale · log2(e)
  const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>((a.n + kQueries - 1) / kQueries));
  flash_wgmma<<<grid, kGroups * 128, kSharedBytes, stream()>>>(f);
  check_launch("attention (flash, wgmma)");
}

}  // namespace sanctum::ops::cuda
