// Long-prefill attention on the tensor cores (fast precision mode), flash-attention style.
//
// A first pass rounds Q to bf16 once, head-major ([head][row][d]), and K and V likewise where the
// cache is f32 (or q8 or q4v, dequantized); a bf16 cache is read where it lies. The blocks, which each walk
// all the keys their queries see, then copy finished 16-byte rows straight into shared memory
// (cp.async, the next key tile in flight while this one is computed) instead of each converting
// rows. A block takes 64 queries of one head, 16 per warp; per key tile a warp
// computes S = Q Kᵀ with mma.sync (bf16 inputs, f32 sums, fragments from ldmatrix), keeps a running
// max and sum per query row (online softmax in f32, base 2), and adds P V into f32 accumulators
// with P rounded to bf16; V's fragments come from its rows with a transposing ldmatrix. No score
// matrix is stored, and a query head reads its KV head's rows by index (GQA without copies).
//
// Blocks start with the last query rows, which see the most keys, so the short causal blocks fill
// the tail. Head dims 64, 128 (key tiles of 64) and 256 (tiles of 32, to stay at two blocks per
// multiprocessor).
#include <cuda_bf16.h>

#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/kv_access.cuh"
#include "ops/cuda/tensor_core.cuh"

namespace sanctum::ops::cuda {

namespace {

constexpr int kWarps = 4, kRows = 16 * kWarps;  // queries per block

template <int D, int BK>
struct Tiles {
  static constexpr int LD = D + 8;  // bf16 per shared row: the rows of an ldmatrix land 4 banks apart
  static constexpr int Q_ELEMS = kRows * LD, KV_ELEMS = BK * LD;
  static constexpr size_t bytes = 2 * (static_cast<size_t>(Q_ELEMS) + 4 * static_cast<size_t>(KV_ELEMS));  // Q; K and V twice
};

struct FlashArgs {
  const __nv_bfloat16* q;  // [heads][n][D]
  const __nv_bfloat16* k;  // row r of KV head h at k + r * kv_s0 + h * kv_s1 (elements; 16-byte aligned)
  const __nv_bfloat16* v;
  int64_t k_s0, k_s1, v_s0, v_s1;
  float* out;
  int64_t o_s0, o_s1;
  int64_t n, keys, q_pos0;
  int64_t group;  // query heads per KV head
  float scale_log2;
};

// dst[head][row][c] = bf16(src[row * s0 + head * s1 + c]), four values per thread.
__global__ void to_bf16_head_major(const float* __restrict__ src, int64_t s0, int64_t s1, int64_t rows, int64_t heads, int d,
                                   __nv_bfloat16* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x, quads = d / 4;
  if (i >= heads * rows * quads) return;
  const int64_t c = i % quads * 4, row = i / quads % rows, head = i / quads / rows;
  const float4 x = *reinterpret_cast<const float4*>(src + row * s0 + head * s1 + c);
  *reinterpret_cast<uint2*>(dst + (head * rows + row) * d + c) = make_uint2(tc::bf16_pair(x.x, x.y), tc::bf16_pair(x.z, x.w));
}

template <int D, int BK>
__global__ void __launch_bounds__(kWarps * 32, 2) flash_bf16(FlashArgs a) {
  using T = Tiles<D, BK>;
  constexpr int LD = T::LD, CHUNKS = D / 8;  // 16-byte chunks per row
  extern __shared__ __align__(16) unsigned char shared_raw[];
  __nv_bfloat16* qs = reinterpret_cast<__nv_bfloat16*>(shared_raw);  // kRows x LD
  __nv_bfloat16* kv = qs + T::Q_ELEMS;                               // buffer b: K at 2b tiles, V after it
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31, g = lane >> 2, t = lane & 3;
  const int64_t h = blockIdx.x, kv_head = h / a.group;
  const int64_t q0 = (static_cast<int64_t>(gridDim.y) - 1 - blockIdx.y) * kRows;
  const int64_t rows = a.n - q0 < kRows ? a.n - q0 : kRows;
  const int64_t keys = a.q_pos0 + q0 + rows;  // keys any query of the block sees
  const int tiles = static_cast<int>((keys + BK - 1) / BK);
  const __nv_bfloat16* kg = a.k + kv_head * a.k_s1;
  const __nv_bfloat16* vg = a.v + kv_head * a.v_s1;

  auto stage = [&](int tile, int buf) {
    __nv_bfloat16* ks = kv + 2 * buf * T::KV_ELEMS;
    __nv_bfloat16* vs = ks + T::KV_ELEMS;
    const int64_t k0 = static_cast<int64_t>(tile) * BK;
    for (int i = tid; i < BK * CHUNKS; i += kWarps * 32) {
      const int r = i / CHUNKS, c = i % CHUNKS * 8;
      const bool valid = k0 + r < keys;  // zeros past the end: P is 0 there, and 0 * V must be too
      const int64_t row = valid ? k0 + r : 0;
      tc::copy16_async(ks + r * LD + c, kg + row * a.k_s0 + c, valid);
      tc::copy16_async(vs + r * LD + c, vg + row * a.v_s0 + c, valid);
    }
  };
  const __nv_bfloat16* qg = a.q + (h * a.n + q0) * D;
  for (int i = tid; i < kRows * CHUNKS; i += kWarps * 32) {
    const int r = i / CHUNKS, c = i % CHUNKS * 8;
    tc::copy16_async(qs + r * LD + c, qg + (r < rows ? r : 0) * D + c, r < rows);
  }
  stage(0, 0);
  tc::commit_copies();

  const int r0 = warp * 16;
  const int64_t first = a.q_pos0 + q0 + r0;               // the position of the warp's first query
  const int64_t last_a = first + g, last_b = last_a + 8;  // the last key rows g and g + 8 see
  // ldmatrix lane offsets: Q's A fragment (rows + 8 for matrices 1 and 3, columns + 8 for 2 and 3),
  // K's B fragments for two key tiles (keys + 8 for matrices 2 and 3, dims + 8 for 1 and 3), V's
  // for two dim tiles (keys + 8 for matrices 1 and 3, dims + 8 for 2 and 3).
  const int lr = lane & 7, m1 = (lane >> 3) & 1, m2 = lane >> 4;
  const int q_off = (r0 + lr + 8 * m1) * LD + 8 * m2, k_off = (lr + 8 * m2) * LD + 8 * m1, v_off = (lr + 8 * m1) * LD + 8 * m2;

  float o[D / 8][4];
#pragma unroll
  for (int j = 0; j < D / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m_a = -INFINITY, m_b = -INFINITY, l_a = 0.0f, l_b = 0.0f;  // l: this thread's share of the row sum

  for (int tile = 0; tile < tiles; ++tile) {
    tc::wait_copies<0>();
    __syncthreads();  // this tile (and Q) has landed for every thread, and every warp is done with the other buffer
    if (tile + 1 < tiles) stage(tile + 1, (tile + 1) & 1);
    tc::commit_copies();
    const int64_t k0 = static_cast<int64_t>(tile) * BK;
    // Warps past n, or whose queries all precede this tile, have nothing to add.
    if (r0 >= rows || k0 > first + 15) continue;
    const __nv_bfloat16* ks = kv + 2 * (tile & 1) * T::KV_ELEMS;
    const __nv_bfloat16* vs = ks + T::KV_ELEMS;

    float s[BK / 8][4];
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < D; kk += 16) {
      uint32_t qa[4];
      tc::ldmatrix_x4(qa, qs + q_off + kk);
#pragma unroll
      for (int j = 0; j < BK / 8; j += 2) {
        uint32_t kb[4];
        tc::ldmatrix_x4(kb, ks + k_off + 8 * j * LD + kk);
        tc::mma_bf16(s[j], qa, kb[0], kb[1]);
        tc::mma_bf16(s[j + 1], qa, kb[2], kb[3]);
      }
    }

    // Scaled to base 2, the causal mask on tiles that reach past the warp's first query, and the
    // rows' new maxima (a row's four lanes share them).
    const bool diagonal = k0 + BK - 1 > first;
    float max_a = -INFINITY, max_b = -INFINITY;
#pragma unroll
    for (int j = 0; j < BK / 8; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int64_t key = k0 + 8 * j + 2 * t + e;
        s[j][e] = !diagonal || key <= last_a ? s[j][e] * a.scale_log2 : -INFINITY;
        s[j][2 + e] = !diagonal || key <= last_b ? s[j][2 + e] * a.scale_log2 : -INFINITY;
        max_a = fmaxf(max_a, s[j][e]);
        max_b = fmaxf(max_b, s[j][2 + e]);
      }
#pragma unroll
    for (int x = 1; x <= 2; x <<= 1) {
      max_a = fmaxf(max_a, __shfl_xor_sync(0xffffffffu, max_a, x));
      max_b = fmaxf(max_b, __shfl_xor_sync(0xffffffffu, max_b, x));
    }
    // Key 0 is in the first tile and every query sees it, so the new maxima are finite.
    const float new_a = fmaxf(m_a, max_a), new_b = fmaxf(m_b, max_b);
    const float keep_a = exp2f(m_a - new_a), keep_b = exp2f(m_b - new_b);  // 0 on the first tile
    m_a = new_a;
    m_b = new_b;

    // P in bf16 as A fragments: S tile j is the low (even j) or high (odd j) half of key step j / 2.
    uint32_t p[BK / 16][4];
    float sum_a = 0.0f, sum_b = 0.0f;
#pragma unroll
    for (int j = 0; j < BK / 8; ++j) {
      const float p0 = exp2f(s[j][0] - new_a), p1 = exp2f(s[j][1] - new_a);
      const float p2 = exp2f(s[j][2] - new_b), p3 = exp2f(s[j][3] - new_b);
      sum_a += p0 + p1;
      sum_b += p2 + p3;
      p[j / 2][(j & 1) * 2] = tc::bf16_pair(p0, p1);
      p[j / 2][(j & 1) * 2 + 1] = tc::bf16_pair(p2, p3);
    }
    l_a = l_a * keep_a + sum_a;
    l_b = l_b * keep_b + sum_b;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      o[j][0] *= keep_a;
      o[j][1] *= keep_a;
      o[j][2] *= keep_b;
      o[j][3] *= keep_b;
    }
#pragma unroll
    for (int kstep = 0; kstep < BK / 16; ++kstep)
#pragma unroll
      for (int j = 0; j < D / 8; j += 2) {
        uint32_t vb[4];
        tc::ldmatrix_x4_trans(vb, vs + v_off + 16 * kstep * LD + 8 * j);
        tc::mma_bf16(o[j], p[kstep], vb[0], vb[1]);
        tc::mma_bf16(o[j + 1], p[kstep], vb[2], vb[3]);
      }
  }

#pragma unroll
  for (int x = 1; x <= 2; x <<= 1) {
    l_a += __shfl_xor_sync(0xffffffffu, l_a, x);
    l_b += __shfl_xor_sync(0xffffffffu, l_b, x);
  }
  const int64_t qa = q0 + r0 + g, qb = qa + 8;
  if (qa < a.n) {
    float* out = a.out + qa * a.o_s0 + h * a.o_s1 + 2 * t;
    const float inv = 1.0f / l_a;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[j][0] * inv, o[j][1] * inv);
  }
  if (qb < a.n) {
    float* out = a.out + qb * a.o_s0 + h * a.o_s1 + 2 * t;
    const float inv = 1.0f / l_b;
#pragma unroll
    for (int j = 0; j < D / 8; ++j) *reinterpret_cast<float2*>(out + 8 * j) = make_float2(o[j][2] * inv, o[j][3] * inv);
  }
}

