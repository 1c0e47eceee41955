// RoPE (rotate-half, partial rotary), with the KV cache store (f32 or bf16 rows) and gated attention's
// head norms.
#include <algorithm>
#include <vector>

#include "base/tuning.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kv_access.cuh"
#include "ops/cuda/norm_chunks.cuh"

namespace sanctum::ops::cuda {

namespace {

// cos and sin (times the magnitude) of pair j's f32 angle at `position`, in double, as the reference
// does.
__device__ __forceinline__ double2 cos_sin_at(int32_t position, int64_t j, const float* inv_freq, float magnitude) {
  const float angle = static_cast<float>(position) * inv_freq[j];
  double s, c;
  sincos(static_cast<double>(angle), &s, &c);
  return make_double2(c * magnitude, s * magnitude);
}

// Rotates the pair (j, j + half) of one head's row `from` by cs (cos_sin_at), in double, into `to`
// (which may be `from`). The rotated values also go to `copy` when it is set, as a cache of element C
// stores them (f32, or bf16 bits).
template <class C = float>
__device__ __forceinline__ void rotate_pair(const float* from, float* to, int64_t j, int64_t half, double2 cs, C* copy) {
  const double a = from[j], b = from[j + half];
  const float lo = static_cast<float>(a * cs.x - b * cs.y), hi = static_cast<float>(b * cs.x + a * cs.y);
  to[j] = lo;
  to[j + half] = hi;
  if (copy != nullptr) {
    copy[j] = kv_stored<C>(lo);
    copy[j + half] = kv_stored<C>(hi);
  }
}

// Thread per (token, head, pair j < half).
__global__ void rope_kernel(float* x, int64_t n, int64_t heads, int64_t s0, int64_t s1, int64_t half, const int32_t* positions,
                            const float* inv_freq, float magnitude) {
  wait_for_previous();  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n * heads * half) return;
  const int64_t j = i % half, h = (i / half) % heads, t = i / (half * heads);
  float* row = x + t * s0 + h * s1;
  rotate_pair<float>(row, row, j, half, cos_sin_at(positions[t], j, inv_freq, magnitude), nullptr);
}

struct RopeStoreArgs {
  float* q;
  int64_t q_s0, q_s1, heads;
  float* k;
  int64_t k_s0, kv_heads;
  const float* v;
  int64_t v_s0;
  void* cache_k;  // (capacity, kv_heads * d) of f32, or of bf16 (rounded as tensor/dtype.h's f32_to_bf16)
  void* cache_v;
  bool cache_bf16;
  int64_t ck_s0, cv_s0;
  int64_t n, d, half;
  int64_t heads_per_block;  // of the heads + kv_heads, q's first
  const int32_t* positions;
  const float* inv_freq;
  float magnitude;
};

// Where token t's rotations and stores go: its position and its cache rows there (all kv heads).
template <class C>
struct TokenRows {
  int32_t position;
  C* k;
  C* v;
};

// The token of block x: the launch's first token plus x.
__device__ __forceinline__ int64_t token_of(const RopeStoreArgs&) { return blockIdx.x; }

// A launch over one cache: every token's rows in a's cache.
template <class C>
__device__ __forceinline__ TokenRows<C> rows_in(const RopeStoreArgs& a, int64_t t) {
  const int32_t position = a.positions[t];
  return {position, static_cast<C*>(a.cache_k) + position * a.ck_s0, static_cast<C*>(a.cache_v) + position * a.cv_s0};
}

// Several sequences' tokens in one launch (a decode step's), each sequence over its own cache with
// its own positions: token t belongs to the entry with begin <= t < end. Kernel arguments, as the
// decode attention's batch (nothing to copy to the device or keep alive per launch).
struct CacheBatch {
  struct Entry {
    void* k;
    void* v;
    int64_t ck_s0, cv_s0;
    const int32_t* positions;  // the entry's first token's position at positions[0]
    int32_t begin, end;
  };
  static constexpr int kArgBytes = 4000;  // under the 4 KiB every driver takes as kernel arguments
  static constexpr int kMax = 64;
  int count;
  int32_t row0;  // the launch's first token: block x is token row0 + x
  Entry seq[kMax];
};

__device__ __forceinline__ int64_t token_of(const CacheBatch& b) { return b.row0 + static_cast<int64_t>(blockIdx.x); }

template <class C>
__device__ __forceinline__ TokenRows<C> rows_in(const CacheBatch& b, int64_t t) {
  int s = 0;
  while (s + 1 < b.count && t >= b.seq[s].end) ++s;  // entries ascend; block-uniform
  const CacheBatch::Entry& e = b.seq[s];
  const int32_t position = e.positions[t - e.begin];
  return {position, static_cast<C*>(e.k) + position * e.ck_s0, static_cast<C*>(e.v) + position * e.cv_s0};
}

// Block (t, y): token t's heads [y hpb, (y + 1) hpb) of q's then k's, k's rotated values written to
// the cache as well, and for each k head among them its dims past the rotary ones and its v row.
// The block takes its token's cos and sin once, into shared memory, where a thread per pair took
// them again for every head (a 4,096-token prompt of the 24B shape spent 137 us a layer here, most
// of it in the double sincos). The rotation is rope_kernel's: the bits are the four ops'. C: the
// cache's element (float, or uint16_t for bf16 bits).
template <class C, class Caches>
__device__ __forceinline__ void rope_store_block(const RopeStoreArgs& a, const Caches& caches) {
  extern __shared__ double2 cos_sin[];  // [half] of cos_sin_at
  wait_for_previous();                  // launched early (common.cuh): nothing is read before the kernel ahead ends
  allow_next_early();
  const int64_t t = token_of(caches), half = a.half;
  const TokenRows<C> rows = rows_in<C>(caches, t);
  for (int64_t j = threadIdx.x; j < half; j += blockDim.x) cos_sin[j] = cos_sin_at(rows.position, j, a.inv_freq, a.magnitude);
  __syncthreads();
  const int64_t h0 = blockIdx.y * a.heads_per_block, h1 = min(h0 + a.heads_per_block, a.heads + a.kv_heads);
  for (int64_t i = threadIdx.x; i < (h1 - h0) * half; i += blockDim.x) {
    const int64_t h = h0 + i / half, j = i % half;
    if (h < a.heads) {
      float* row = a.q + t * a.q_s0 + h * a.q_s1;
      rotate_pair<C>(row, row, j, half, cos_sin[j], nullptr);
    } else {
      float* row = a.k + t * a.k_s0 + (h - a.heads) * a.d;
      rotate_pair<C>(row, row, j, half, cos_sin[j], rows.k + (h - a.heads) * a.d);
    }
  }
  // The block's k heads: their dims past the rotary ones, and their v rows.
  const int64_t k0 = max(h0, a.heads) - a.heads, k1 = h1 - a.heads;
  if (k1 <= k0) return;
  const int64_t rest = a.d - 2 * half, first = k0 * a.d;
  const float* k = a.k + t * a.k_s0;
  for (int64_t i = threadIdx.x; i < (k1 - k0) * rest; i += blockDim.x) {
    const int64_t c = first + (i / rest) * a.d + 2 * half + i % rest;
    rows.k[c] = kv_stored<C>(k[c]);
  }
  const float* v = a.v + t * a.v_s0;
  for (int64_t i = threadIdx.x; i < (k1 - k0) * a.d; i += blockDim.x) rows.v[first + i] = kv_stored<C>(v[first + i]);
}

template <class C>
__global__ void rope_store_kernel(RopeStoreArgs a) {
  rope_store_block<C>(a, a);
}

template <class C>
__global__ void rope_store_batch_kernel(RopeStoreArgs a, const __grid_constant__ CacheBatch batch) {
  rope_store_block<C>(a, batch);
}

// The per-head RMSNorm of q and k ahead of rope_store_kernel's work (gated attention), in the same
// launch. Block (t, y): warp w takes head y kNormWarps + w of token t (q's heads, then k's). A warp
// holds its head's row as rms_norm_chunks_kernel's one-warp blocks do (lane l: chunks l, l + 32, ..
// of four values; rows of up to 512 values) and does that kernel's arithmetic (norm_chunks.cuh) in
// its order, so the normalised values are its bits; the rotation that follows is
// rope_store_kernel's.
constexpr int kNormWarps = 4, kNormChunks = 4;  // chunks a lane holds: rows of up to 512 values
constexpr int64_t kFusedMaxTokens = 64;

struct NormRopeArgs {
  RopeStoreArgs r;    // q is the normalised output; k is normalised in place
  const float* q_in;  // head h of token t at q_in + (t * heads + h) * q_in_s
  int64_t q_in_s;
  const void* q_w;
  const void* k_w;
  FloatKind q_kind, k_kind;
  float eps, offset;
};

// Head h's norm weights (plus the offset), as this lane's chunks.
__device__ __forceinline__ void head_weights(const NormRopeArgs& na, int64_t h, float4 (&wv)[kNormChunks]) {
  const int lane = threadIdx.x & 31;
  const bool is_q = h < na.r.heads;
  const void* w = is_q ? na.q_w : na.k_w;
  const FloatKind kind = is_q ? na.q_kind : na.k_kind;
#pragma unroll
  for (int i = 0; i < kNormChunks; ++i) wv[i] = norm_chunks::weights(w, kind, na.offset, 4 * (lane + 32 * static_cast<int64_t>(i)), na.r.d);
}

// One warp's head h of token t: normalised into the warp's row buffer, rotated out to q (or k in
// place and the cache, of element C), and for a k head its v row to the cache.
template <class C>
__device__ __forceinline__ void norm_rope_head(const NormRopeArgs& na, int64_t t, int64_t h, const TokenRows<C>& rows,
                                               const double2* cos_sin, const float4 (&wv)[kNormChunks], float4* normed) {
  const RopeStoreArgs& a = na.r;
  const int lane = threadIdx.x & 31;
  const int64_t d = a.d, chunks = d / 4;
  const bool is_q = h < a.heads;
  const int64_t kh = is_q ? 0 : h - a.heads;  // the k head
  float* k_row = a.k + t * a.k_s0 + kh * d;
  const float* in = is_q ? na.q_in + (t * a.heads + h) * na.q_in_s : k_row;
  float4 v[kNormChunks];
  float ss = 0.0f;
#pragma unroll
  for (int i = 0; i < kNormChunks; ++i) {
    const int64_t k = lane + 32 * static_cast<int64_t>(i);
    v[i] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (k < chunks) {
      v[i] = load4(in + 4 * k);
      ss = norm_chunks::add_squares(ss, v[i]);
    }
  }
  ss = warp_sum(ss);  // a one-warp block_sum: the same sum
  const float inv = norm_chunks::inverse_rms(ss, d, na.eps);
#pragma unroll
  for (int i = 0; i < kNormChunks; ++i) {
    const int64_t k = lane + 32 * static_cast<int64_t>(i);
    if (k < chunks) normed[k] = norm_chunks::normalised(v[i], inv, wv[i]);
  }
  __syncwarp();
  const float* row = reinterpret_cast<const float*>(normed);
  float* out = is_q ? a.q + t * a.q_s0 + h * a.q_s1 : k_row;
  C* cache = is_q ? nullptr : rows.k + kh * d;
  for (int64_t j = lane; j < a.half; j += 32) rotate_pair<C>(row, out, j, a.half, cos_sin[j], cache);
  for (int64_t c = 2 * a.half + lane; c < d; c += 32) {  // past the rotary dims
    out[c] = row[c];
    if (cache != nullptr) cache[c] = kv_stored<C>(row[c]);
  }
  if (is_q) return;
  const float* v_row = a.v + t * a.v_s0 + kh * d;
  C* cache_v = rows.v + kh * d;
  for (int64_t c = lane; c < d; c += 32) cache_v[c] = kv_stored<C>(v_row[c]);
}

template <class C, class Caches>
__device__ __forceinline__ void norm_rope_store_block(const NormRopeArgs& na, const Caches& caches) {
  extern __shared__ double2 cos_sin[];                     // [half] of cos_sin_at
  __shared__ float4 normed[kNormWarps][32 * kNormChunks];  // each warp's normalised row
  const RopeStoreArgs& a = na.r;
  const int warp = threadIdx.x >> 5;
  const int64_t t = token_of(caches), h = static_cast<int64_t>(blockIdx.y) * kNormWarps + warp;
  const bool live = h < a.heads + a.kv_heads;
  float4 wv[kNormChunks];
  if (live) head_weights(na, h, wv);  // before the wait: nothing of the step writes them
  wait_for_previous();                // launched early (common.cuh): nothing else is read before the kernel ahead ends
  allow_next_early();
  const TokenRows<C> rows = rows_in<C>(caches, t);
  for (int64_t j = threadIdx.x; j < a.half; j += blockDim.x) cos_sin[j] = cos_sin_at(rows.position, j, a.inv_freq, a.magnitude);
  __syncthreads();
  if (live) norm_rope_head<C>(na, t, h, rows, cos_sin, wv, normed[warp]);
}

template <class C>
__global__ void __launch_bounds__(kNormWarps * 32) norm_rope_store_kernel(NormRopeArgs na) {
  norm_rope_store_block<C>(na, na.r);
}

template <class C>
__global__ void __launch_bounds__(kNormWarps * 32) norm_rope_store_batch_kernel(NormRopeArgs na, const __grid_constant__ CacheBatch batch) {
  norm_rope_store_block<C>(na, batch);
}

RopeStoreArgs rope_store_args(Tensor& q, Tensor& k, const Tensor& v, std::span<const int32_t> positions, const int32_t* device_positions,
                              const RopeTable& table, Tensor& cache_k, Tensor& cache_v) {
  RopeStoreArgs a{};
  a.q = q.data<float>();
  a.q_s0 = q.stride(0);
  a.q_s1 = q.stride(1);
  a.heads = q.dim(1);
  a.k = k.data<float>();
  a.k_s0 = k.stride(0);
  a.kv_heads = k.dim(1);
  a.v = v.data<float>();
  a.v_s0 = v.stride(0);
  a.cache_k = cache_k.raw();
  a.cache_v = cache_v.raw();
  a.cache_bf16 = cache_k.dtype() == DType::bf16;
  a.ck_s0 = cache_k.stride(0);
  a.cv_s0 = cache_v.stride(0);
  a.n = k.dim(0);
  a.d = k.dim(2);
  a.half = table.rotary_dim() / 2;
  a.positions = device_positions != nullptr ? device_positions : device_ints(HostSlot::positions, positions);
  a.inv_freq = device_table(table.inv_freq());
  a.magnitude = table.magnitude();
  return a;
}

}  // namespace

