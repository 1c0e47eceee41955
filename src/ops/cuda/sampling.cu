// Token selection on the GPU (ops/sampling.h), so only the ids leave the device. Argmax splits each
// row over many blocks; the sampler runs one block per row and never sorts: top-k and top-p cut the ids sorted by (logit desc, id
// asc) at a prefix, and a prefix is fixed by a threshold key (the logit's order-preserving bits) plus
// how many of the ids tied at it (lowest ids first) stay. Each threshold is found by a 16-way search
// over the key range, one pass over the row per 4 bits; the draw is an inverse CDF in ascending id
// order over 2^-52 fixed-point weights, so block sums and scans are exact and order-free. Both read
// each logit through the row's allowed-token mask when there is one (a forbidden logit is -inf, and
// is not loaded).
#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>

#include "ops/cuda/common.cuh"
#include "ops/cuda/sampling.cuh"
#include "tensor/device_memory.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kArgmaxThreads = 256;
constexpr int64_t kArgmaxSlice = 4096;  // elements of a row one argmax block covers
constexpr int kSampleThreads = 512;
constexpr int kSampleWarps = kSampleThreads / 32;
constexpr int kPivots = 16;
constexpr double kFixedOne = 4503599627370496.0;  // 2^52: weights (probabilities <= 1) in fixed point

struct SampleArgs {
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int top_k = 0;
  double u[kMaxSampleRows] = {};
};

__device__ __forceinline__ float nan_to_neg_inf(float v) { return isnan(v) ? -INFINITY : v; }

// One row's logits as the pick sees them: -inf where the row's mask (null: none; `words` u32 words,
// bit i % 32 of word i / 32) leaves token i out, NaN as -inf.
struct MaskedRow {
  const float* logits;
  const uint32_t* mask;
  int64_t words;
  __device__ __forceinline__ float operator[](int64_t i) const {
    if (mask != nullptr && (i >= words * 32 || ((mask[i >> 5] >> (i & 31)) & 1u) == 0)) return -INFINITY;
    return nan_to_neg_inf(logits[i]);
  }
};
__device__ __forceinline__ MaskedRow masked_row(const float* logits, int64_t stride, const uint32_t* mask, int64_t words, int64_t row) {
  return {logits + row * stride, mask == nullptr ? nullptr : mask + row * words, words};
}

// Larger floats give larger keys (-0 and +0 differ, so callers fold -0 into +0 first).
__device__ __forceinline__ uint32_t order_key(float f) {
  const uint32_t b = __float_as_uint(f);
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}
__device__ __forceinline__ float key_value(uint32_t k) { return __uint_as_float((k & 0x80000000u) ? (k & 0x7fffffffu) : ~k); }

// ---------------------------------------------------------------------------------------------
// argmax: the larger value wins, the lower index among equals; NaN is -inf, so it never wins and a
// row of only -inf / NaN gives 0, as sanctum::argmax does. Each element packs into one u64, value
// key high and ~index low, so the answer is the packed maximum whatever order blocks finish in:
// blocks of a row fold their slices into it with atomicMax, and a second kernel unpacks it (and
// zeroes it for the next call).

__device__ __forceinline__ unsigned long long packed_candidate(float v, int64_t i) {
  if (v == 0.0f) v = 0.0f;  // -0 ties with +0 (v is never NaN: MaskedRow)
  return (static_cast<unsigned long long>(order_key(v)) << 32) | static_cast<unsigned long long>(~static_cast<uint32_t>(i));
}

