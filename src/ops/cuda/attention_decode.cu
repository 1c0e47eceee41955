// Attention for a few queries (decode): bandwidth-bound on K/V, so a block takes every query head of
// one KV head ("rows" = query × head-in-group, up to RB of them, q in registers) and reads each K/V
// row once for all of them. The block's keys are split across its warps in batches of KB keys read
// straight from global in the cache's elements (f32, bf16 or q8, or q8 keys with q4 values; 4-value
// vector loads where aligned): a batch's loads are all issued before the first is converted
// (dequantized in registers where used), and a warp over any cache but f32 loads its next batch while
// it computes this one. Each warp keeps an
// online softmax per row, the warps merge in shared memory, and when the keys are also split across
// blocks (split-K) a second kernel merges the splits.
// A decode step's sequences, each over its own cache, go out together (attention_decode_batch): one
// grid of every sequence's blocks, each sequence's with the splits its own launch would have.
#include <algorithm>
#include <vector>

#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/kv_access.cuh"
#include "tensor/tensor.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kWarps = 4;

struct DecodeArgs {
  AttnView a;
  int groups;   // query heads per KV head
  int rows;     // n * groups: rows of one KV head
  int splits;   // the launch's key splits: those that fill the GPU, fewer where k's rows are few (plan_splits)
  float* part;  // (n, heads, splits, d + 2): unnormalised acc..., max, sum
};

// The key splits of the live keys, planned on the device from the position (so a recorded step plans
// as a launched one, and a sequence's bits depend on its live length, not on its cache's capacity,
// short of kRereadBytes, which picks the rows a block takes): the launch's splits but none under
// kMinKeysPerSplit keys (the merge costs traffic), each of `keys_per_split` keys; splits past them
// find nothing and end at once.
constexpr int64_t kMinKeysPerSplit = 16;
__device__ __forceinline__ int live_splits(const DecodeArgs& args, int64_t& keys_per_split) {
  const AttnView& a = args.a;
  const int64_t q_pos0 = a.q_pos0_device != nullptr ? *a.q_pos0_device : a.q_pos0;
  const int64_t live = q_pos0 + a.n;  // keys [0, live) are visible to the last query
  const int64_t splits = max(int64_t{1}, min(static_cast<int64_t>(args.splits), (live + kMinKeysPerSplit - 1) / kMinKeysPerSplit));
  keys_per_split = (live + splits - 1) / splits;
  return static_cast<int>((live + keys_per_split - 1) / keys_per_split);
}

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
// K and V are read in the cache's elements and dequantized in registers. One block: split `split`
// of KV head g's rows [row0, row0 + RB).
template <KvElem K, KvElem V, int VEC, int P, int RB, int KB>
__device__ __forceinline__ void decode_block(const DecodeArgs& args, int64_t split, int64_t g, int row0) {
  int64_t keys_per_split;
  const int splits = live_splits(args, keys_per_split);
  if (split >= splits) return;  // block-uniform: past the live keys
  constexpr int DP = 32 * P * VEC;
  __shared__ float red_acc[kWarps][RB][DP];
  __shared__ float red_m[kWarps][RB], red_l[kWarps][RB];
  const AttnView& a = args.a;
  const int D = a.d, G = args.groups;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;

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
  const int64_t key_begin = split * keys_per_split;
  const int64_t key_end = key_begin + keys_per_split < block_limit ? key_begin + keys_per_split : block_limit;
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
    if (splits == 1) {
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

// Grid: (splits, kv heads, row groups).
template <KvElem K, KvElem V, int VEC, int P, int RB, int KB>
__global__ void __launch_bounds__(kWarps * 32) attention_decode_kernel(DecodeArgs args) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  decode_block<K, V, VEC, P, RB, KB>(args, blockIdx.x, blockIdx.y, static_cast<int>(blockIdx.z) * RB);
}

// Several sequences' decode of one instantiation in one launch, each with the arguments (splits
// included) its own launch would have, so each computes the bits it computes alone. Kernel
// arguments, not a table in device memory: nothing to copy or keep alive per launch.
constexpr int kBatchArgBytes = 4000;  // under the 4 KiB every driver takes as kernel arguments
struct DecodeBatch {
  int count = 0;
  int row_groups = 0;  // per sequence
  int64_t max_splits = 0;
  static constexpr int kMax = static_cast<int>((kBatchArgBytes - 16) / sizeof(DecodeArgs));
  DecodeArgs seq[kMax];
};
static_assert(sizeof(DecodeBatch) <= kBatchArgBytes);

// Grid: (the most splits of any sequence, kv heads, sequences x row groups); a sequence's blocks
// past its own splits end at once.
template <KvElem K, KvElem V, int VEC, int P, int RB, int KB>
__global__ void __launch_bounds__(kWarps * 32) attention_decode_batch_kernel(const __grid_constant__ DecodeBatch batch) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int s = static_cast<int>(blockIdx.z) / batch.row_groups;
  const DecodeArgs& args = batch.seq[s];
  if (blockIdx.x >= static_cast<unsigned>(args.splits)) return;
  decode_block<K, V, VEC, P, RB, KB>(args, blockIdx.x, blockIdx.y, static_cast<int>(blockIdx.z) % batch.row_groups * RB);
}