void rope(Tensor& x, std::span<const int32_t> positions, const int32_t* device_positions, const RopeTable& table) {
  const int64_t n = x.dim(0), heads = x.dim(1), half = table.rotary_dim() / 2;
  if (n == 0 || heads == 0 || half == 0) return;
  const int32_t* pos = device_positions != nullptr ? device_positions : device_ints(HostSlot::positions, positions);
  const float* inv = device_table(table.inv_freq());
  const int64_t total = n * heads * half;
  launch_early(rope_kernel, dim3(blocks_for(total, 256)), dim3(256), 0, x.data<float>(), n, heads, x.stride(0), x.stride(1), half, pos, inv,
               table.magnitude());
  check_launch("rope");
}

void rope_and_store(Tensor& q, Tensor& k, const Tensor& v, std::span<const int32_t> positions, const int32_t* device_positions,
                    const RopeTable& table, Tensor& cache_k, Tensor& cache_v) {
  RopeStoreArgs a = rope_store_args(q, k, v, positions, device_positions, table, cache_k, cache_v);
  // Every head in one block for a prompt; for a few tokens, blocks of two heads, so that a decode
  // step's dozens of heads spread over as many multiprocessors.
  const int64_t all_heads = a.heads + a.kv_heads;
  a.heads_per_block = a.n >= 64 ? all_heads : std::min<int64_t>(all_heads, 2);
  const dim3 grid(static_cast<unsigned>(a.n), static_cast<unsigned>((all_heads + a.heads_per_block - 1) / a.heads_per_block));
  const size_t smem = static_cast<size_t>(a.half) * sizeof(double2);
  if (a.cache_bf16) launch_early(rope_store_kernel<uint16_t>, grid, dim3(256), smem, a);
  else launch_early(rope_store_kernel<float>, grid, dim3(256), smem, a);
  check_launch("rope_and_store");
}