__device__ __forceinline__ unsigned long long max_u64(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

__global__ void __launch_bounds__(kArgmaxThreads)
    argmax_kernel(const float* logits, int64_t stride, int64_t vocab, const uint32_t* mask, int64_t words, unsigned long long* best) {
  __shared__ unsigned long long warps_best[kArgmaxThreads / 32];
  const MaskedRow row = masked_row(logits, stride, mask, words, blockIdx.y);
  const int64_t begin = static_cast<int64_t>(blockIdx.x) * kArgmaxSlice, end = min(vocab, begin + kArgmaxSlice);
  unsigned long long mine = 0;  // below every candidate (order_key(-inf) > 0)
  for (int64_t i = begin + threadIdx.x; i < end; i += blockDim.x) mine = max_u64(mine, packed_candidate(row[i], i));
  for (int o = 16; o > 0; o >>= 1) mine = max_u64(mine, __shfl_xor_sync(0xffffffffu, mine, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warps_best[warp] = mine;
  __syncthreads();
  if (threadIdx.x != 0) return;
  for (int w = 1; w < kArgmaxThreads / 32; ++w) mine = max_u64(mine, warps_best[w]);
  atomicMax(best + blockIdx.y, mine);
}

__global__ void argmax_unpack_kernel(unsigned long long* best, int64_t rows, int32_t* ids) {
  const int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (r >= rows) return;
  ids[r] = best[r] == 0 ? 0 : static_cast<int32_t>(~static_cast<uint32_t>(best[r] & 0xffffffffull));
  best[r] = 0;
}

// Per-row u64 maxima for argmax_kernel, zero between calls. One buffer for the process: all device
// work is ordered on one stream, and one worker drives a device.
unsigned long long* argmax_scratch(int64_t rows) {
  static std::mutex mutex;
  static std::shared_ptr<void> buffer;
  static int64_t capacity = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (rows > capacity) {
    capacity = std::max<int64_t>(rows, 64);
    buffer = device_memory::cuda_allocate(static_cast<size_t>(capacity) * sizeof(unsigned long long));  // zero-filled
  }
  return static_cast<unsigned long long*>(buffer.get());
}

// ---------------------------------------------------------------------------------------------
// Block helpers for the sampler (kSampleThreads threads). Every thread gets the same results, added
// in one fixed order, so the block's decisions are uniform and repeatable.

__device__ __forceinline__ double warp_sum_d(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

template <class Acc, int N>
__device__ void block_sums(const Acc (&v)[N], double (&out)[N], double* scratch /* kSampleWarps * N */) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  double w[N];
#pragma unroll
  for (int q = 0; q < N; ++q) w[q] = warp_sum_d(static_cast<double>(v[q]));
  __syncthreads();  // the previous use of scratch is over
  if (lane == 0)
#pragma unroll
    for (int q = 0; q < N; ++q) scratch[warp * N + q] = w[q];
  __syncthreads();
#pragma unroll
  for (int q = 0; q < N; ++q) {
    double t = 0.0;
    for (int k = 0; k < kSampleWarps; ++k) t += scratch[k * N + q];
    out[q] = t;
  }
}

__device__ __forceinline__ double block_sum_d(double v, double* scratch) {
  const double in[1] = {v};
  double out[1];
  block_sums(in, out, scratch);
  return out[0];
}

// Exclusive prefix over the block in thread order; `total` gets the sum. Integers: exact.
__device__ uint64_t block_exclusive_scan(uint64_t v, uint64_t* scratch /* kSampleWarps */, uint64_t& total) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  uint64_t inclusive = v;
  for (int o = 1; o < 32; o <<= 1) {
    const uint64_t t = __shfl_up_sync(0xffffffffu, inclusive, o);
    if (lane >= o) inclusive += t;
  }
  __syncthreads();
  if (lane == 31) scratch[warp] = inclusive;
  __syncthreads();
  uint64_t before = 0, all = 0;
  for (int k = 0; k < kSampleWarps; ++k) {
    if (k < warp) before += scratch[k];
    all += scratch[k];
  }
  total = all;
  return before + inclusive - v;
}

// The largest key x in [lo, hi] with F(x) >= target, where F(x) sums the weights of the elements
// whose key is >= x (plus `lump` when x <= lump_key: elements counted as a group, left out of
// `element`). F does not grow with x; each pass evaluates it at 16 pivots and keeps the sub-range
// the answer lies in. `element(i, key, weight)` gives element i's key and weight (0: not counted).
// False when even F(lo) is short of target.
template <class Acc, class Element>
__device__ bool search_largest(int64_t vocab, uint32_t lo, uint32_t hi, double target, double lump, uint32_t lump_key, Element element,
                               double* scratch, uint32_t& result) {
  int64_t low = static_cast<int64_t>(lo) - 1, high = hi;  // F(low) >= target, or low = lo - 1: none yet
  while (low < high) {
    const uint64_t span = static_cast<uint64_t>(high - low);
    uint32_t pivot[kPivots];
#pragma unroll
    for (int q = 0; q < kPivots; ++q) {
      uint64_t step = (static_cast<uint64_t>(q) + 1) * span / kPivots;
      pivot[q] = static_cast<uint32_t>(low + static_cast<int64_t>(step == 0 ? 1 : step));
    }
    Acc acc[kPivots] = {};
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      uint32_t key;
      Acc w;
      element(i, key, w);
      if (w == Acc(0)) continue;
#pragma unroll
      for (int q = 0; q < kPivots; ++q) acc[q] += key >= pivot[q] ? w : Acc(0);
    }
    double f[kPivots];
    block_sums(acc, f, scratch);
    int best = -1;
#pragma unroll
    for (int q = 0; q < kPivots; ++q) {
      if (lump != 0.0 && pivot[q] <= lump_key) f[q] += lump;
      if (f[q] >= target) best = q;  // F falls with q: the qualifying pivots are a prefix
    }
    if (best < 0) {
      high = static_cast<int64_t>(pivot[0]) - 1;
    } else {
      low = pivot[best];
      if (best + 1 < kPivots) high = static_cast<int64_t>(pivot[best + 1]) - 1;
    }
  }
  if (low < static_cast<int64_t>(lo)) return false;
  result = static_cast<uint32_t>(low);
  return true;
}

__device__ __forceinline__ uint64_t to_fixed(float p) { return __double2ull_rn(static_cast<double>(p) * kFixedOne); }

// The sampler: the same decisions as Sampler::probabilities (ops/ref/sampling.cc spells them out
// with a sort), then the inverse CDF at u.
__global__ void __launch_bounds__(kSampleThreads)
    sample_kernel(const float* logits, int64_t stride, int64_t vocab, const uint32_t* mask, int64_t words, SampleArgs a, int32_t* ids) {
  __shared__ double scratch[kSampleWarps * kPivots];
  __shared__ float fscratch[32];
  __shared__ uint64_t uscratch[kSampleWarps];
  const MaskedRow row = masked_row(logits, stride, mask, words, blockIdx.x);
  const float t = a.temperature;
  const bool plain = a.top_k == 0 && a.top_p >= 1.0f && a.min_p <= 0.0f;  // softmax over every id, as the host's fast path

  // Scaled logit, its key and its weight. Plain: exp((l - max) / t); filtered: exp(l / t - max).
  const float max_in = [&] {
    float m = -INFINITY;
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      float c = row[i];
      if (!plain) c = __fdiv_rn(c, t);
      m = fmaxf(m, c);
    }
    m = block_max(m, fscratch);
    return m == 0.0f ? 0.0f : m;  // -0 folded into +0, as scaled() folds the elements
  }();
  if (max_in == -INFINITY) {  // no finite logit: the argmax, 0
    if (threadIdx.x == 0) ids[blockIdx.x] = 0;
    return;
  }
  auto scaled = [&](int64_t i) {
    float c = __fdiv_rn(row[i], t);
    return c == 0.0f ? 0.0f : c;  // -0 ties with +0, as in the host's comparisons
  };
  auto weight = [&](int64_t i) {  // unnormalised
    return plain ? expf(__fdiv_rn(row[i] - max_in, t)) : expf(scaled(i) - max_in);
  };

  const bool top_k = !plain && a.top_k > 0 && a.top_k < vocab;
  uint32_t k_key = 0;  // top-k keeps keys > k_key and the first k_ties ids at k_key (no key is 0)
  if (top_k)
    search_largest<float>(
        vocab, 0u, order_key(max_in), static_cast<double>(a.top_k), 0.0, 0u,
        [&](int64_t i, uint32_t& key, float& w) {
          key = order_key(scaled(i));
          w = 1.0f;
        },
        scratch, k_key);
  // Sum of the kept weights (the host's total), and how many ids lie above the top-k key.
  double sums[2];
  {
    double part[2] = {0.0, 0.0};
    for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
      if (plain) {
        part[0] += weight(i);
      } else if (order_key(scaled(i)) > k_key) {
        part[0] += expf(scaled(i) - max_in);
        part[1] += 1.0;
      }
    }
    block_sums(part, sums, scratch);
  }
  const float k_value = key_value(k_key);
  const double k_ties = top_k ? static_cast<double>(a.top_k) - sums[1] : 0.0;
  const float k_weight = top_k ? expf(k_value - max_in) : 0.0f;
  const double total = sums[0] + k_ties * static_cast<double>(k_weight);
  const double inv = 1.0 / total;
  auto prob = [&](float e) { return static_cast<float>(static_cast<double>(e) * inv); };
  const float min_p = a.min_p > 0.0f ? a.min_p * prob(1.0f) : 0.0f;  // relative to the top id (weight 1)

  // The cut: keys > cut_key, and the first cut_ties ids at cut_key (all of them when infinite).
  uint32_t cut_key = k_key;
  double cut_ties = top_k ? k_ties : INFINITY;
  if (!plain && a.top_p < 1.0f) {
    // The smallest prefix whose mass reaches top_p: its last id has the largest key x with
    // mass(keys >= x) >= top_p. Ids tied at k_key count as one lump of k_ties.
    const float k_prob = prob(k_weight);
    const double lump = top_k && k_prob >= min_p ? k_ties * static_cast<double>(k_prob) : 0.0;
    auto mass = [&](int64_t i, uint32_t& key, double& w) {
      const float c = scaled(i);
      key = order_key(c);
      const float p = prob(expf(c - max_in));
      w = key > k_key && p >= min_p ? static_cast<double>(p) : 0.0;
    };
    uint32_t p_key = 0;
    if (search_largest<double>(vocab, k_key, order_key(max_in), static_cast<double>(a.top_p), lump, k_key, mass, scratch, p_key)) {
      double above = 0.0;  // mass of the kept ids above p_key
      for (int64_t i = threadIdx.x; i < vocab; i += blockDim.x) {
        uint32_t key;
        double w;
        mass(i, key, w);
        if (key > p_key) above += w;
      }
      above = block_sum_d(above, scratch);
      const float p_tie = prob(expf(key_value(p_key) - max_in));
      // The r-th tie (from 0) is kept while the mass before it, above + r * p_tie, is short of top_p.
      double ties = p_tie > 0.0f ? ceil((static_cast<double>(a.top_p) - above) / static_cast<double>(p_tie)) : INFINITY;
      ties = fmax(ties, 1.0);
      if (top_k && p_key == k_key) ties = fmin(ties, k_ties);
      cut_key = p_key;
      cut_ties = ties;
    }
  }

  // Inverse CDF in ascending id order: thread j owns the ids [j * chunk, (j + 1) * chunk).
  const int64_t chunk = (vocab + blockDim.x - 1) / blockDim.x;
  const int64_t begin = min(vocab, static_cast<int64_t>(threadIdx.x) * chunk), end = min(vocab, begin + chunk);
  uint64_t tie_base = 0, unused = 0;
  const bool limited_ties = !plain && cut_ties < static_cast<double>(vocab);
  if (limited_ties) {  // rank of this chunk's first tie among the ids at cut_key
    uint64_t n = 0;
    for (int64_t i = begin; i < end; ++i) n += order_key(scaled(i)) == cut_key;
    tie_base = block_exclusive_scan(n, uscratch, unused);
  }
  auto fixed_weight = [&](int64_t i, uint64_t& tie_rank) -> uint64_t {
    if (plain) return to_fixed(prob(weight(i)));
    const float c = scaled(i);
    const uint32_t key = order_key(c);
    if (key < cut_key) return 0;
    if (key == cut_key && static_cast<double>(tie_rank++) >= cut_ties) return 0;
    const float p = prob(expf(c - max_in));
    return p >= min_p ? to_fixed(p) : 0;
  };
  uint64_t mine = 0;
  {
    uint64_t rank = tie_base;
    for (int64_t i = begin; i < end; ++i) mine += fixed_weight(i, rank);
  }
  uint64_t all = 0;
  const uint64_t base = block_exclusive_scan(mine, uscratch, all);
  if (all == 0) {
    if (threadIdx.x == 0) ids[blockIdx.x] = 0;
    return;
  }
  uint64_t target = static_cast<uint64_t>(a.u[blockIdx.x] * static_cast<double>(all));
  if (target >= all) target = all - 1;
  if (target < base || target >= base + mine) return;  // exactly one thread holds the target
  uint64_t rank = tie_base, acc = base;
  for (int64_t i = begin; i < end; ++i) {
    acc += fixed_weight(i, rank);
    if (target < acc) {
      ids[blockIdx.x] = static_cast<int32_t>(i);
      return;
    }
  }
}

