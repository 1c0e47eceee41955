// Causal GQA attention of a few queries over a KV cache in any stored format, the heads of a kv group
// together: each key and value row is read (and widened or dequantized) once for all of them, and
// the scores of a block of keys come out of one lane tree (TreeSums) rather than one per score.
// Every score, probability and output element has exactly the bits a head computed alone gets (the
// f32 cache's AttentionDot order, the stored formats' KeyDot order, each value element's chain of
// one multiply-add per row), which are also the bits of a bf16 prefill's transposed blocks
// (attention_kv.cc). Tasks are (query, kv group); a long row may be split into key ranges and column
// ranges (attention_batch.cc) without changing a bit.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/attention_decode.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/contrib/math/math-inl.h"
#include "hwy/highway.h"
#include "ops/cpu/attention_common-inl.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"
#include "ops/cpu/attention_decode.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using DF = hn::ScalableTag<float>;
using VF = hn::Vec<DF>;

constexpr size_t kLanes = hn::MaxLanes(DF());
constexpr int64_t kBlocks = kKvBlock;  // values per quantization block
constexpr bool kTree = kTreeSums<DF>;
// Keys per block of scores: a vector's worth where the lane tree runs, else one.
constexpr int64_t kKeys = kTree ? static_cast<int64_t>(kLanes) : 1;

int64_t Lanes() { return static_cast<int64_t>(hn::Lanes(DF())); }

// Rows are asked for this far ahead of their use: a long decode row streams its kv head's keys and
// values from memory with little work per byte, and asking ahead took about a tenth off a 4k-token
// decode over a cache larger than the processor's caches.
constexpr int64_t kPrefetchRows = 32;

HWY_INLINE void PrefetchBytes(const void* p, int64_t bytes) {
  for (int64_t b = 0; b < bytes; b += 64) hwy::Prefetch(static_cast<const char*>(p) + b);
}

// Keys [j, j + m) of one kv head (of n) as f32 rows of head_dim (widened; codes for q8, their block
// scales beside them), or pointers into the f32 cache; rows[m, kKeys) point at zeros.
template <KvFormat F>
HWY_INLINE void LoadKeyBlock(const RowsView& k, int64_t j, int64_t m, int64_t n, int64_t d, DecodeScratch& s, const float** rows) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  constexpr int64_t kBytes = F == KvFormat::f32 ? 4 : F == KvFormat::bf16 ? 2 : 1;
  const auto prefetch = [&](int64_t r) {
    if (j + r + kPrefetchRows < n)
      PrefetchBytes(static_cast<const char*>(k.data) + (j + r + kPrefetchRows) * k.stride * kBytes, d * kBytes);
  };
  if constexpr (F == KvFormat::f32) {
    for (int64_t r = 0; r < m; ++r) {
      prefetch(r);
      rows[r] = static_cast<const float*>(k.data) + (j + r) * k.stride;
    }
  } else if constexpr (F == KvFormat::bf16) {
    const hn::Rebind<hwy::bfloat16_t, DF> dbf;
    for (int64_t r = 0; r < m; ++r) {
      prefetch(r);
      const auto* src = static_cast<const hwy::bfloat16_t*>(k.data) + (j + r) * k.stride;
      float* dst = s.keys.data() + r * d;
      int64_t c = 0;
      for (; c + N <= d; c += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dbf, src + c)), df, dst + c);
      for (; c < d; ++c) dst[c] = bf16_to_f32(reinterpret_cast<const uint16_t*>(src)[c]);
      rows[r] = dst;
    }
  } else {
    static_assert(F == KvFormat::q8, "keys are f32, bf16 or q8");
    const hn::Rebind<int8_t, DF> di8;
    const hn::Rebind<int32_t, DF> di32;
    const int64_t blocks = (d + kBlocks - 1) / kBlocks;
    for (int64_t r = 0; r < m; ++r) {
      prefetch(r);
      const int8_t* src = static_cast<const int8_t*>(k.data) + (j + r) * k.stride;
      const uint16_t* sc = k.scales + (j + r) * k.scale_stride;
      float* dst = s.keys.data() + r * d;
      int64_t c = 0;
      for (; c + N <= d; c += N) hn::StoreU(hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, src + c))), df, dst + c);
      for (; c < d; ++c) dst[c] = static_cast<float>(src[c]);
      for (int64_t b = 0; b < blocks; ++b) s.key_scales[static_cast<size_t>(r * blocks + b)] = bf16_to_f32(sc[b]);
      rows[r] = dst;
    }
    for (int64_t i = m * blocks; i < kKeys * blocks; ++i) s.key_scales[static_cast<size_t>(i)] = 0.0f;
  }
  for (int64_t r = m; r < kKeys; ++r) rows[r] = s.zeros.data();  // a short block: the rest read zeros
}