namespace {

static_assert(sizeof(NormRopeArgs) + sizeof(CacheBatch) <= CacheBatch::kArgBytes, "a batch launch's arguments fit the driver's");

// The launches' arguments for seqs[first, first + count): each entry's caches and positions (device
// positions where every sequence has them, else the batch's host positions uploaded once).
CacheBatch cache_batch(std::span<const RopeStoreSequence> seqs, size_t first, size_t count, const int32_t* uploaded) {
  CacheBatch b{};
  b.count = static_cast<int>(count);
  b.row0 = static_cast<int32_t>(seqs[first].begin);
  for (size_t i = 0; i < count; ++i) {
    const RopeStoreSequence& q = seqs[first + i];
    b.seq[i] = {q.cache_k.raw(),
                q.cache_v.raw(),
                q.cache_k.stride(0),
                q.cache_v.stride(0),
                uploaded != nullptr ? uploaded + q.begin : q.device_positions,
                static_cast<int32_t>(q.begin),
                static_cast<int32_t>(q.end)};
  }
  return b;
}

// The batch's positions on the device when some sequence has none there: every row's, uploaded once.
const int32_t* uploaded_positions(std::span<const RopeStoreSequence> seqs) {
  bool all_device = true;
  for (const RopeStoreSequence& q : seqs) all_device &= q.device_positions != nullptr;
  if (all_device) return nullptr;
  std::vector<int32_t> all(static_cast<size_t>(seqs.back().end), 0);
  for (const RopeStoreSequence& q : seqs) std::copy(q.positions.begin(), q.positions.end(), all.begin() + q.begin);
  return device_ints(HostSlot::positions, all);
}

// Calls launch(first, count) over the sequences in groups of at most CacheBatch::kMax (whose rows
// are consecutive: [seqs[first].begin, seqs[first + count - 1].end)).
template <class F>
void in_groups(std::span<const RopeStoreSequence> seqs, F&& launch) {
  for (size_t first = 0; first < seqs.size(); first += CacheBatch::kMax)
    launch(first, std::min<size_t>(CacheBatch::kMax, seqs.size() - first));
}

}  // namespace