constexpr int kMaxSplits = 256;

// Merges the splits of query i, head h for 32 of its d values (from c0): the 8 warps take every 8th
// split each, so no thread walks all splits in a row.
__device__ __forceinline__ void combine_block(const DecodeArgs& args, int64_t i, int64_t h, int c0) {
  __shared__ float weight[kMaxSplits];
  __shared__ float partial[8][32];
  __shared__ float scratch[32];
  int64_t keys_per_split;
  const int S = live_splits(args, keys_per_split);
  if (S == 1) return;  // block-uniform: the one split wrote the output itself
  const AttnView& a = args.a;
  const int D = a.d, tid = threadIdx.x, slice = tid >> 5, c = c0 + (tid & 31);
  const float* part = args.part + (i * a.heads + h) * args.splits * (D + 2);
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

// Grid: (queries, heads, d / 32).
__global__ void __launch_bounds__(256) decode_combine(DecodeArgs args) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  combine_block(args, blockIdx.x, blockIdx.y, static_cast<int>(blockIdx.z) * 32);
}

// Grid: (sequences x queries, heads, d / 32), over the sequences whose launch splits their keys.
__global__ void __launch_bounds__(256) decode_combine_batch(const __grid_constant__ DecodeBatch batch, int queries) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const DecodeArgs& args = batch.seq[blockIdx.x / queries];
  if (args.splits == 1) return;
  combine_block(args, blockIdx.x % queries, blockIdx.y, static_cast<int>(blockIdx.z) * 32);
}

Tensor& partial_scratch() {
  static Tensor t;
  return t;
}

float* partial_room(int64_t floats) {
  Tensor& part = partial_scratch();
  if (!part || part.numel() < floats) part = Tensor::zeros({floats}, DType::f32, Device::cuda);
  return part.data<float>();
}

// The instantiation a call runs: the cache's elements, the vector width and chunks per lane, and
// the rows per block.
struct DecodeConfig {
  KvElem k, v;
  int vec, p, rb;
  bool operator==(const DecodeConfig&) const = default;
};

DecodeArgs decode_args(const AttnView& a) {
  DecodeArgs args{};
  args.a = a;
  args.groups = static_cast<int>(a.heads / a.kv_heads);
  args.rows = static_cast<int>(a.n * args.groups);
  return args;
}

