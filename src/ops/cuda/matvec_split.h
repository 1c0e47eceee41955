#pragma once
// How the decode mat-vecs (tiled: matvec_tiles.cuh; row layout: matvec_mma.cu) split a weight's
// columns between the warps of a block: plain arithmetic on the shape and the GPU's size, so that
// tests can check the picks.
#include <cstdint>

namespace sanctum::ops::cuda::tiles {

constexpr int kSplitWarps = 8;  // warps per block

// Calls f.template operator()<KS>() with the warps per row tile ks (1, 2, 4, or 8 for any other
// value) as a compile-time constant, for the kernels' template argument.
template <class F>
decltype(auto) with_split(int ks, F&& f) {
  switch (ks) {
    case 1: return f.template operator()<1>();
    case 2: return f.template operator()<2>();
    case 4: return f.template operator()<4>();
    default: return f.template operator()<8>();
  }
}

// What a block costs beyond its warps' column tiles, in column tiles' time (on an H200): starting
// and finishing (its first loads, the warps' sums meeting in shared memory), and, once the columns
// are split into parts, handing its part's sums over (cuda_perf_test, matvec_layer_stream).
constexpr double kBlockTiles = 1.3, kHandOverTiles = 3.5;

// The column parts' workspace (matvec_tiles.cu): kPartSumFloats floats of part sums, one counter
// per block row.
constexpr int64_t kPartSumFloats = int64_t{1} << 21, kPartCounters = int64_t{1} << 16;
constexpr int kMaxParts = 8;

// Warps per row tile splitting its columns: enough warps in all to keep every multiprocessor's loads
// in flight, while each warp keeps four or more column tiles.
inline int column_split(int64_t row_tiles, int rt, int64_t k_tiles, int multiprocessors) {
  const int64_t groups = (row_tiles + rt - 1) / rt, target = int64_t{64} * multiprocessors;
  int ks = 1;
  while (ks < kSplitWarps && groups * ks < target && k_tiles >= 4 * ks) ks *= 2;
  return ks;
}

// For a dense weight (a launch of blocks of kSplitWarps / ks groups of rt row tiles): column_split's
// pick, or fewer warps per row tile where that makes fewer, longer blocks in fewer waves. A block
// costs its warps' column tiles plus kBlockTiles for starting and finishing (its first loads, the
// warps' sums meeting in shared memory); a launch costs its waves of blocks. Only splits that still
// fill 95% of a wave are considered (a part-empty GPU holds fewer loads in flight than the model
// says), and only a saving of 5% or more moves the pick. On an H200 (decode_sweep.py, tg128 after
// 512; bench/RESULTS.md): the 24B shape's 65,536 x 5,120 gate/up at 8 / 4 / 2 / 1 warps per row
// tile makes 2,048 / 1,024 / 512 / 256 blocks, all whole waves within 3%, and decode ran 194.5 /
// 200.5 / 203.1 tok/s, and 195.6 -> 207.7 for 8 -> 1 in another run (each block's start and finish
// came to about 1.5 tiles' time); the 27B shape's 34,816-row gate/up at 8 / 4 / 2 (4.1 / 2.1 / 1.03
// waves) ran 154.5 / 152.6 / 145.3.
inline int dense_column_split(int64_t row_tiles, int rt, int64_t k_tiles, int multiprocessors, int blocks_per_multiprocessor) {
  const int64_t groups = (row_tiles + rt - 1) / rt, slots = int64_t{multiprocessors} * blocks_per_multiprocessor;
  auto blocks = [&](int ks) { return (groups * ks + kSplitWarps - 1) / kSplitWarps; };
  auto cost = [&](int ks) {
    return static_cast<double>((blocks(ks) + slots - 1) / slots) * (static_cast<double>(k_tiles) / ks + kBlockTiles);
  };
  const int first = column_split(row_tiles, rt, k_tiles, multiprocessors);
  int best = first;
  for (int ks = 1; ks < first; ks *= 2)
    if (blocks(ks) * 20 >= slots * 19 && cost(ks) < 0.95 * cost(first) && cost(ks) < cost(best)) best = ks;
  return best;
}

// Column parts for `blocks` blocks where `slots` run at once: the count whose waves of blocks end
// soonest, a block taking its warp's column tiles plus, once split, kHandOverTiles. Fewer parts
// unless more save 5%; every warp keeps 8 or more column tiles per part (parts that left a warp 2
// to 5 tiles slowed the small projections down in decode), and the sums must fit the workspace.
inline int column_parts(int64_t blocks, int64_t slots, int64_t k_tiles, int ks, int64_t sums_per_part, int max_parts) {
  auto cost = [&](int p) {
    const double waves = static_cast<double>((blocks * p + slots - 1) / slots);
    return waves * (static_cast<double>(k_tiles) / (ks * p) + (p > 1 ? kHandOverTiles : 0.0));
  };
  int best = 1;
  if (blocks > kPartCounters) return best;
  for (int p = 2; p <= max_parts && k_tiles >= int64_t{8} * ks * p && sums_per_part * p <= kPartSumFloats; ++p)
    if (cost(p) < 0.95 * cost(best)) best = p;
  return best;
}

struct LaunchShape {
  int ks;     // warps per row tile
  int parts;  // column parts
};

// A dense weight's warps per row tile and column parts chosen together. dense_column_split picks
// the warps first and column_parts then fills the GPU with parts of those blocks, which misses the
// pairs where fewer warps per row tile and more parts make one whole wave: the 5,120-row down
// projections (8 warps in 3 parts: 480 blocks, 1.8 waves) fit 240 blocks of 4 warps in 3 parts
// into one. Every (warps, parts) is costed as waves x (a warp's column tiles + kBlockTiles +
// kHandOverTiles once split); a pair other than the two-step pick is taken only where its blocks
// fill kMinFillPercent of a wave and it saves 5%; at equal cost, fewer parts (less to hand over).
// On an H200 (decode in turns, tg128 after 512; bench/RESULTS.md): 24B 205.3 -> 207.4 tok/s, 27B
// 155.1 -> 157.3 (2 warps in 6 parts, the same cost, ran 204.2 and 153.9); a fill floor of 70%
// rather than 90%, which also moves the MoE shape's 12,352 x 2,048 (193 blocks of 4 warps in one
// wave against 386 of 8 in 1.5) and the 27B's 14,336 x 5,120, took MoE 542.8 -> 548.2 and 27B 158.1
// -> 158.5; 50%, which also moves the MoE's 9,216 x 2,048 to 144 blocks, ran 544.9 and 158.4.
inline LaunchShape dense_launch_shape(int64_t row_tiles, int rt, int64_t k_tiles, int multiprocessors, int blocks_per_multiprocessor,
                                      int max_parts, int64_t sums_per_part) {
  constexpr int kMinFillPercent = 70;
  const int64_t groups = (row_tiles + rt - 1) / rt, slots = int64_t{multiprocessors} * blocks_per_multiprocessor;
  auto blocks = [&](int ks) { return (groups * ks + kSplitWarps - 1) / kSplitWarps; };
  auto cost = [&](int ks, int p) {
    const double waves = static_cast<double>((blocks(ks) * p + slots - 1) / slots);
    return waves * (static_cast<double>(k_tiles) / (ks * p) + kBlockTiles + (p > 1 ? kHandOverTiles : 0.0));
  };
  const int ks0 = dense_column_split(row_tiles, rt, k_tiles, multiprocessors, blocks_per_multiprocessor);
  LaunchShape best{ks0, max_parts > 1 ? column_parts(blocks(ks0), slots, k_tiles, ks0, sums_per_part, max_parts) : 1};
  const double first = cost(best.ks, best.parts);
  double best_cost = first;
  for (int p = 1; p <= max_parts; ++p)
    for (int ks = kSplitWarps; ks >= 1; ks /= 2) {
      if (ks > ks0 && k_tiles < int64_t{2} * ks) continue;  // column_split's floor: two column tiles a warp
      if (p > 1 && (k_tiles < int64_t{8} * ks * p || sums_per_part * p > kPartSumFloats || blocks(ks) > kPartCounters)) continue;
      if (blocks(ks) * p * 100 < slots * kMinFillPercent) continue;
      const double c = cost(ks, p);
      if (c < 0.95 * first && c < best_cost) best = {ks, p}, best_cost = c;
    }
  return best;
}

}  // namespace sanctum::ops::cuda::tiles
