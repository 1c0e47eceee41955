// Attention for a few queries (decode): bandwidth-bound on K/V, so a block takes every query head of
// one KV head ("rows" = query × head-in-group, up to RB of them, q in registers) and reads each K/V
// row once for all of them. The block's keys are split across its warps in batches of KB keys read
// straight from global in the cache's elements (f32, bf16 or q8, or q8 keys with q4 values; 4-value
// vector loads where aligned): a batch's loads are all issued before the first is converted
// (dequantized in registers where used), and a warp over any cache but f32 loads its next batch while
// it computes this one. Each warp keeps an
// online softmax per row, the warps merge in shared memory, and when the keys are also split across
// blocks (split-K) a second kernel merges the splits.
#include <algorithm>

#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/kv_access.cuh"
#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kWarps = 4;

struct DecodeArgs {
  AttnView a;
  int groups;  // query heads per KV head
  int rows;    // n * groups: rows of one KV head
  int64_t keys_per_split;
  int splits;
  float* part;  // (n, heads, splits, d + 2): unnormalised acc..., max, sum
};

template <int VEC>
struct Chunk {
  float x[VEC];
};

template <int VEC>
__device__ __forceinline__ Chunk<VEC> load_chunk(const float* p) {
  Chunk<VEC> c;
  if constexpr (VEC == 4) {
    const float4 f = __ldg(reinterpret_cast<const float4*>(p));
    c.x[0] = f.x;
    c.x[1] = f.y;
    c.x[2] = f.z;
    c.x[3] = f.w;
  } else {
#pragma unroll
    for (int e = 0; e < VEC; ++e) c.x[e] = __ldg(p + e);
  }
  return c;
}

// The stored words of one batch: keys t0 .. t0 + KB - 1, chunks lane + 32 p of VEC values.
template <KvElem K, KvElem V, int VEC, int P, int KB>
struct KvBatch {
  KvWords<K, VEC> k[KB][P];
  KvWords<V, VEC> v[KB][P];
};

// Issues every load of a batch before any is used. Keys past key_end and lanes past d read zeros,
// or with CLAMP (no branch nor predicate on any load) the split's last key and the row's last chunk:
// finite values where the cache is, which masked scores and q's zeros past d weigh by 0.
template <bool CLAMP, KvElem K, KvElem V, int VEC, int P, int KB>
__device__ __forceinline__ void load_batch(KvBatch<K, V, VEC, P, KB>& b, const AttnView& a, int64_t t0, int64_t key_end, int64_t g,
                                           int lane) {
#pragma unroll
  for (int j = 0; j < KB; ++j)
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int c = (lane + 32 * p) * VEC;
      if constexpr (CLAMP) {
        const int64_t t = t0 + j < key_end ? t0 + j : key_end - 1;
        const int cc = c < a.d ? c : a.d - VEC;
        b.k[j][p] = kv_load<K, VEC>(a.k, t, g, cc);
        b.v[j][p] = kv_load<V, VEC>(a.v, t, g, cc);
      } else {
        const bool ok = t0 + j < key_end && c < a.d;
        b.k[j][p] = ok ? kv_load<K, VEC>(a.k, t0 + j, g, c) : KvWords<K, VEC>{};
        b.v[j][p] = ok ? kv_load<V, VEC>(a.v, t0 + j, g, c) : KvWords<V, VEC>{};
      }
    }
}

template <int VEC>
__device__ __forceinline__ Chunk<VEC> zero_chunk() {
  Chunk<VEC> c;
#pragma unroll
  for (int e = 0; e < VEC; ++e) c.x[e] = 0.0f;
  return c;
}

// Lane `lane` holds chunks lane + 32 p (p < P) of VEC floats each: elements (lane + 32 p) * VEC + e.
// K and V are read in the cache's elements and dequantized in registers. Grid: (splits, kv heads, row groups).
template <KvElem K, KvElem V, int VEC, int P, int RB, int KB>
__global__ void __launch_bounds__(kWarps * 32) attention_decode_kernel(DecodeArgs args) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  constexpr int DP = 32 * P * VEC;
  __shared__ float red_acc[kWarps][RB][DP];
  __shared__ float red_m[kWarps][RB], red_l[kWarps][RB];
  const AttnView& a = args.a;
  const int D = a.d, G = args.groups;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t split = blockIdx.x, g = blockIdx.y;
  const int row0 = static_cast<int>(blockIdx.z) * RB;

  float q[RB][P][VEC];
  int64_t limit[RB];  // keys [0, limit) are visible to the row; 0 for rows past the end
  int64_t block_limit = 0;
  const int64_t q_pos0 = a.q_pos0_device != nullptr ? *a.q_pos0_device : a.q_pos0;
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    const int row = row0 + r;
    const bool valid = row < args.rows;
    const int64_t i = valid ? row / G : 0, h = g * G + (valid ? row % G : 0);
    limit[r] = valid ? q_pos0 + i + 1 : 0;
    block_limit = limit[r] > block_limit ? limit[r] : block_limit;
