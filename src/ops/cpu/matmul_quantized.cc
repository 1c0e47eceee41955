// y = x · wᵀ for MLX affine-quantized weights (4 or 8 bits, groups of 32/64/128), f32 accumulation.
//
// Layout trick: lane j of a block of N u32 words holds elements base + j*E .. base + j*E + E-1
// (E = 32/bits values per word). Extracting value i of every lane (shift by bits*i, mask) gives the
// elements base + j*E + i, so x is permuted once per row (xp[base + i*N + j] = x[base + j*E + i]) and
// the weights are read in checkpoint order with whole-vector loads, no per-element unpacking.
//
// Numerics contract (mat-vec and mat-mat alike): for each (x row, w row) pair and each block b,
//   acc_b = sum_i q_i * xp_i   (lane-wise, i in order, starting from q_0 * xp_0)
//   tot  += acc_b * scale_lane (lane-wise FMA; lane j takes the scale of its group)
// then tot += bias_g * sum(x_g) over the groups in lane chunks, and y = SumOfLanes(tot). Register
// blocking never changes a pair's sequence, so each y row has the same bits for any n or threads.
#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "ops/cpu/matmul_quantized.cc"
#include "hwy/foreach_target.h"  // IWYU pragma: keep
#include "hwy/cache_control.h"
#include "hwy/highway.h"
#include "ops/cpu/convert-inl.h"

#include <algorithm>
#include <vector>

#include "base/thread_pool.h"
#include "ops/cpu/kernels.h"
#include "ops/op_util.h"

