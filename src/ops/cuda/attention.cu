// Causal GQA attention over the KV cache, flash-style: a block takes 16 queries of one head (two per
// warp) and walks the keys in tiles of 32 staged in shared memory, keeping a running max, sum and
// output per query (online softmax), so nothing of size n × n_kv is ever stored. K/V of the query
// head's KV head are read in place, in the cache's elements (f32, bf16, q8 or q4 values; as f32 once
// staged).
// When few blocks would run, the keys are also split across blocks (split-K) and a second kernel
// merges the partial results. This kernel is the exact-mode prefill and the fast mode's for 9 to 63
// queries; attention() sends decode and fast-mode long prefill to attention_paths.cuh.
#include <algorithm>
#include <vector>

#include "base/tuning.h"
#include "ops/cuda/attention_paths.cuh"
#include "ops/cuda/blas.cuh"
#include "ops/cuda/common.cuh"
#include "ops/cuda/convert.cuh"
#include "ops/cuda/kernels.h"
#include "ops/cuda/kv_access.cuh"
#include "ops/precision.h"

namespace sanctum::ops::cuda {

namespace {

constexpr int kWarps = 8, kQueriesPerWarp = 2, kQueries = kWarps * kQueriesPerWarp, kKeyTile = 32;

struct AttnArgs {
  const float* q;
  int64_t q_s0, q_s1;
  KvSide k, v;  // read as the template's KvElems
  float* out;
  int64_t o_s0, o_s1;
  int64_t n, q_pos0, n_heads;
  const int32_t* q_pos0_device;  // overrides q_pos0 when set
  int groups, d;
  float scale;
  int64_t keys_per_split;
  int splits;
  float* part;  // (n, heads, splits, d + 2): acc..., max, sum
};

// PL = values of the head per lane (head_dim <= 32 * PL); K and V = the cache's elements, converted to
// f32 as a key tile is staged.
template <int PL, KvElem K, KvElem V>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttnArgs a) {
  extern __shared__ float smem[];
  const int D = a.d, DP = 32 * PL;
  float* ks = smem;                      // kKeyTile × (DP + 1), padded against bank conflicts
  float* vs = ks + kKeyTile * (DP + 1);  // kKeyTile × DP
  float* qs = vs + kKeyTile * DP;        // kQueries × DP
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t h = blockIdx.y, kvh = h / a.groups, split = blockIdx.z, q0 = static_cast<int64_t>(blockIdx.x) * kQueries;
  const int64_t q_last = (q0 + kQueries < a.n ? q0 + kQueries : a.n) - 1;

  for (int i = threadIdx.x; i < kQueries * DP; i += blockDim.x) {
    const int qi = i / DP, c = i % DP;
    const int64_t t = q0 + qi;
    qs[i] = (t < a.n && c < D) ? a.q[t * a.q_s0 + h * a.q_s1 + c] * a.scale : 0.0f;
  }
  const int64_t q_pos0 = a.q_pos0_device != nullptr ? *a.q_pos0_device : a.q_pos0;
  const int64_t key_begin = split * a.keys_per_split;
  const int64_t key_end = key_begin + a.keys_per_split < q_pos0 + q_last + 1 ? key_begin + a.keys_per_split : q_pos0 + q_last + 1;

  float m[kQueriesPerWarp], l[kQueriesPerWarp], acc[kQueriesPerWarp][PL];
#pragma unroll
  for (int qi = 0; qi < kQueriesPerWarp; ++qi) {
    m[qi] = -INFINITY;
    l[qi] = 0.0f;
#pragma unroll
    for (int p = 0; p < PL; ++p) acc[qi][p] = 0.0f;
  }
  for (int64_t t0 = key_begin; t0 < key_end; t0 += kKeyTile) {
    __syncthreads();
    for (int i = threadIdx.x; i < kKeyTile * DP; i += blockDim.x) {
      const int j = i / DP, c = i % DP;
      const int64_t t = t0 + j;
      const bool ok = t < key_end && c < D;
      ks[j * (DP + 1) + c] = ok ? kv_value<K>(a.k, t, kvh, c) : 0.0f;
      vs[j * DP + c] = ok ? kv_value<V>(a.v, t, kvh, c) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int qi = 0; qi < kQueriesPerWarp; ++qi) {
      const int local = warp * kQueriesPerWarp + qi;
      const int64_t i = q0 + local;
      if (i >= a.n) continue;
      const int64_t pos = q_pos0 + i, key = t0 + lane;
      float s = -INFINITY;
      if (key < key_end && key <= pos) {
        const float* kr = ks + lane * (DP + 1);
        const float* qr = qs + local * DP;
        float dot = 0.0f;
        for (int c = 0; c < D; ++c) dot += qr[c] * kr[c];
        s = dot;
      }
      const float tile_max = warp_max(s);
      if (tile_max == -INFINITY) continue;  // every key of this tile is masked for this query
      const float new_m = fmaxf(m[qi], tile_max);
      const float p = s == -INFINITY ? 0.0f : expf(s - new_m);
      const float corr = m[qi] == -INFINITY ? 0.0f : expf(m[qi] - new_m);
      l[qi] = l[qi] * corr + warp_sum(p);
#pragma unroll
      for (int pp = 0; pp < PL; ++pp) acc[qi][pp] *= corr;
      for (int j = 0; j < kKeyTile; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
        if (pj == 0.0f) continue;  // warp-uniform
        const float* vr = vs + j * DP;
#pragma unroll
        for (int pp = 0; pp < PL; ++pp) acc[qi][pp] += pj * vr[lane + 32 * pp];
      }
      m[qi] = new_m;
    }
  }
#pragma unroll
  for (int qi = 0; qi < kQueriesPerWarp; ++qi) {
    const int64_t i = q0 + warp * kQueriesPerWarp + qi;
    if (i >= a.n) continue;
    if (a.splits == 1) {
      const float inv = 1.0f / l[qi];
      float* o = a.out + i * a.o_s0 + h * a.o_s1;
#pragma unroll
      for (int pp = 0; pp < PL; ++pp)
        if (lane + 32 * pp < D) o[lane + 32 * pp] = acc[qi][pp] * inv;
    } else {
      float* part = a.part + ((i * a.n_heads + h) * a.splits + split) * (D + 2);
#pragma unroll
      for (int pp = 0; pp < PL; ++pp)
        if (lane + 32 * pp < D) part[lane + 32 * pp] = acc[qi][pp];
      if (lane == 0) {
        part[D] = m[qi];
        part[D + 1] = l[qi];
      }
    }
  }
}

// Merges the splits of one (query, head): block of 32..256 threads over d.
__global__ void attention_combine(AttnArgs a) {
  const int64_t i = blockIdx.x, h = blockIdx.y;
  const int D = a.d;
  const float* part = a.part + (i * a.n_heads + h) * a.splits * (D + 2);
  float M = -INFINITY;
  for (int s = 0; s < a.splits; ++s) M = fmaxf(M, part[s * (D + 2) + D]);
  float L = 0.0f;
  for (int s = 0; s < a.splits; ++s) {
    const float ms = part[s * (D + 2) + D];
    if (ms != -INFINITY) L += part[s * (D + 2) + D + 1] * expf(ms - M);
  }
  float* o = a.out + i * a.o_s0 + h * a.o_s1;
  for (int c = threadIdx.x; c < D; c += blockDim.x) {
    float v = 0.0f;
    for (int s = 0; s < a.splits; ++s) {
      const float ms = part[s * (D + 2) + D];
      if (ms != -INFINITY) v += part[s * (D + 2) + c] * expf(ms - M);
    }
    o[c] = v / L;
  }
}

template <int PL, KvElem K, KvElem V>
void launch(const AttnArgs& a, dim3 grid) {
  const size_t smem = (static_cast<size_t>(kKeyTile) * (32 * PL + 1) + kKeyTile * 32 * PL + kQueries * 32 * PL) * sizeof(float);
  static bool configured = false;
  if (!configured) {
    check_cuda(cudaFuncSetAttribute(attention_kernel<PL, K, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem)),
               "attention smem");
    configured = true;
  }
  attention_kernel<PL, K, V><<<grid, kWarps * 32, smem, stream()>>>(a);
}