DecodeConfig decode_config(const DecodeArgs& args) {
  const AttnView& a = args.a;
  DecodeConfig c{a.k_elem, a.k_elem == KvElem::q8 && a.v_elem == KvElem::q4 ? KvElem::q4 : a.k_elem, 1, 8, 2};
  // Whole chunks of four values need every row start of q, k and v on a four-value boundary.
  const bool vec4 =
      a.d % 4 == 0 && a.q_s0 % 4 == 0 && a.q_s1 % 4 == 0 && aligned16(a.q) && kv_rows_aligned(a.k, c.k, 4) && kv_rows_aligned(a.v, c.v, 4);
  if (vec4) {
    c.vec = 4;
    c.p = a.d <= 128 ? 1 : 2;
  }
  // Rows per block. A block computes every key for each of its rows, so few rows a block make more
  // blocks with less arithmetic each, which is what decode over a short cache waits on; but each row
  // group reads the cache again, so a cache past kRereadBytes (where L2 no longer holds it beside the
  // weights streaming through) takes blocks of up to eight rows and reads it once. On an H200 at 512
  // keys (768 of capacity; bench/gpu/decode_sweep.py, tg128), two rows a block against eight: MoE
  // shape 456.6 -> 474.6 tok/s, 27B 151.6 -> 153.0, 24B 193.3 -> 195.5.
  constexpr int64_t kRereadBytes = int64_t{8} << 20;
  const bool cache_in_l2 = a.key_rows * a.kv_heads * a.d * (kv_elem_bits(c.k) + kv_elem_bits(c.v)) / 8 <= kRereadBytes;
  c.rb = args.rows <= 2 || cache_in_l2 ? 2 : args.rows <= 4 ? 4 : 8;
  return c;
}

// The key splits of a call's launch with `rb` rows a block (args.splits: those that fill the GPU, fewer
// where k's rows, for a model the cache's capacity, are few); the device plans the live keys' splits
// within them (live_splits). Returns the call's row groups.
int64_t plan_splits(DecodeArgs& args, int rb) {
  const AttnView& a = args.a;
  const int64_t row_groups = (args.rows + rb - 1) / rb;
  const int64_t base = a.kv_heads * row_groups;
  // Up to eight blocks per multiprocessor, but no split under 16 keys (the merge costs traffic). A
  // block's four warps then take one or two batches of keys each: at 512 keys of the benchmark
  // shapes, 32 keys a split and two blocks per multiprocessor had left 48 to 96 blocks of four warps
  // on 132 multiprocessors. On an H200 (bench/gpu/decode_sweep.py, tg128 after 512, single runs about
  // 1% apart): MoE shape 444.9 -> 453.9 tok/s, 27B 150.1 -> 151.2, 24B 191.9 -> 192.8; 8 keys were
  // faster for the MoE shape (456.9) and slower for the 24B (185.8).
  constexpr int64_t kBlocksPerMultiprocessor = 8;
  const int64_t target = std::clamp<int64_t>((kBlocksPerMultiprocessor * multiprocessor_count() + base - 1) / base, 1, kMaxSplits);
  args.splits = static_cast<int>(std::clamp<int64_t>((a.key_rows + kMinKeysPerSplit - 1) / kMinKeysPerSplit, 1, target));
  return row_groups;
}

// Floats of split partials a call writes.
int64_t partial_floats(const DecodeArgs& args) { return args.splits > 1 ? args.a.n * args.a.heads * args.splits * (args.a.d + 2) : 0; }

// Calls f.template operator()<K, V, VEC, P, RB>() of the configuration's instantiation.
template <class F>
void with_config(const DecodeConfig& c, F&& f) {
  auto rows = [&]<KvElem K, KvElem V, int VEC, int P>() {
    if (c.rb == 2) f.template operator()<K, V, VEC, P, 2>();
    else if (c.rb == 4) f.template operator()<K, V, VEC, P, 4>();
    else f.template operator()<K, V, VEC, P, 8>();
  };
  auto vectors = [&]<KvElem K, KvElem V>() {
    if (c.vec == 4 && c.p == 1) rows.template operator()<K, V, 4, 1>();
    else if (c.vec == 4) rows.template operator()<K, V, 4, 2>();
    else rows.template operator()<K, V, 1, 8>();
  };
  switch (c.k) {
    case KvElem::f32: return vectors.template operator()<KvElem::f32, KvElem::f32>();
    case KvElem::bf16: return vectors.template operator()<KvElem::bf16, KvElem::bf16>();
    case KvElem::q8:
      if (c.v == KvElem::q4) return vectors.template operator()<KvElem::q8, KvElem::q4>();
      return vectors.template operator()<KvElem::q8, KvElem::q8>();
    case KvElem::q4: return;  // keys are never q4 (attention_kv checks the pair)
  }
}

constexpr int key_batch(int rb) { return rb >= 8 ? 2 : 4; }