HWY_BEFORE_NAMESPACE();
namespace sanctum::ops::cpu {
namespace HWY_NAMESPACE {

using DF = hn::ScalableTag<float>;
using DU = hn::RebindToUnsigned<DF>;
using DI = hn::RebindToSigned<DF>;
using VF = hn::Vec<DF>;
using VU = hn::Vec<DU>;
using IdxF = decltype(hn::IndicesFromVec(DF(), hn::Zero(DI())));

// Shape facts of one call.
struct QShape {
  int64_t k, words, blocks, groups, groups_padded, xp_len, group_size;
};

template <int BITS>
QShape MakeShape(int64_t k, int64_t group_size) {
  constexpr int64_t E = 32 / BITS;
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  QShape s{};
  s.k = k;
  s.words = k / E;
  s.blocks = (s.words + N - 1) / N;
  s.groups = k / group_size;
  s.groups_padded = (s.groups + N - 1) / N * N;
  s.xp_len = s.blocks * N * E;
  s.group_size = group_size;
  return s;
}

// x row -> permuted row xp (xp_len, zero past the last word) and group sums gs (groups_padded, zero padded).
template <int BITS>
void PrepareX(const QShape& s, const float* HWY_RESTRICT x, float* HWY_RESTRICT xp, float* HWY_RESTRICT gs) {
  constexpr int64_t E = 32 / BITS;
  const int64_t N = static_cast<int64_t>(hn::Lanes(DF()));
  for (int64_t b = 0; b < s.blocks; ++b)
    for (int64_t j = 0; j < N; ++j) {
      const int64_t word = b * N + j;
      for (int64_t i = 0; i < E; ++i) xp[b * N * E + i * N + j] = word < s.words ? x[word * E + i] : 0.0f;
    }
  for (int64_t g = 0; g < s.groups_padded; ++g) {
    float sum = 0.0f;
    if (g < s.groups)
      for (int64_t c = g * s.group_size; c < (g + 1) * s.group_size; ++c) sum += x[c];
    gs[g] = sum;
  }
}

// The value i of every lane of `words`, as f32.
template <int BITS, int I>
HWY_INLINE VF Extract(VU words) {
  const DF df;
  const DU du;
  const DI di;
  VU v = words;
  if constexpr (I > 0) v = hn::ShiftRight<BITS * I>(v);
#if HWY_TARGET == HWY_AVX3 || HWY_TARGET == HWY_AVX3_DL
  // 4-bit on 16 lanes: vpermps reads only the low 4 index bits, so one permute of the table
  // {0, 1, ..., 15} replaces mask + convert and yields exactly float(q).
  if constexpr (BITS == 4) return VF{_mm512_permutexvar_ps(v.raw, hn::Iota(df, 0.0f).raw)};
#endif
  if constexpr (BITS * (I + 1) < 32) v = hn::And(v, hn::Set(du, (1u << BITS) - 1u));
  return hn::ConvertTo(df, hn::BitCast(di, v));
}

template <int BITS, int NX, int NW, int I>
HWY_INLINE void BlockStep(const VU (&words)[NW], const float* const* xb, VF (&acc)[NX][NW]) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF q[NW];
  for (int w = 0; w < NW; ++w) q[w] = Extract<BITS, I>(words[w]);
  for (int x = 0; x < NX; ++x) {
    const VF xv = hn::LoadU(df, xb[x] + I * N);
    for (int w = 0; w < NW; ++w) acc[x][w] = I == 0 ? hn::Mul(q[w], xv) : hn::MulAdd(q[w], xv, acc[x][w]);
  }
  if constexpr (I + 1 < 32 / BITS) BlockStep<BITS, NX, NW, I + 1>(words, xb, acc);
}

// Per-row inputs of a weight tile: packed words and f32 scales/biases (see RowScales).
struct WRow {
  const uint32_t* words;
  const float* scales;
  const float* biases;
};

constexpr int64_t kQPrefetchWords = 256;  // 1 KiB ahead in each weight row's stream

// NX prepared x rows (xp, gs) against NW weight rows; y[x] + w receives the result.
template <int BITS, int NX, int NW>
HWY_INLINE void QuantTile(const QShape& s, IdxF lane_group, const float* const* xp, const float* const* gs, const WRow* wr,
                          float* const* y) {
  constexpr int64_t E = 32 / BITS;
  const DF df;
  const DU du;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  VF tot[NX][NW];
  for (int x = 0; x < NX; ++x)
    for (int w = 0; w < NW; ++w) tot[x][w] = hn::Zero(df);
  for (int64_t b = 0; b < s.blocks; ++b) {
    const int64_t nw = std::min<int64_t>(N, s.words - b * N);
    VU words[NW];
    for (int w = 0; w < NW; ++w) hwy::Prefetch(wr[w].words + b * N + kQPrefetchWords);
    if (HWY_LIKELY(nw == N)) {
      for (int w = 0; w < NW; ++w) words[w] = hn::LoadU(du, wr[w].words + b * N);
    } else {
      const auto m = hn::FirstN(du, static_cast<size_t>(nw));
      for (int w = 0; w < NW; ++w) words[w] = hn::MaskedLoad(m, du, wr[w].words + b * N);
    }
    const float* xb[NX];
    for (int x = 0; x < NX; ++x) xb[x] = xp[x] + b * N * E;
    VF acc[NX][NW];
    BlockStep<BITS, NX, NW, 0>(words, xb, acc);
    const int64_t g0 = b * N * E / s.group_size;
    for (int w = 0; w < NW; ++w) {
      const VF sv = hn::TableLookupLanes(hn::LoadU(df, wr[w].scales + g0), lane_group);
      for (int x = 0; x < NX; ++x) tot[x][w] = hn::MulAdd(acc[x][w], sv, tot[x][w]);
    }
  }
  for (int64_t g = 0; g < s.groups_padded; g += N) {
    VF bv[NW];
    for (int w = 0; w < NW; ++w) bv[w] = hn::LoadU(df, wr[w].biases + g);
    for (int x = 0; x < NX; ++x) {
      const VF gv = hn::LoadU(df, gs[x] + g);
      for (int w = 0; w < NW; ++w) tot[x][w] = hn::MulAdd(bv[w], gv, tot[x][w]);
    }
  }
  for (int x = 0; x < NX; ++x)
    for (int w = 0; w < NW; ++w) y[x][w] = hn::GetLane(hn::SumOfLanes(df, tot[x][w]));
}

#if HWY_TARGET <= HWY_AVX3
constexpr int kQNX = 4, kQNW = 2, kQVecNW = 4;
#else
constexpr int kQNX = 2, kQNW = 2, kQVecNW = 2;
#endif
constexpr int kQMaxNW = kQVecNW > kQNW ? kQVecNW : kQNW;

// Lane j of a block reads the scale of group (j*E)/group_size relative to the block's first group.
template <int BITS>
IdxF LaneGroups(int64_t group_size) {
  const DF df;
  const DI di;
  HWY_ALIGN int32_t idx[hn::MaxLanes(di)];
  for (size_t j = 0; j < hn::Lanes(di); ++j) idx[j] = static_cast<int32_t>(static_cast<int64_t>(j) * (32 / BITS) / group_size);
  return hn::IndicesFromVec(df, hn::Load(di, idx));
}

constexpr int64_t kQChunkRows = 32;  // weight rows whose scales/biases are widened to f32 at once

// f32 scales and biases of weight rows [r0, r0 + rows), row-major (rows, groups), followed by at
// least N padding floats: block and bias loads may run past a row's last group into its neighbour
// or the padding, where they only ever meet zero x lanes.
struct RowScales {
  std::vector<float> scales, biases;
  explicit RowScales(const QShape& s, int64_t N) : scales(static_cast<size_t>(kQChunkRows * s.groups + 2 * N)), biases(scales.size()) {}

