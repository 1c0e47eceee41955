#pragma once
// moe_route's arithmetic (ops/moe.h) as warp-level device code, shared by the routing kernel and the
// expert gate/up launch that routes its own tokens (matvec_tiles.cuh), so that both choose the same
// experts and give the same weights, bit for bit, as route_token.
//
// One warp per token: lane l holds logits l, l + 32, .. (PL of them; experts past E read as 0 and
// are never chosen).
#include <cstdint>

namespace sanctum::ops::cuda {

// Logits per lane where the routing runs inside another launch: up to 256 experts.
constexpr int kRoutedLogitsPerLane = 8;

namespace route {

template <int PL>
__device__ __forceinline__ void load_logits(const float* l, int E, float (&v)[PL]) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int i = 0; i < PL; ++i) v[i] = lane + 32 * i < E ? l[lane + 32 * i] : 0.0f;
}

// An unsigned key in the order of the floats (-0 as +0, since they compare equal); NaN ranks below
// every number and 0 is left for "not a candidate".
__device__ __forceinline__ uint32_t order_key(float v) {
  const uint32_t b = __float_as_uint(v + 0.0f);
  if (v != v) return 1u;
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// The first `rounds` choices by repeated arg-max, ties to the lower id: lane r < rounds receives the
// r-th id and its logit. Returns the largest logit, in every lane. Per round, each lane's best
// candidate, then the warp's largest key and the lowest id holding it (two warp reductions).
template <int PL>
__device__ __forceinline__ float top_k(const float (&v)[PL], int E, int rounds, int32_t& my_id, float& my_logit) {
  const int lane = threadIdx.x & 31;
  uint32_t key[PL];
#pragma unroll
  for (int i = 0; i < PL; ++i) key[i] = lane + 32 * i < E ? order_key(v[i]) : 0u;
  float top = 0.0f;
  for (int r = 0; r < rounds; ++r) {
    uint32_t best = 0u, best_id = 0xFFFFFFFFu;
    float best_v = 0.0f;
#pragma unroll
    for (int i = 0; i < PL; ++i)
      if (key[i] > best) {  // strictly: a tie keeps the lower id
        best = key[i];
        best_id = static_cast<uint32_t>(lane + 32 * i);
        best_v = v[i];
      }
    const uint32_t most = __reduce_max_sync(0xFFFFFFFFu, best);
    const uint32_t win = __reduce_min_sync(0xFFFFFFFFu, best == most ? best_id : 0xFFFFFFFFu);
    const float win_v = __shfl_sync(0xFFFFFFFFu, best_v, static_cast<int>(win & 31u));
#pragma unroll
    for (int i = 0; i < PL; ++i)
      if (win == static_cast<uint32_t>(lane + 32 * i)) key[i] = 0u;
    if (r == 0) top = win_v;
    if (lane == r) {
      my_id = static_cast<int32_t>(win);
      my_logit = win_v;
    }
  }
  return top;
}

// The weight of lane r's choice (r < k; my_logit its logit, top the largest) exactly as route_token
// computes it: softmax sums in double, the k weights renormalised in rank order.
template <int PL>
__device__ __forceinline__ float weight(const float (&v)[PL], int E, int k, float top, float my_logit, bool softmax_first, bool normalize) {
  const int lane = threadIdx.x & 31;
  const double mine = exp(static_cast<double>(my_logit - top));
  double w = 0.0;
  if (softmax_first) {
    double total = 0.0;
#pragma unroll
    for (int i = 0; i < PL; ++i)
      if (lane + 32 * i < E) total += exp(static_cast<double>(v[i] - top));
    for (int o = 16; o > 0; o >>= 1) total += __shfl_xor_sync(0xFFFFFFFFu, total, o);
    const float wf = static_cast<float>(mine / total);
    w = wf;
    if (normalize) {
      double kept = 0.0;  // in rank order, as the host adds them
      for (int r = 0; r < k; ++r) kept += __shfl_sync(0xFFFFFFFFu, static_cast<double>(wf), r);
      w = static_cast<float>(static_cast<double>(wf) / kept);
    }
  } else {
    double sum = 0.0;
    for (int r = 0; r < k; ++r) sum += __shfl_sync(0xFFFFFFFFu, mine, r);
    w = static_cast<float>(mine / sum);
  }
  return static_cast<float>(w);
}

// One token's whole routing, as moe_route writes it: lane r < k receives the r-th id and its weight.
template <int PL>
__device__ __forceinline__ void choose(const float* logits, int E, int k, bool softmax_first, bool normalize, int32_t& id, float& w) {
  float v[PL];
  load_logits(logits, E, v);
  float my_logit = 0.0f;
  const float top = top_k(v, E, k, id, my_logit);
  w = weight(v, E, k, top, my_logit, softmax_first, normalize);
}

}  // namespace route
}  // namespace sanctum::ops::cuda