#pragma unroll
    for (int p = 0; p < P; ++p) {
      const int c = (lane + 32 * p) * VEC;
      const Chunk<VEC> qc = (valid && c < D) ? load_chunk<VEC>(a.q + i * a.q_s0 + h * a.q_s1 + c) : zero_chunk<VEC>();
#pragma unroll
      for (int e = 0; e < VEC; ++e) q[r][p][e] = qc.x[e] * a.scale;
    }
  }

  float m[RB], l[RB], acc[RB][P][VEC];
#pragma unroll
  for (int r = 0; r < RB; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int e = 0; e < VEC; ++e) acc[r][p][e] = 0.0f;
  }

  // A q4 value chunk's nibbles (kv_word_value): chunk lane + 32 p starts at (lane + 32 p) * VEC, the
  // same offset in its block of 32 for every p. Lanes past d read another chunk (load_batch) whose
  // values, finite either way, reach no output.
  const uint32_t v_shift = q4_shift(lane * VEC);
  const int64_t key_begin = split * args.keys_per_split;
  const int64_t key_end = key_begin + args.keys_per_split < block_limit ? key_begin + args.keys_per_split : block_limit;
  // Keys t0 .. t0 + KB - 1 into each row's online softmax.
  auto consume = [&](const KvBatch<K, V, VEC, P, KB>& b, int64_t t0) {
    float s[RB][KB];
#pragma unroll
    for (int r = 0; r < RB; ++r)
#pragma unroll
      for (int j = 0; j < KB; ++j) {
        float dot = 0.0f;
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
          for (int e = 0; e < VEC; ++e) dot += q[r][p][e] * kv_word_value(b.k[j][p], e);
        s[r][j] = dot;
      }
#pragma unroll
    for (int r = 0; r < RB; ++r) {
      if (row0 + r >= args.rows) continue;  // block-uniform
#pragma unroll
      for (int j = 0; j < KB; ++j) s[r][j] = warp_sum(s[r][j]);
      float batch_max = -INFINITY;
#pragma unroll
      for (int j = 0; j < KB; ++j) {
        if (!(t0 + j < key_end && t0 + j < limit[r])) s[r][j] = -INFINITY;
        batch_max = fmaxf(batch_max, s[r][j]);
      }
      if (batch_max == -INFINITY) continue;  // warp-uniform: every key of the batch is masked for this row
      const float new_m = fmaxf(m[r], batch_max);
      if (new_m != m[r]) {  // warp-uniform; a max that holds would scale by exactly 1
        const float corr = m[r] == -INFINITY ? 0.0f : expf(m[r] - new_m);
        l[r] *= corr;
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[r][p][e] *= corr;
      }
#pragma unroll
      for (int j = 0; j < KB; ++j) {
        const float pj = s[r][j] == -INFINITY ? 0.0f : expf(s[r][j] - new_m);
        l[r] += pj;
#pragma unroll
        for (int p = 0; p < P; ++p)
#pragma unroll
          for (int e = 0; e < VEC; ++e) acc[r][p][e] += pj * kv_word_value(b.v[j][p], e, v_shift);
      }
      m[r] = new_m;
    }
  };
  // Warps take interleaved batches of KB consecutive keys, so the block's loads stay contiguous. A
  // bf16, q8 or q4v batch takes half the registers or less of an f32 one, so those warps keep two: the
  // next batch's loads are in flight while this one is computed.
  constexpr int64_t kStride = kWarps * KB;
  int64_t t0 = key_begin + static_cast<int64_t>(warp) * KB;
  if constexpr (K != KvElem::f32 && VEC == 4) {
    KvBatch<K, V, VEC, P, KB> b0, b1;
    if (t0 < key_end) load_batch<true>(b0, a, t0, key_end, g, lane);
    for (; t0 < key_end; t0 += 2 * kStride) {
      if (t0 + kStride < key_end) load_batch<true>(b1, a, t0 + kStride, key_end, g, lane);
      consume(b0, t0);
      if (t0 + kStride >= key_end) break;
      if (t0 + 2 * kStride < key_end) load_batch<true>(b0, a, t0 + 2 * kStride, key_end, g, lane);
      consume(b1, t0 + kStride);
    }
  } else {
    for (; t0 < key_end; t0 += kStride) {
      KvBatch<K, V, VEC, P, KB> b;
      load_batch<false>(b, a, t0, key_end, g, lane);
      consume(b, t0);
    }
  }

  // Merge the warps: each publishes (m, l, acc) per row, then the block combines per element.