// The vector part of q · k (the accumulator whose lanes KeyDot or AttentionDot sum) of M keys at
// once, one multiply-add per key for each vector of q so that M chains are in flight, each with
// exactly its one-key order: bf16 one accumulator; q8 per block q times the codes, times the block's
// scale; f32 two accumulators taking alternate vectors, added. Key m's goes to acc[slots[m]].
template <KvFormat F, int M>
HWY_INLINE void KeyAccumulators(const float* HWY_RESTRICT q, const float* const* rows, const float* HWY_RESTRICT key_scales, int64_t d,
                                const size_t* slots, VF* HWY_RESTRICT acc) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF a[M];
  for (int m = 0; m < M; ++m) a[m] = hn::Zero(df);
  if constexpr (F == KvFormat::f32) {
    VF b[M];
    for (int m = 0; m < M; ++m) b[m] = hn::Zero(df);
    int64_t c = 0;
    for (; c + 2 * N <= d; c += 2 * N) {
      const VF q0 = hn::LoadU(df, q + c), q1 = hn::LoadU(df, q + c + N);
      for (int m = 0; m < M; ++m) {
        a[m] = hn::MulAdd(q0, hn::LoadU(df, rows[m] + c), a[m]);
        b[m] = hn::MulAdd(q1, hn::LoadU(df, rows[m] + c + N), b[m]);
      }
    }
    if (c + N <= d) {
      const VF q0 = hn::LoadU(df, q + c);
      for (int m = 0; m < M; ++m) a[m] = hn::MulAdd(q0, hn::LoadU(df, rows[m] + c), a[m]);
    }
    for (int m = 0; m < M; ++m) acc[slots[m]] = hn::Add(a[m], b[m]);
    return;
  } else if constexpr (F == KvFormat::bf16) {
    for (int64_t c = 0; c + N <= d; c += N) {
      const VF qc = hn::LoadU(df, q + c);
      for (int m = 0; m < M; ++m) a[m] = hn::MulAdd(qc, hn::LoadU(df, rows[m] + c), a[m]);
    }
  } else {
    const int64_t blocks = (d + kBlocks - 1) / kBlocks;
    for (int64_t b0 = 0, blk = 0; b0 < d; b0 += kBlocks, ++blk) {
      const int64_t end = std::min(b0 + kBlocks, d);
      for (int64_t c = b0; c + N <= end; c += N) {
        const VF qc = hn::LoadU(df, q + c);
        for (int m = 0; m < M; ++m)
          a[m] = hn::MulAdd(hn::Mul(qc, hn::LoadU(df, rows[m] + c)), hn::Set(df, key_scales[m * blocks + blk]), a[m]);
      }
    }
  }
  for (int m = 0; m < M; ++m) acc[slots[m]] = a[m];
}

// The scalar rest of q · k_r past its whole vectors: bf16 and q8 a chain of its own, added to the
// lane sum; f32 (AttentionDot) added onto the lane sum element by element.
template <KvFormat F>
HWY_INLINE float KeyTail(const float* HWY_RESTRICT q, const float* HWY_RESTRICT row, const float* HWY_RESTRICT scales, int64_t d,
                         float sum) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  if constexpr (F == KvFormat::f32) {
    for (int64_t c = d / N * N; c < d; ++c) sum += q[c] * row[c];
    return sum;
  } else if constexpr (F == KvFormat::bf16) {
    float t = 0.0f;
    for (int64_t c = d / N * N; c < d; ++c) t += q[c] * row[c];
    return sum + t;
  } else {
    float t = 0.0f;
    for (int64_t b0 = 0, blk = 0; b0 < d; b0 += kBlocks, ++blk) {
      const int64_t end = std::min(b0 + kBlocks, d);
      for (int64_t c = b0 + (end - b0) / N * N; c < end; ++c) t += q[c] * (scales[blk] * row[c]);
    }
    return sum + t;
  }
}