template <KvElem K, KvElem V, int VEC, int P, int RB>
void launch_one(DecodeArgs args, int64_t row_groups) {
  const AttnView& a = args.a;
  if (args.splits > 1) args.part = partial_room(partial_floats(args));
  const dim3 grid(static_cast<unsigned>(args.splits), static_cast<unsigned>(a.kv_heads), static_cast<unsigned>(row_groups));
  launch_early(attention_decode_kernel<K, V, VEC, P, RB, key_batch(RB)>, grid, dim3(kWarps * 32), 0, args);
  check_launch("attention decode");
  if (args.splits > 1) {
    launch_early(decode_combine, dim3(static_cast<unsigned>(a.n), static_cast<unsigned>(a.heads), static_cast<unsigned>((a.d + 31) / 32)),
                 dim3(256), 0, args);
    check_launch("attention decode combine");
  }
}

// batch.seq[0, count): one instantiation, the same n, heads and d; their partials at part.
template <KvElem K, KvElem V, int VEC, int P, int RB>
void launch_batch(const DecodeBatch& batch, bool any_split) {
  const AttnView& a = batch.seq[0].a;
  const dim3 grid(static_cast<unsigned>(batch.max_splits), static_cast<unsigned>(a.kv_heads),
                  static_cast<unsigned>(batch.count * batch.row_groups));
  launch_early(attention_decode_batch_kernel<K, V, VEC, P, RB, key_batch(RB)>, grid, dim3(kWarps * 32), 0, batch);
  check_launch("attention decode batch");
  if (any_split) {
    launch_early(decode_combine_batch,
                 dim3(static_cast<unsigned>(batch.count * a.n), static_cast<unsigned>(a.heads), static_cast<unsigned>((a.d + 31) / 32)),
                 dim3(256), 0, batch, static_cast<int>(a.n));
    check_launch("attention decode batch combine");
  }
}

}  // namespace

void attention_decode(const AttnView& a) {
  DecodeArgs args = decode_args(a);
  const DecodeConfig c = decode_config(args);
  const int64_t row_groups = plan_splits(args, c.rb);
  with_config(c, [&]<KvElem K, KvElem V, int VEC, int P, int RB>() { launch_one<K, V, VEC, P, RB>(args, row_groups); });
}

void attention_decode_batch(std::span<const AttnView> views) {
  std::vector<DecodeArgs> args;
  std::vector<DecodeConfig> configs;
  std::vector<int64_t> row_groups, offsets;
  int64_t floats = 0;
  for (const AttnView& a : views) {
    args.push_back(decode_args(a));
    configs.push_back(decode_config(args.back()));
    row_groups.push_back(plan_splits(args.back(), configs.back().rb));
    offsets.push_back(floats);
    floats += partial_floats(args.back());
  }
  float* part = floats > 0 ? partial_room(floats) : nullptr;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].splits > 1) args[i].part = part + offsets[i];
  // Launches of up to DecodeBatch::kMax calls that share an instantiation, query count and head
  // shape (in practice all of a step's: one model, one token each).
  std::vector<bool> done(args.size(), false);
  for (size_t first = 0; first < args.size(); ++first) {
    if (done[first]) continue;
    DecodeBatch batch;
    batch.row_groups = static_cast<int>(row_groups[first]);
    bool any_split = false;
    auto flush = [&] {
      with_config(configs[first], [&]<KvElem K, KvElem V, int VEC, int P, int RB>() { launch_batch<K, V, VEC, P, RB>(batch, any_split); });
      batch.count = 0;
      batch.max_splits = 0;
      any_split = false;
    };
    for (size_t i = first; i < args.size(); ++i) {
      const AttnView &x = args[i].a, &y = args[first].a;
      if (done[i] || !(configs[i] == configs[first]) || x.n != y.n || x.heads != y.heads || x.kv_heads != y.kv_heads || x.d != y.d)
        continue;
      done[i] = true;
      batch.seq[batch.count++] = args[i];
      batch.max_splits = std::max<int64_t>(batch.max_splits, args[i].splits);
      any_split |= args[i].splits > 1;
      if (batch.count == DecodeBatch::kMax) flush();
    }
    if (batch.count > 0) flush();
  }
}

}  // namespace sanctum::ops::cuda