Tensor& bf16_rows_scratch() {
  static Tensor t;
  return t;
}

// dst[head][row][c] = the side's value c of (row, head) in bf16, a thread per value.
template <KvElem E>
__global__ void kv_to_bf16_head_major(KvSide s, int64_t rows, int64_t heads, int d, uint16_t* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= heads * rows * d) return;
  const int64_t c = i % d, row = i / d % rows, head = i / d / rows;
  dst[i] = E == KvElem::bf16 ? __ldg(static_cast<const unsigned short*>(s.data) + row * s.s0 + head * s.s1 + c)
                             : bf16_bits(kv_value<E>(s, row, head, c));
}

// K or V (in element e) as the kernel reads it: a bf16 cache in place, any other rounded into dst head-major.
void flash_side(const AttnView& a, const KvSide& side, KvElem e, int64_t keys, int d, __nv_bfloat16* dst, const __nv_bfloat16** out,
                int64_t* s0, int64_t* s1) {
  if (e == KvElem::bf16) {
    *out = static_cast<const __nv_bfloat16*>(side.data);
    *s0 = side.s0;
    *s1 = side.s1;
    return;
  }
  *out = e == KvElem::f32 ? bf16_head_major(static_cast<const float*>(side.data), side.s0, side.s1, keys, a.kv_heads, d, dst)
                          : kv_bf16_head_major(side, e, keys, a.kv_heads, d, dst);
  *s0 = d;
  *s1 = keys * d;
}