#pragma unroll
  for (int r = 0; r < RB; ++r) {
#pragma unroll
    for (int p = 0; p < P; ++p)
#pragma unroll
      for (int e = 0; e < VEC; ++e) red_acc[warp][r][(lane + 32 * p) * VEC + e] = acc[r][p][e];
    if (lane == 0) {
      red_m[warp][r] = m[r];
      red_l[warp][r] = l[r];
    }
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < RB * D; idx += blockDim.x) {
    const int r = idx / D, c = idx % D, row = row0 + r;
    if (row >= args.rows) break;  // rows ascend with idx
    float M = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w) M = fmaxf(M, red_m[w][r]);
    float L = 0.0f, A = 0.0f;
    if (M != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kWarps; ++w) {
        if (red_m[w][r] == -INFINITY) continue;
        const float f = expf(red_m[w][r] - M);
        L += red_l[w][r] * f;
        A += red_acc[w][r][c] * f;
      }
    }
    const int64_t i = row / G, h = g * G + row % G;
    if (args.splits == 1) {
      a.out[i * a.o_s0 + h * a.o_s1 + c] = gated_out(a, i, h, c, A / L);
    } else {
      float* part = args.part + ((i * a.heads + h) * args.splits + split) * (D + 2);
      part[c] = A;
      if (c == 0) {
        part[D] = M;
        part[D + 1] = L;
      }
    }
  }
}

constexpr int kMaxSplits = 256;

// Merges the splits of one (query, head) for 32 of its d values (blockIdx.z): the 8 warps take
// every 8th split each, so no thread walks all splits in a row.
__global__ void __launch_bounds__(256) decode_combine(DecodeArgs args) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  __shared__ float weight[kMaxSplits];
  __shared__ float partial[8][32];
  __shared__ float scratch[32];
  const AttnView& a = args.a;
  const int64_t i = blockIdx.x, h = blockIdx.y;
  const int D = a.d, S = args.splits, tid = threadIdx.x, slice = tid >> 5, c = static_cast<int>(blockIdx.z) * 32 + (tid & 31);
  const float* part = args.part + (i * a.heads + h) * S * (D + 2);
  const float ms = tid < S ? part[tid * (D + 2) + D] : -INFINITY;
  const float M = block_max(ms, scratch);  // finite: key 0 is in some split
  const float w = ms == -INFINITY ? 0.0f : expf(ms - M);
  const float L = block_sum(tid < S ? w * part[tid * (D + 2) + D + 1] : 0.0f, scratch);
  if (tid < S) weight[tid] = w / L;
  __syncthreads();
  float v = 0.0f;
  if (c < D)
#pragma unroll 4  // four splits' loads in flight at once: a short cache now makes up to 48 splits
    for (int s = slice; s < S; s += 8) v += part[s * (D + 2) + c] * weight[s];
  partial[slice][tid & 31] = v;
  __syncthreads();
  if (slice == 0 && c < D) {
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; ++k) sum += partial[k][tid & 31];
    a.out[i * a.o_s0 + h * a.o_s1 + c] = gated_out(a, i, h, c, sum);
  }
}

Tensor& partial_scratch() {
  static Tensor t;
  return t;
}