struct TreeSlots {
  size_t at[kKeys];
  constexpr TreeSlots() : at() {
    for (size_t m = 0; m < static_cast<size_t>(kKeys); ++m) at[m] = TreeSlot(m, static_cast<size_t>(kKeys));
  }
};
constexpr TreeSlots kSlots;

// Scores (q · k_r * scale) of the block's keys for one head, into out[0, kKeys); rows past the
// block's keys read zeros, their lanes are stored but are not scores.
template <KvFormat F>
HWY_INLINE void BlockScores(const float* HWY_RESTRICT q, const float* const* rows, const float* HWY_RESTRICT key_scales, int64_t m,
                            int64_t d, float scale, float* HWY_RESTRICT out) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), blocks = (d + kBlocks - 1) / kBlocks;
  if constexpr (kTree) {
    // up to 16 chains at once (f32 keeps two accumulators a key)
    constexpr int M = std::min<int>(static_cast<int>(kKeys), F == KvFormat::f32 ? 8 : 16);
    VF acc[kKeys];
    for (int m0 = 0; m0 < kKeys; m0 += M) KeyAccumulators<F, M>(q, rows + m0, key_scales + m0 * blocks, d, kSlots.at + m0, acc);
    VF sums = TreeSums(df, acc);
    if (d % N != 0) {  // a scalar rest: the bits of KeyTail, key by key
      HWY_ALIGN float lanes[kKeys];
      hn::Store(sums, df, lanes);
      for (int64_t r = 0; r < m; ++r) lanes[r] = KeyTail<F>(q, rows[r], key_scales + r * blocks, d, lanes[r]);
      sums = hn::Load(df, lanes);
    }
    hn::StoreU(hn::Mul(sums, hn::Set(df, scale)), df, out);
  } else {
    for (int64_t r = 0; r < m; ++r) {
      VF acc[1];
      const size_t slot = 0;
      KeyAccumulators<F, 1>(q, rows + r, key_scales + r * blocks, d, &slot, acc);
      out[r] = KeyTail<F>(q, rows[r], key_scales + r * blocks, d, LaneTreeSum(df, acc[0])) * scale;
    }
  }
}