template <int D, int BK>
void launch(const AttnView& a) {
  constexpr size_t bytes = Tiles<D, BK>::bytes;
  static bool configured = false;
  if (!configured) {
    check_cuda(cudaFuncSetAttribute(flash_bf16<D, BK>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
               "flash attention smem");
    configured = true;
  }
  const int64_t keys = a.q_pos0 + a.n, q_elems = a.n * a.heads * D;
  // A bf16 side is read in place.
  const int64_t k_elems = a.k_elem == KvElem::bf16 ? 0 : keys * a.kv_heads * D,
                v_elems = a.v_elem == KvElem::bf16 ? 0 : keys * a.kv_heads * D;
  auto* base = static_cast<__nv_bfloat16*>(scratch_bytes(bf16_rows_scratch(), static_cast<size_t>(q_elems + k_elems + v_elems) * 2));
  FlashArgs f{};
  f.q = bf16_head_major(a.q, a.q_s0, a.q_s1, a.n, a.heads, D, base);
  flash_side(a, a.k, a.k_elem, keys, D, base + q_elems, &f.k, &f.k_s0, &f.k_s1);
  flash_side(a, a.v, a.v_elem, keys, D, base + q_elems + k_elems, &f.v, &f.v_s0, &f.v_s1);
  f.out = a.out;
  f.o_s0 = a.o_s0;
  f.o_s1 = a.o_s1;
  f.n = a.n;
  f.keys = keys;
  f.q_pos0 = a.q_pos0;
  f.group = a.heads / a.kv_heads;
  f.scale_log2 = a.scale * 1.4426950408889634f;  // scale · log2(e)
  const dim3 grid(static_cast<unsigned>(a.heads), static_cast<unsigned>((a.n + kRows - 1) / kRows));
  flash_bf16<D, BK><<<grid, kWarps * 32, bytes, stream()>>>(f);
  check_launch("attention (flash, bf16 tensor cores)");
}

bool rows_of_float4(const float* p, int64_t s0, int64_t s1) { return aligned16(p) && s0 % 4 == 0 && s1 % 4 == 0; }

// K or V rows the kernels can take: f32 rows of whole float4s for the rounding pass, bf16 rows of
// whole 16-byte vectors for cp.async; q8 and q4 rows are dequantized value by value.
bool side_rows_ok(const KvSide& s, KvElem e) {
  switch (e) {
    case KvElem::f32: return rows_of_float4(static_cast<const float*>(s.data), s.s0, s.s1);
    case KvElem::bf16: return kv_rows_aligned(s, KvElem::bf16, 8);
    case KvElem::q8:
    case KvElem::q4: return true;
  }
  return false;
}
bool kv_rows_ok(const AttnView& a) { return side_rows_ok(a.k, a.k_elem) && side_rows_ok(a.v, a.v_elem); }

}  // namespace