template <KvElem K, KvElem V, int VEC, int P, int RB>
void launch(DecodeArgs args) {
  constexpr int KB = RB >= 8 ? 2 : 4;
  const AttnView& a = args.a;
  // Splits are sized by k's rows (for a model, the cache's capacity), never by the live position, so
  // a recorded step (which cannot know it) computes the same bits; splits past the live keys find none.
  const int64_t keys = a.key_rows;
  const int64_t row_groups = (args.rows + RB - 1) / RB;
  const int64_t base = a.kv_heads * row_groups;
  // Up to eight blocks per multiprocessor, but no split under 16 keys (the merge costs traffic). A
  // block's four warps then take one or two batches of keys each: at 512 keys of the benchmark
  // shapes, 32 keys a split and two blocks per multiprocessor had left 48 to 96 blocks of four warps
  // on 132 multiprocessors. On an H200 (bench/gpu/decode_sweep.py, tg128 after 512, single runs about
  // 1% apart): MoE shape 444.9 -> 453.9 tok/s, 27B 150.1 -> 151.2, 24B 191.9 -> 192.8; 8 keys were
  // faster for the MoE shape (456.9) and slower for the 24B (185.8).
  constexpr int64_t kMinKeysPerSplit = 16, kBlocksPerMultiprocessor = 8;
  int64_t splits = std::min<int64_t>((kBlocksPerMultiprocessor * multiprocessor_count() + base - 1) / base,
                                     (keys + kMinKeysPerSplit - 1) / kMinKeysPerSplit);
  splits = std::clamp<int64_t>(splits, 1, kMaxSplits);
  args.keys_per_split = (keys + splits - 1) / splits;
  splits = (keys + args.keys_per_split - 1) / args.keys_per_split;
  args.splits = static_cast<int>(splits);
  if (splits > 1) {
    const int64_t need = a.n * a.heads * splits * (a.d + 2);
    Tensor& part = partial_scratch();
    if (!part || part.numel() < need) part = Tensor::zeros({need}, DType::f32, Device::cuda);
    args.part = part.data<float>();
  }
  const dim3 grid(static_cast<unsigned>(splits), static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(row_groups));
  launch_early(attention_decode_kernel<K, V, VEC, P, RB, KB>, grid, dim3(kWarps * 32), 0, args);
  check_launch("attention decode");
  if (splits > 1) {
    launch_early(decode_combine, dim3(static_cast<unsigned>(a.n), static_cast<unsigned>(a.heads), static_cast<unsigned>((a.d + 31) / 32)),
                 dim3(256), 0, args);
    check_launch("attention decode combine");
  }
}

// Rows per block. A block computes every key for each of its rows, so few rows a block make more
// blocks with less arithmetic each, which is what decode over a short cache waits on; but each row
// group reads the cache again, so a cache past kRereadBytes (where L2 no longer holds it beside the
// weights streaming through) takes blocks of up to eight rows and reads it once. On an H200 at 512
// keys (768 of capacity; bench/gpu/decode_sweep.py, tg128), two rows a block against eight: MoE shape
// 456.6 -> 474.6 tok/s, 27B 151.6 -> 153.0, 24B 193.3 -> 195.5.
template <KvElem K, KvElem V, int VEC, int P>
void launch_rows(const DecodeArgs& args) {
  constexpr int64_t kRereadBytes = int64_t{8} << 20;
  const AttnView& a = args.a;
  const bool cache_in_l2 = a.key_rows * a.kv_heads * a.d * (kv_elem_bits(K) + kv_elem_bits(V)) / 8 <= kRereadBytes;
  if (args.rows <= 2 || cache_in_l2) launch<K, V, VEC, P, 2>(args);
  else if (args.rows <= 4) launch<K, V, VEC, P, 4>(args);
  else launch<K, V, VEC, P, 8>(args);
}

template <KvElem K, KvElem V>
void launch_vectors(const DecodeArgs& args) {
  const AttnView& a = args.a;
  // Whole chunks of four values need every row start of q, k and v on a four-value boundary.
  const bool vec4 =
      a.d % 4 == 0 && a.q_s0 % 4 == 0 && a.q_s1 % 4 == 0 && aligned16(a.q) && kv_rows_aligned(a.k, K, 4) && kv_rows_aligned(a.v, V, 4);
  if (vec4 && a.d <= 128) launch_rows<K, V, 4, 1>(args);
  else if (vec4) launch_rows<K, V, 4, 2>(args);
  else launch_rows<K, V, 1, 8>(args);
}

}  // namespace

void attention_decode(const AttnView& a) {
  DecodeArgs args{};
  args.a = a;
  args.groups = static_cast<int>(a.heads / a.kv_heads);
  args.rows = static_cast<int>(a.n * args.groups);
  switch (a.k_elem) {
    case KvElem::f32: return launch_vectors<KvElem::f32, KvElem::f32>(args);
    case KvElem::bf16: return launch_vectors<KvElem::bf16, KvElem::bf16>(args);
    case KvElem::q8:
      if (a.v_elem == KvElem::q4) return launch_vectors<KvElem::q8, KvElem::q4>(args);
      return launch_vectors<KvElem::q8, KvElem::q8>(args);
    case KvElem::q4: return;  // keys are never q4 (attention_kv checks the pair)
  }
}

}  // namespace sanctum::ops::cuda