template <KvFormat F>
void ScoresOf(const DecodeTask& t, int64_t j0, int64_t j1, float* p, int64_t p_stride, float* mx, DecodeScratch& s) {
  const DF df;
  const int64_t d = t.head_dim, R = t.group;
  const float* rows[kKeys];
  // Each head's running maximum per lane, as the one-head kernels keep it (std::max(mx, s): a NaN
  // score is never taken); the lanes' maxima are one value, whatever the order.
  float* lanes = s.max_lanes.data();
  for (int64_t r = 0; r < R * kKeys; ++r) lanes[r] = -INFINITY;
  for (int64_t j = j0; j < j1; j += kKeys) {
    const int64_t m = std::min(kKeys, j1 - j);
    LoadKeyBlock<F>(t.k, j, m, t.n_keys, d, s, rows);
    for (int64_t r = 0; r < R; ++r) {
      float* pr = p + r * p_stride + j;
      BlockScores<F>(t.q + r * t.q_stride, rows, s.key_scales.data(), m, d, t.scale, pr);
      if constexpr (kTree) {
        const VF sc = hn::LoadU(df, pr), mv = hn::LoadU(df, lanes + r * kKeys);
        hn::StoreU(hn::IfThenElse(hn::And(hn::FirstN(df, static_cast<size_t>(m)), hn::Lt(mv, sc)), sc, mv), df, lanes + r * kKeys);
      } else {
        for (int64_t i = 0; i < m; ++i) lanes[r * kKeys] = std::max(lanes[r * kKeys], pr[i]);
      }
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    float best = -INFINITY;
    for (int64_t i = 0; i < kKeys; ++i) best = std::max(best, lanes[r * kKeys + i]);
    mx[r] = best;
  }
}

// Scores of keys [j0, j1) (j0 a multiple of kKeys) for the group's heads into p (row r at
// r * p_stride), and each head's largest score in mx.
void TaskScores(const DecodeTask& t, int64_t j0, int64_t j1, float* p, int64_t p_stride, float* mx, DecodeScratch& s) {
  switch (t.k.format) {
    case KvFormat::f32: return ScoresOf<KvFormat::f32>(t, j0, j1, p, p_stride, mx, s);
    case KvFormat::bf16: return ScoresOf<KvFormat::bf16>(t, j0, j1, p, p_stride, mx, s);
    case KvFormat::q8: return ScoresOf<KvFormat::q8>(t, j0, j1, p, p_stride, mx, s);
    default: fail(ErrorKind::internal, "[attention] keys are stored f32, bf16 or q8");
  }
}

void TaskExp(const DecodeTask& t, int64_t j0, int64_t j1, float* p, int64_t p_stride, const float* mx) {
  for (int64_t r = 0; r < t.group; ++r) ExpScoresRange(p + r * p_stride, j0, j1, t.n_keys, mx[r]);
}

// Quantized value rows [j, j + len) of n, columns [c0, c1) (c0 a multiple of the block), as f32 rows of
// c1 - c0: q8 codes and q4 nibbles converted (exactly), their block scales (and q4's minimums)
// beside them, per row and block.
template <KvFormat F>
HWY_INLINE void LoadValueRun(const RowsView& v, int64_t j, int64_t len, int64_t n, int64_t c0, int64_t c1, DecodeScratch& s) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df)), w = c1 - c0, b0 = c0 / kBlocks, nb = (w + kBlocks - 1) / kBlocks;
  // the columns' bytes of a row: q8 one a value, q4 16 a block
  const int64_t offset = F == KvFormat::q8 ? c0 : b0 * 16, bytes = F == KvFormat::q8 ? w : nb * 16;
  for (int64_t t = 0; t < len; ++t) {
    if (j + t + kPrefetchRows < n) PrefetchBytes(static_cast<const uint8_t*>(v.data) + (j + t + kPrefetchRows) * v.stride + offset, bytes);
    float* dst = s.values.data() + t * w;
    if constexpr (F == KvFormat::q8) {
      const hn::Rebind<int8_t, DF> di8;
      const hn::Rebind<int32_t, DF> di32;
      const int8_t* src = static_cast<const int8_t*>(v.data) + (j + t) * v.stride + c0;
      const uint16_t* sc = v.scales + (j + t) * v.scale_stride + b0;
      int64_t c = 0;
      for (; c + N <= w; c += N) hn::StoreU(hn::ConvertTo(df, hn::PromoteTo(di32, hn::LoadU(di8, src + c))), df, dst + c);
      for (; c < w; ++c) dst[c] = static_cast<float>(src[c]);
      for (int64_t b = 0; b < nb; ++b) s.value_scales[static_cast<size_t>(t * nb + b)] = bf16_to_f32(sc[b]);
    } else {
      static_assert(F == KvFormat::q4, "f32 and bf16 values are read in place; the quantized ones are q8 or q4");
      const hn::Rebind<uint8_t, DF> du8;
      const hn::Rebind<uint32_t, DF> du32;
      const hn::Rebind<int32_t, DF> di32;
      const auto nibble = hn::Set(du32, 0xFu);
      const uint8_t* src = static_cast<const uint8_t*>(v.data) + (j + t) * v.stride + b0 * 16;
      const uint16_t* sc = v.scales + (j + t) * v.scale_stride + 2 * b0;
      for (int64_t b = 0; b < nb; ++b) {
        const uint8_t* packed = src + b * 16;  // byte i: value i low, value i + 16 high
        float* out = dst + b * kBlocks;
        const int64_t len_b = std::min(kBlocks, w - b * kBlocks);
        int64_t i = 0;
        if (len_b == kBlocks)
          for (; i + N <= 16; i += N) {
            const auto bytes = hn::PromoteTo(du32, hn::LoadU(du8, packed + i));
            hn::StoreU(hn::ConvertTo(df, hn::BitCast(di32, hn::And(bytes, nibble))), df, out + i);
            hn::StoreU(hn::ConvertTo(df, hn::BitCast(di32, hn::ShiftRight<4>(bytes))), df, out + 16 + i);
          }
        for (int64_t c = i; c < std::min<int64_t>(16, len_b); ++c) out[c] = static_cast<float>(packed[c] & 0xF);
        for (int64_t c = 16 + i; c < len_b; ++c) out[c] = static_cast<float>(packed[c - 16] >> 4);
        s.value_scales[static_cast<size_t>(t * nb + b)] = bf16_to_f32(sc[2 * b]);
        s.value_mins[static_cast<size_t>(t * nb + b)] = bf16_to_f32(sc[2 * b + 1]);
      }
    }
  }
}