void rope_and_store_batch(Tensor& q, Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreSequence> seqs) {
  if (seqs.empty()) return;
  const int32_t* uploaded = uploaded_positions(seqs);
  const RopeStoreSequence& s0 = seqs.front();
  Tensor ck = s0.cache_k, cv = s0.cache_v;
  RopeStoreArgs a = rope_store_args(q, k, v, s0.positions, uploaded != nullptr ? uploaded : s0.device_positions, table, ck, cv);
  const int64_t all_heads = a.heads + a.kv_heads;
  a.heads_per_block = a.n >= 64 ? all_heads : std::min<int64_t>(all_heads, 2);  // as rope_and_store's: the bits do not depend on it
  const size_t smem = static_cast<size_t>(a.half) * sizeof(double2);
  in_groups(seqs, [&](size_t first, size_t count) {
    const CacheBatch b = cache_batch(seqs, first, count, uploaded);
    const int64_t rows = seqs[first + count - 1].end - seqs[first].begin;
    const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>((all_heads + a.heads_per_block - 1) / a.heads_per_block));
    if (a.cache_bf16) launch_early(rope_store_batch_kernel<uint16_t>, grid, dim3(256), smem, a, b);
    else launch_early(rope_store_batch_kernel<float>, grid, dim3(256), smem, a, b);
  });
  check_launch("rope_and_store (batch)");
}