__nv_bfloat16* bf16_head_major(const float* src, int64_t s0, int64_t s1, int64_t rows, int64_t heads, int d, __nv_bfloat16* dst) {
  to_bf16_head_major<<<blocks_for(heads * rows * d / 4, 256), 256, 0, stream()>>>(src, s0, s1, rows, heads, d, dst);
  check_launch("attention (bf16 rows)");
  return dst;
}

__nv_bfloat16* kv_bf16_head_major(const KvSide& src, KvElem e, int64_t rows, int64_t heads, int d, __nv_bfloat16* dst) {
  const unsigned blocks = blocks_for(heads * rows * d, 256);
  auto* out = reinterpret_cast<uint16_t*>(dst);
  switch (e) {
    case KvElem::f32: kv_to_bf16_head_major<KvElem::f32><<<blocks, 256, 0, stream()>>>(src, rows, heads, d, out); break;
    case KvElem::bf16: kv_to_bf16_head_major<KvElem::bf16><<<blocks, 256, 0, stream()>>>(src, rows, heads, d, out); break;
    case KvElem::q8: kv_to_bf16_head_major<KvElem::q8><<<blocks, 256, 0, stream()>>>(src, rows, heads, d, out); break;
    case KvElem::q4: kv_to_bf16_head_major<KvElem::q4><<<blocks, 256, 0, stream()>>>(src, rows, heads, d, out); break;
  }
  check_launch("attention (bf16 cache rows)");
  return dst;
}

bool attention_flash_bf16_ok(const AttnView& a) {
  return (a.d == 64 || a.d == 128 || a.d == 256) && a.q_pos0_device == nullptr && a.heads % a.kv_heads == 0 &&
         a.n <= int64_t{65535} * kRows && rows_of_float4(a.q, a.q_s0, a.q_s1) && kv_rows_ok(a) && aligned16(a.out) && a.o_s0 % 2 == 0 &&
         a.o_s1 % 2 == 0;
}

void attention_flash_bf16(const AttnView& a) {
  if (a.d == 64) launch<64, 64>(a);
  else if (a.d == 128) launch<128, 64>(a);
  else launch<256, 32>(a);
}

}  // namespace sanctum::ops::cuda