// Value rows as the accumulation reads them: bf16 in place (widened in registers), f32 in place,
// the quantized formats' codes converted into f32 runs.
template <KvFormat F>
using ValueRow = std::conditional_t<F == KvFormat::bf16, hwy::bfloat16_t, float>;

// The weight of row t for head r in block b: p (f32, bf16 rows), or the product of p and the block's
// scale (q8, q4), formed before the multiply-adds with the codes.
template <KvFormat F>
HWY_INLINE float RowWeight(const float* HWY_RESTRICT p, const float* HWY_RESTRICT scales, int64_t t, int64_t nb, int64_t b) {
  if constexpr (F == KvFormat::f32 || F == KvFormat::bf16) return p[t];
  else return p[t] * scales[t * nb + b];
}

// acc[r][col + v * N + l] += w(r, t) * row_t[...] over rows t < len in order, for RC heads and NV
// vectors of columns inside one block: each element's chain exactly as the one-head kernels add it,
// with RC * NV accumulators in registers across the rows.
template <KvFormat F, int RC, int NV>
HWY_INLINE void AccumulateChunk(const float* HWY_RESTRICT p, int64_t p_stride, const ValueRow<F>* HWY_RESTRICT rows, int64_t stride,
                                const float* HWY_RESTRICT scales, int64_t nb, int64_t b, int64_t len, float* HWY_RESTRICT acc,
                                int64_t acc_stride, int64_t col) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF a[RC][NV];
  for (int r = 0; r < RC; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = hn::LoadU(df, acc + r * acc_stride + col + v * N);
  for (int64_t t = 0; t < len; ++t) {
    hwy::Prefetch(rows + std::min(t + kPrefetchRows, len - 1) * stride + col);
    VF x[NV];
    for (int v = 0; v < NV; ++v) x[v] = LoadRowF32(df, rows + t * stride + col + v * N);
    for (int r = 0; r < RC; ++r) {
      const VF w = hn::Set(df, RowWeight<F>(p + r * p_stride, scales, t, nb, b));
      for (int v = 0; v < NV; ++v) a[r][v] = hn::MulAdd(w, x[v], a[r][v]);
    }
  }
  for (int r = 0; r < RC; ++r)
    for (int v = 0; v < NV; ++v) hn::StoreU(a[r][v], df, acc + r * acc_stride + col + v * N);
}

// Vectors of columns at once, and heads at once for them: 16 accumulators. A quantized format's
// chunk stays inside one block (one scale per row), so it takes more heads.
constexpr int MaxChunkVectors(KvFormat f) {
  return f == KvFormat::f32 || f == KvFormat::bf16 ? 4 : std::max<int>(1, std::min<int>(4, static_cast<int>(kBlocks / kLanes)));
}
constexpr int MaxChunkHeads(KvFormat f) { return std::min(8, 16 / MaxChunkVectors(f)); }