bool norm_rope_and_store_fused(const Tensor& q_in, const Tensor& q, const Tensor& k) {
  const bool on = current_tuning().on(Knob::fuse_head_norm_rope);
  const int64_t d = k.dim(2);
  // Decode and short batches, where the launches are the cost: a 4,096-token prompt of the 27B
  // shape ran 1.1% slower fused (a block per four heads computing the token's cos and sin again)
  // and 0.3% slower with every head of a token in one block. The heads' rows as
  // rms_norm_chunks_kernel reads them with one warp (norms.cu), 16-byte aligned for the chunks.
  if (!on || k.dim(0) >= kFusedMaxTokens || d % 4 != 0 || d > 4 * 32 * kNormChunks) return false;
  const Tensor k_rows = k.reshape({k.dim(0) * k.dim(1), d});
  return rms_norm_rows_in_one_warp(q_in, q.reshape({q.dim(0) * q.dim(1), d})) && rms_norm_rows_in_one_warp(k_rows, k_rows);
}

namespace {
NormRopeArgs norm_rope_args(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                            Tensor& k, const Tensor& v, std::span<const int32_t> positions, const int32_t* device_positions,
                            const RopeTable& table, Tensor& cache_k, Tensor& cache_v) {
  NormRopeArgs na{};
  na.r = rope_store_args(q, k, v, positions, device_positions, table, cache_k, cache_v);
  na.q_in = q_in.data<float>();
  na.q_in_s = q_in.stride(0);
  na.q_w = q_norm.raw();
  na.k_w = k_norm.raw();
  na.q_kind = float_kind(q_norm);
  na.k_kind = float_kind(k_norm);
  na.eps = eps;
  na.offset = weight_offset;
  return na;
}
}  // namespace