__global__ void feed_pick_kernel(const int32_t* __restrict__ picked, int32_t* __restrict__ step) {
  step[0] = picked[0];
  step[1] += 1;
}

}  // namespace

void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed) {
  const auto r = rows_of<const float>(logits, "argmax_rows");
  check(r.rows <= 65535, ErrorKind::unsupported, "[argmax_rows] cuda takes at most 65535 rows per call");
  unsigned long long* best = argmax_scratch(r.rows);
  const dim3 grid(static_cast<unsigned>((r.cols + kArgmaxSlice - 1) / kArgmaxSlice), static_cast<unsigned>(r.rows));
  const uint32_t* mask = allowed ? allowed.data<const uint32_t>() : nullptr;
  const int64_t words = allowed ? allowed.dim(1) : 0;
  argmax_kernel<<<grid, kArgmaxThreads, 0, stream()>>>(r.data, r.stride, r.cols, mask, words, best);
  check_launch("argmax_rows");
  argmax_unpack_kernel<<<blocks_for(r.rows, 128), 128, 0, stream()>>>(best, r.rows, ids.data<int32_t>());
  check_launch("argmax_rows");
}

void sample_rows(const Tensor& logits, const RowSampling& s, std::span<const double> uniforms, Tensor& ids, const Tensor& allowed) {
  const auto r = rows_of<const float>(logits, "sample_rows");
  SampleArgs a;
  a.temperature = s.temperature;
  a.top_p = s.top_p;
  a.min_p = s.min_p;
  a.top_k = s.top_k;
  for (size_t i = 0; i < uniforms.size(); ++i) a.u[i] = uniforms[i];
  const uint32_t* mask = allowed ? allowed.data<const uint32_t>() : nullptr;
  const int64_t words = allowed ? allowed.dim(1) : 0;
  sample_kernel<<<static_cast<unsigned>(r.rows), kSampleThreads, 0, stream()>>>(r.data, r.stride, r.cols, mask, words, a,
                                                                                ids.data<int32_t>());
  check_launch("sample_rows");
}

void feed_pick(const Tensor& picked, Tensor& step) {
  feed_pick_kernel<<<1, 1, 0, stream()>>>(picked.data<int32_t>(), step.data<int32_t>());
  check_launch("feed_pick");
}

}  // namespace sanctum::ops::cuda