template <KvFormat F, int RC>
HWY_INLINE void AccumulateVectors(const float* p, int64_t p_stride, const ValueRow<F>* rows, int64_t stride, const float* scales,
                                  int64_t nb, int64_t b, int64_t len, float* acc, int64_t acc_stride, int64_t col, int64_t nv) {
  constexpr int kNV = MaxChunkVectors(F);
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  for (; nv >= kNV; nv -= kNV, col += kNV * N)
    AccumulateChunk<F, RC, kNV>(p, p_stride, rows, stride, scales, nb, b, len, acc, acc_stride, col);
  if constexpr (kNV > 3)
    if (nv == 3) return AccumulateChunk<F, RC, 3>(p, p_stride, rows, stride, scales, nb, b, len, acc, acc_stride, col);
  if constexpr (kNV > 2)
    if (nv == 2) return AccumulateChunk<F, RC, 2>(p, p_stride, rows, stride, scales, nb, b, len, acc, acc_stride, col);
  if constexpr (kNV > 1)
    if (nv == 1) return AccumulateChunk<F, RC, 1>(p, p_stride, rows, stride, scales, nb, b, len, acc, acc_stride, col);
}

// AccumulateVectors for rc <= RC heads.
template <KvFormat F, int RC>
HWY_INLINE void AccumulateHeads(int64_t rc, const float* p, int64_t p_stride, const ValueRow<F>* rows, int64_t stride, const float* scales,
                                int64_t nb, int64_t b, int64_t len, float* acc, int64_t acc_stride, int64_t col, int64_t nv) {
  if (rc == RC) return AccumulateVectors<F, RC>(p, p_stride, rows, stride, scales, nb, b, len, acc, acc_stride, col, nv);
  if constexpr (RC > 1) AccumulateHeads<F, RC - 1>(rc, p, p_stride, rows, stride, scales, nb, b, len, acc, acc_stride, col, nv);
}

// Columns [begin, vec_end) (relative to c0) as whole vectors, then [vec_end, end) element by element,
// for every head.
template <KvFormat F>
HWY_INLINE void AccumulateColumns(int64_t R, const float* p, int64_t p_stride, const ValueRow<F>* rows, int64_t stride, const float* scales,
                                  int64_t nb, int64_t b, int64_t len, float* acc, int64_t w, int64_t begin, int64_t vec_end, int64_t end) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF())), nv = (vec_end - begin) / N;
  constexpr int kRC = MaxChunkHeads(F);
  if (nv > 0)
    for (int64_t r0 = 0; r0 < R; r0 += kRC)
      AccumulateHeads<F, kRC>(std::min<int64_t>(kRC, R - r0), p + r0 * p_stride, p_stride, rows, stride, scales, nb, b, len, acc + r0 * w,
                              w, begin, nv);
  for (int64_t r = 0; r < R; ++r)
    for (int64_t c = vec_end; c < end; ++c) {
      float x = acc[r * w + c];
      for (int64_t t = 0; t < len; ++t) x += RowWeight<F>(p + r * p_stride, scales, t, nb, b) * RowF32(rows + t * stride + c);
      acc[r * w + c] = x;
    }
}

// One run of rows into the accumulators of columns [c0, c1): whole vectors where the one-head
// kernels use them (bf16 and f32 rows: all but the row's tail; q8: each block's whole vectors; q4:
// whole blocks), element by element (multiply, then add) elsewhere.
template <KvFormat F>
void AccumulateRun(int64_t R, const float* p, int64_t p_stride, const ValueRow<F>* rows, int64_t stride, const DecodeScratch& s,
                   int64_t len, int64_t d, int64_t c0, int64_t c1, float* acc, float* bias) {
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF())), w = c1 - c0, nb = (w + kBlocks - 1) / kBlocks;
  const float* scales = s.value_scales.data();
  if constexpr (F == KvFormat::f32 || F == KvFormat::bf16) {
    const int64_t vec_end = std::clamp<int64_t>(d / N * N - c0, 0, w);
    return AccumulateColumns<F>(R, p, p_stride, rows, stride, scales, nb, 0, len, acc, w, 0, vec_end, w);
  }
  for (int64_t b = 0; b < nb; ++b) {
    const int64_t begin = b * kBlocks, end = std::min(w, begin + kBlocks);  // relative to c0
    const int64_t vec_end = F == KvFormat::q8 ? begin + (end - begin) / N * N : (end - begin == kBlocks && 16 % N == 0) ? end : begin;
    AccumulateColumns<F>(R, p, p_stride, rows, stride, scales, nb, b, len, acc, w, begin, vec_end, end);
    if constexpr (F == KvFormat::q4)  // the p * min terms, once per row and block
      for (int64_t r = 0; r < R; ++r)
        for (int64_t t = 0; t < len; ++t) bias[r * nb + b] += p[r * p_stride + t] * s.value_mins[static_cast<size_t>(t * nb + b)];
  }
}