void norm_rope_and_store(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                         Tensor& k, const Tensor& v, std::span<const int32_t> positions, const int32_t* device_positions,
                         const RopeTable& table, Tensor& cache_k, Tensor& cache_v) {
  const NormRopeArgs na =
      norm_rope_args(q_in, q_norm, k_norm, eps, weight_offset, q, k, v, positions, device_positions, table, cache_k, cache_v);
  const int64_t heads = na.r.heads + na.r.kv_heads;
  const dim3 grid(static_cast<unsigned>(na.r.n), static_cast<unsigned>((heads + kNormWarps - 1) / kNormWarps));
  const size_t smem = static_cast<size_t>(na.r.half) * sizeof(double2);
  if (na.r.cache_bf16) launch_early(norm_rope_store_kernel<uint16_t>, grid, dim3(kNormWarps * 32), smem, na);
  else launch_early(norm_rope_store_kernel<float>, grid, dim3(kNormWarps * 32), smem, na);
  check_launch("norm_rope_and_store");
}

void norm_rope_and_store_batch(const Tensor& q_in, const Tensor& q_norm, const Tensor& k_norm, float eps, float weight_offset, Tensor& q,
                               Tensor& k, const Tensor& v, const RopeTable& table, std::span<const RopeStoreSequence> seqs) {
  if (seqs.empty()) return;
  const int32_t* uploaded = uploaded_positions(seqs);
  const RopeStoreSequence& s0 = seqs.front();
  Tensor ck = s0.cache_k, cv = s0.cache_v;
  NormRopeArgs na = norm_rope_args(q_in, q_norm, k_norm, eps, weight_offset, q, k, v, s0.positions,
                                   uploaded != nullptr ? uploaded : s0.device_positions, table, ck, cv);
  const int64_t heads = na.r.heads + na.r.kv_heads;
  const size_t smem = static_cast<size_t>(na.r.half) * sizeof(double2);
  in_groups(seqs, [&](size_t first, size_t count) {
    const CacheBatch b = cache_batch(seqs, first, count, uploaded);
    const dim3 grid(static_cast<unsigned>(seqs[first + count - 1].end - seqs[first].begin),
                    static_cast<unsigned>((heads + kNormWarps - 1) / kNormWarps));
    if (na.r.cache_bf16) launch_early(norm_rope_store_batch_kernel<uint16_t>, grid, dim3(kNormWarps * 32), smem, na, b);
    else launch_early(norm_rope_store_batch_kernel<float>, grid, dim3(kNormWarps * 32), smem, na, b);
  });
  check_launch("norm_rope_and_store (batch)");
}

}  // namespace sanctum::ops::cuda