  void load(const Weight& wt, const QShape& s, int64_t r0, int64_t rows) {
    const size_t es = dtype_size(wt.scales.dtype());
    const char* sbase = static_cast<const char*>(wt.scales.raw());
    const char* bbase = static_cast<const char*>(wt.biases.raw());
    if (wt.scales.stride(0) == s.groups && wt.biases.stride(0) == s.groups) {  // contiguous: one pass
      ConvertToF32(sbase + r0 * s.groups * static_cast<int64_t>(es), wt.scales.dtype(), scales.data(), rows * s.groups);
      ConvertToF32(bbase + r0 * s.groups * static_cast<int64_t>(es), wt.biases.dtype(), biases.data(), rows * s.groups);
      return;
    }
    for (int64_t r = 0; r < rows; ++r) {
      ConvertToF32(sbase + (r0 + r) * wt.scales.stride(0) * static_cast<int64_t>(es), wt.scales.dtype(), scales.data() + r * s.groups,
                   s.groups);
      ConvertToF32(bbase + (r0 + r) * wt.biases.stride(0) * static_cast<int64_t>(es), wt.biases.dtype(), biases.data() + r * s.groups,
                   s.groups);
    }
  }
};

constexpr int64_t kQPanelBytes = 512 * 1024;  // permuted x panel kept in L2 while weights stream

template <int BITS>
void QuantRun(const Tensor& x, const Weight& wt, Tensor& y) {
  const DF df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  const int64_t n = x.dim(0), m = wt.rows;
  const QShape s = MakeShape<BITS>(wt.cols, wt.quant.group_size);
  const auto lane_group = LaneGroups<BITS>(s.group_size);
  const int64_t panel = n == 1 ? 1 : std::clamp<int64_t>(kQPanelBytes / (s.xp_len * 4) / kQNX * kQNX, kQNX, 256);
  const int64_t rows_in_panel = std::min(n, panel);
  std::vector<float> xp_buf(static_cast<size_t>(rows_in_panel * s.xp_len));
  std::vector<float> gs_buf(static_cast<size_t>(rows_in_panel * s.groups_padded));
  float* ybase = y.data<float>();
  const int64_t ystride = y.stride(0);
  ThreadPool& pool = compute_pool();
  const int64_t grain = std::max<int64_t>(8, 32768 / std::max<int64_t>(s.k, 1));
  for (int64_t p0 = 0; p0 < n; p0 += panel) {
    const int64_t p1 = std::min(n, p0 + panel), pn = p1 - p0;
    for (int64_t i = 0; i < pn; ++i)
      PrepareX<BITS>(s, x.data<const float>() + (p0 + i) * x.stride(0), xp_buf.data() + i * s.xp_len, gs_buf.data() + i * s.groups_padded);
    pool.parallel_for(m, grain, [&](int64_t r0, int64_t r1) {
      RowScales rs(s, N);
      WRow wr[kQMaxNW];
      const int nw_block = pn == 1 ? kQVecNW : kQNW;
      for (int64_t c0 = r0; c0 < r1; c0 += kQChunkRows) {
        const int64_t c1 = std::min(r1, c0 + kQChunkRows);
        rs.load(wt, s, c0, c1 - c0);
        for (int64_t r = c0; r < c1;) {
          const int nw = r + nw_block <= c1 ? nw_block : 1;
          for (int w = 0; w < nw; ++w)
            wr[w] = WRow{wt.data.data<const uint32_t>() + (r + w) * wt.data.stride(0), rs.scales.data() + (r + w - c0) * s.groups,
                         rs.biases.data() + (r + w - c0) * s.groups};
          for (int64_t i = 0; i < pn;) {
            // Leftover x rows go in one smaller tile, not one weight pass each: a 6-row forward (a
            // speculative verify) streams the weights twice, not three times. A row's sums do not
            // depend on its tile.
            const int64_t left = pn - i;
            const int nx = left >= kQNX ? kQNX : (kQNX > 3 && left == 3) ? 3 : (kQNX > 2 && left >= 2) ? 2 : 1;
            const float* xs[4];
            const float* gs[4];
            float* ys[4];
            for (int j = 0; j < nx; ++j) {
              xs[j] = xp_buf.data() + (i + j) * s.xp_len;
              gs[j] = gs_buf.data() + (i + j) * s.groups_padded;
              ys[j] = ybase + (p0 + i + j) * ystride + r;
            }
            if (nx == 1 && nw == kQVecNW && pn == 1) QuantTile<BITS, 1, kQVecNW>(s, lane_group, xs, gs, wr, ys);
            else if (nx == 1 && nw == kQNW) QuantTile<BITS, 1, kQNW>(s, lane_group, xs, gs, wr, ys);
            else if (nx == 1) QuantTile<BITS, 1, 1>(s, lane_group, xs, gs, wr, ys);
            else if (nx == kQNX && nw == kQNW) QuantTile<BITS, kQNX, kQNW>(s, lane_group, xs, gs, wr, ys);
            else if (nx == kQNX) QuantTile<BITS, kQNX, 1>(s, lane_group, xs, gs, wr, ys);
            else if (nx == 3 && nw == kQNW) QuantTile<BITS, 3, kQNW>(s, lane_group, xs, gs, wr, ys);
            else if (nx == 3) QuantTile<BITS, 3, 1>(s, lane_group, xs, gs, wr, ys);
            else if (nw == kQNW) QuantTile<BITS, 2, kQNW>(s, lane_group, xs, gs, wr, ys);
            else QuantTile<BITS, 2, 1>(s, lane_group, xs, gs, wr, ys);
            i += nx;
          }
          r += nw;
        }
      }
    });
  }
}

void MatmulQuantized(const Tensor& x, const Weight& w, Tensor& y) {
  if (w.quant.bits == 4) QuantRun<4>(x, w, y);
  else QuantRun<8>(x, w, y);
}

}  // namespace HWY_NAMESPACE
}  // namespace sanctum::ops::cpu
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace sanctum::ops::cpu {
HWY_EXPORT(MatmulQuantized);

void matmul_quantized(const Tensor& x, const Weight& w, Tensor& y) { HWY_DYNAMIC_DISPATCH(MatmulQuantized)(x, w, y); }

// The kernels read the checkpoint layout directly; nothing to repack.
void prepare_weight(Weight& w) { (void)w; }

}  // namespace sanctum::ops::cpu
#endif