template <KvFormat F>
void ValuesOf(const DecodeTask& t, const float* p, int64_t p_stride, int64_t c0, int64_t c1, DecodeScratch& s) {
  const int64_t d = t.head_dim, R = t.group, n = t.n_keys, w = c1 - c0, nb = (w + kBlocks - 1) / kBlocks;
  float* acc = s.acc.data();    // (R, w) running p·V
  float* bias = s.bias.data();  // (R, nb) q4: running p·min per block
  std::fill(acc, acc + R * w, 0.0f);
  std::fill(bias, bias + R * nb, 0.0f);
  constexpr bool kInPlace = F == KvFormat::f32 || F == KvFormat::bf16;
  const int64_t run = kInPlace ? n : s.run_rows(w);
  for (int64_t j = 0; j < n; j += run) {
    const int64_t len = std::min(run, n - j);
    const ValueRow<F>* rows;
    int64_t stride = w;
    if constexpr (F == KvFormat::f32 || F == KvFormat::bf16) {
      rows = static_cast<const ValueRow<F>*>(t.v.data) + j * t.v.stride + c0;
      stride = t.v.stride;
    } else {
      LoadValueRun<F>(t.v, j, len, n, c0, c1, s);
      rows = s.values.data();
    }
    AccumulateRun<F>(R, p + j, p_stride, rows, stride, s, len, d, c0, c1, acc, bias);
  }
  for (int64_t r = 0; r < R; ++r) {
    const float inv_sum = InverseExpSum(p + r * p_stride, n);
    float* o = t.out + r * t.o_stride + c0;
    const float* a = acc + r * w;
    // f32 scaled as it is; the stored formats add their (q4) bias, zero for the others, which also
    // makes a -0 sum +0 (the transposed prefill adds the same zero)
    if constexpr (F == KvFormat::f32)
      for (int64_t c = 0; c < w; ++c) o[c] = a[c] * inv_sum;
    else
      for (int64_t c = 0; c < w; ++c) o[c] = (a[c] + bias[r * nb + c / kBlocks]) * inv_sum;
  }
}

// Columns [c0, c1) of the group's outputs (c0 a multiple of the block, c1 too or head_dim) from the
// probabilities TaskExp left in p.
void TaskValues(const DecodeTask& t, const float* p, int64_t p_stride, int64_t c0, int64_t c1, DecodeScratch& s) {
  switch (t.v.format) {
    case KvFormat::f32: return ValuesOf<KvFormat::f32>(t, p, p_stride, c0, c1, s);
    case KvFormat::bf16: return ValuesOf<KvFormat::bf16>(t, p, p_stride, c0, c1, s);
    case KvFormat::q8: return ValuesOf<KvFormat::q8>(t, p, p_stride, c0, c1, s);
    case KvFormat::q4: return ValuesOf<KvFormat::q4>(t, p, p_stride, c0, c1, s);
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(Lanes);
HWY_EXPORT(TaskScores);
HWY_EXPORT(TaskExp);
HWY_EXPORT(TaskValues);

int64_t decode_lanes() { return HWY_DYNAMIC_DISPATCH(Lanes)(); }
void task_scores(const DecodeTask& t, int64_t j0, int64_t j1, float* p, int64_t p_stride, float* mx, DecodeScratch& s) {
  HWY_DYNAMIC_DISPATCH(TaskScores)(t, j0, j1, p, p_stride, mx, s);
}
void task_exp(const DecodeTask& t, int64_t j0, int64_t j1, float* p, int64_t p_stride, const float* mx) {
  HWY_DYNAMIC_DISPATCH(TaskExp)(t, j0, j1, p, p_stride, mx);
}
void task_values(const DecodeTask& t, const float* p, int64_t p_stride, int64_t c0, int64_t c1, DecodeScratch& s) {
  HWY_DYNAMIC_DISPATCH(TaskValues)(t, p, p_stride, c0, c1, s);
}

}  // namespace sanctum::ops::cpu
#endif
