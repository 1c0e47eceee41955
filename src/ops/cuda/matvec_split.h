#pragma once
// How the decode mat-vecs (tiled: matvec_tiles.cuh; row layout: matvec_mma.cu) split a weight's
// columns between the warps of a block: plain arithmetic on the shape and the GPU's size, so that
// tests can check the picks.
#include <cstdint>

namespace sanctum::ops::cuda::tiles {

constexpr int kSplitWarps = 8;  // warps per block

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
  constexpr double kBlockTiles = 1.3;
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

}  // namespace sanctum::ops::cuda::tiles