template <KvElem K, KvElem V>
void launch_lanes(const AttnArgs& a, dim3 grid) {
  const int pl = (a.d + 31) / 32;
  if (pl <= 1) launch<1, K, V>(a, grid);
  else if (pl <= 2) launch<2, K, V>(a, grid);
  else if (pl <= 4) launch<4, K, V>(a, grid);
  else launch<8, K, V>(a, grid);
}

Tensor& partial_scratch() {
  static Tensor t;
  return t;
}

}  // namespace

// Fast-mode prefill at or above this many queries goes to the tensor cores (the bf16 flash kernel, or
// cuBLAS for other head dims); below it the 64-query tiles are mostly empty.
constexpr int64_t kGemmMinQueries = 64;

namespace {
// bf16 out from the paths that write f32 only: their f32 result, rounded once.
Tensor& f32_out_scratch() {
  static Tensor t;
  return t;
}
bool bf16_out_enabled() { return current_tuning().on(Knob::attention_bf16_out); }
}  // namespace

bool attention_gives_bf16(int64_t queries, int64_t head_dim) {
  return bf16_out_enabled() && matmul_precision() != MatmulPrecision::f32 && queries >= kGemmMinQueries && head_dim == 128 &&
         attention_flash_wgmma_present();
}

bool attention_takes_gate(int64_t queries) {
  return current_tuning().on(Knob::fuse_attention_gate) && queries <= kDecodeMaxQueries && matmul_precision() != MatmulPrecision::f32;
}

void attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t q_pos0, const int32_t* device_q_pos0, float scale, Tensor& out,
               const Tensor* gate) {
  attention_kv(q, KvRows{k, Tensor{}, KvFormat::f32, k.dim(2)}, KvRows{v, Tensor{}, KvFormat::f32, v.dim(2)}, q_pos0, device_q_pos0, scale,
               out, gate);
}

namespace {

void check_cache_pair(const Tensor& q, const KvRows& k, const KvRows& v) {
  check(q.dim(2) <= 256, ErrorKind::unsupported, "[attention] cuda supports head_dim up to 256, got " + std::to_string(q.dim(2)));
  check((k.format == v.format && k.format != KvFormat::q4) || (k.format == KvFormat::q8 && v.format == KvFormat::q4),
        ErrorKind::unsupported,
        "[attention] cuda reads the caches --kv-cache-dtype makes (keys and values both f32, bf16 or q8, or q8 keys with q4 values); "
        "make the cache with ops::key_format and ops::value_format of one dtype");
}

// Exact mode keeps every query on the flash kernel without key splits, so a query's bits do not
// depend on how many queries share its forward (prefill k + decode == full prefill, bitwise).
bool exact_mode() { return matmul_precision() == MatmulPrecision::f32; }

// The view of a call with a gate, which only the decode kernel takes.
AttnView gated_view(AttnView view, const Tensor& gate, const Tensor& out) {
  check(attention_takes_gate(view.n) && out.dtype() == DType::f32, ErrorKind::internal, "[attention] a gate where the kernels take none");
  view.gate = gate.data<float>();
  view.g_s0 = gate.stride(0);
  view.g_s1 = gate.stride(1);
  return view;
}

}  // namespace

void attention_kv_batch(std::span<const AttentionCall> calls, float scale) {
  std::vector<AttnView> decode;
  for (const AttentionCall& c : calls) {
    check_cache_pair(*c.q, *c.k, *c.v);
    if (c.q->dim(0) == 0) continue;
    const AttnView view = attn_view(*c.q, *c.k, *c.v, c.q_pos0, c.q_pos0_device, scale, *c.out);
    if (c.gate != nullptr) decode.push_back(gated_view(view, *c.gate, *c.out));
    else if (c.out->dtype() == DType::f32 && view.n <= kDecodeMaxQueries && !exact_mode()) decode.push_back(view);
    else attention_kv(*c.q, *c.k, *c.v, c.q_pos0, c.q_pos0_device, scale, *c.out);  // the paths attention_kv picks below
  }
  if (!decode.empty()) attention_decode_batch(decode);
}

void attention_kv(const Tensor& q, const KvRows& k, const KvRows& v, int64_t q_pos0, const int32_t* device_q_pos0, float scale, Tensor& out,
                  const Tensor* gate) {
  check_cache_pair(q, k, v);
  if (q.dim(0) == 0) return;
  AttnView view = attn_view(q, k, v, q_pos0, device_q_pos0, scale, out);
  if (gate != nullptr) return attention_decode(gated_view(view, *gate, out));  // the decode kernel's paths below write it gated
  const bool exact = exact_mode();
  const bool tensor_core_prefill = view.n >= kGemmMinQueries && !exact && device_q_pos0 == nullptr;
  if (out.dtype() == DType::bf16) {
    if (tensor_core_prefill && attention_flash_wgmma_ok(view)) return attention_flash_wgmma(view);
    const int64_t values = out.numel();
    Tensor f32 = Tensor::view_of(scratch_bytes(f32_out_scratch(), static_cast<size_t>(values) * 4), {out.dim(0), out.dim(1), out.dim(2)},
                                 DType::f32, nullptr, Device::cuda);
    attention_kv(q, k, v, q_pos0, device_q_pos0, scale, f32);
    return rows_to_bf16(f32.data<float>(), out.dim(2), values / out.dim(2), out.dim(2), static_cast<__nv_bfloat16*>(out.raw()));
  }
  if (view.n <= kDecodeMaxQueries && !exact) return attention_decode(view);
  if (tensor_core_prefill) {
    if (attention_flash_wgmma_ok(view)) return attention_flash_wgmma(view);
    return attention_flash_bf16_ok(view) ? attention_flash_bf16(view) : attention_gemm(view);
  }
  AttnArgs a{};
  a.n = view.n;
  a.n_heads = view.heads;
  a.d = view.d;
  a.groups = static_cast<int>(view.heads / view.kv_heads);
  a.q = view.q;
  a.q_s0 = view.q_s0;
  a.q_s1 = view.q_s1;
  a.k = view.k;
  a.v = view.v;
  a.out = view.out;
  a.o_s0 = view.o_s0;
  a.o_s1 = view.o_s1;
  a.q_pos0 = q_pos0;
  a.q_pos0_device = device_q_pos0;
  a.scale = scale;
  // With the position on the device, the host only knows the keys are within k's rows.
  const int64_t keys = device_q_pos0 != nullptr ? view.key_rows : q_pos0 + a.n;
  const int64_t q_blocks = (a.n + kQueries - 1) / kQueries;
  // Split the keys when the (query block, head) grid alone would leave most multiprocessors idle.
  int64_t splits = 1;
  if (!exact && device_q_pos0 == nullptr && q_blocks * a.n_heads < 132 && keys > 2 * kKeyTile * 4)
    splits = std::min<int64_t>({(keys + 4 * kKeyTile - 1) / (4 * kKeyTile), (264 + q_blocks * a.n_heads - 1) / (q_blocks * a.n_heads), 64});
  a.keys_per_split = (keys + splits - 1) / splits;
  a.keys_per_split = (a.keys_per_split + kKeyTile - 1) / kKeyTile * kKeyTile;
  splits = (keys + a.keys_per_split - 1) / a.keys_per_split;
  a.splits = static_cast<int>(splits);
  if (splits > 1) {
    Tensor& part = partial_scratch();
    const int64_t need = a.n * a.n_heads * splits * (a.d + 2);
    if (!part || part.numel() < need) part = Tensor::zeros({need}, DType::f32, Device::cuda);
    a.part = part.data<float>();
  }
  const dim3 grid(static_cast<unsigned>(q_blocks), static_cast<unsigned>(a.n_heads), static_cast<unsigned>(splits));
  switch (view.k_elem) {
    case KvElem::f32: launch_lanes<KvElem::f32, KvElem::f32>(a, grid); break;
    case KvElem::bf16: launch_lanes<KvElem::bf16, KvElem::bf16>(a, grid); break;
    case KvElem::q8:
      if (view.v_elem == KvElem::q4) launch_lanes<KvElem::q8, KvElem::q4>(a, grid);
      else launch_lanes<KvElem::q8, KvElem::q8>(a, grid);
      break;
    case KvElem::q4: break;  // keys are never q4 (checked above)
  }
  check_launch("attention");
  if (splits > 1) {
    attention_combine<<<dim3(static_cast<unsigned>(a.n), static_cast<unsigned>(a.n_heads)), 128, 0, stream()>>>(a);
    check_launch("attention combine");
  }
}

}  // namespace sanctum::ops::cuda
