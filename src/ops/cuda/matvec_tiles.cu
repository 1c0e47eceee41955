// Weights reordered at load for the decode mat-vec (WeightLayout::tiles; the layout and the kernel:
// matvec_tiles.cuh), and the mat-vec's entry point. On an H200, over a stream of 27B-shape weights
// several times the L2 (cuda_perf_test, matvec_layer_stream), the row-layout kernel reads 1.67 TB/s
// and this one 2.27 TB/s; 27B decode 93 -> 121 tok/s (bench/RESULTS.md).
#include "base/tuning.h"
#include "ops/cuda/gemm_tiles.h"
#include "ops/cuda/matvec_tiles.cuh"
#include "ops/cuda/matvec_tiles.h"
#include "ops/precision.h"

namespace sanctum::ops::cuda {

namespace tiles {

float* part_sums_workspace() {
  static Tensor t = Tensor::zeros({kPartSumFloats}, DType::f32, Device::cuda);
  return t.data<float>();
}

int* part_counters_workspace() {
  static Tensor t = Tensor::zeros({kPartCounters}, DType::i32, Device::cuda);
  return t.data<int32_t>();
}

}  // namespace tiles

namespace {

// Tuning (cuda_perf_test, matvec_layer_stream, on an H200): two row tiles per warp, two tiles of
// each in flight, two blocks per multiprocessor read the 27B layer stream at 2.75 TB/s, against
// 2.32 for one row tile, four in flight, three blocks. Expert matrices are small (a grid is about
// one wave), and keep the one-row-tile tuning.
constexpr int kRowTiles = 2, kDepth = 2, kMinBlocks = 2;
constexpr int kExpertDepth = 4, kExpertMinBlocks = 3;

// Thread i writes 16-byte word i of the tiled codes: tile i / 32, lane i % 32.
__global__ void tile_codes(const uint8_t* __restrict__ src, int64_t row_bytes, int64_t row_tiles, int64_t k_tiles,
                           uint4* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= row_tiles * k_tiles * 32) return;
  const int lane = static_cast<int>(i & 31), g = lane >> 2, t = lane & 3;
  const int64_t tile = i >> 5, rt = tile / k_tiles, kt = tile % k_tiles;
  const uint8_t* p = src + (rt * 16 + g) * row_bytes + kt * 32 + t * 8;
  const uint2 lo = *reinterpret_cast<const uint2*>(p), hi = *reinterpret_cast<const uint2*>(p + 8 * row_bytes);
  dst[i] = make_uint4(lo.x, lo.y, hi.x, hi.y);
}

// Thread i writes value i of the tiled scales (or biases): row tile i / (16 groups), then group, then
// the pair (row g, row g + 8).
__global__ void tile_groups(const uint16_t* __restrict__ src, int64_t groups, int64_t row_tiles, uint16_t* __restrict__ dst) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= row_tiles * groups * 16) return;
  const int within = static_cast<int>(i & 15), g = within >> 1, h = within & 1;
  const int64_t rg = i >> 4, rt = rg / groups, grp = rg % groups;
  dst[i] = src[(rt * 16 + h * 8 + g) * groups + grp];
}

// Rewrites t in place through a scratch copy (the tensor may be shared, e.g. by the checkpoint's
// upload cache, which then holds the tiled bytes too).
template <class Launch>
void rewrite(Tensor& t, Launch launch) {
  Tensor scratch = Tensor::zeros_like_shape(t.shape(), t.ndim(), t.dtype(), Device::cuda);
  launch(scratch.raw());
  check_launch("tile weight");
  check_cuda(cudaMemcpyAsync(t.raw(), scratch.raw(), t.nbytes(), cudaMemcpyDeviceToDevice, stream()), "tile weight copy");
  check_cuda(cudaStreamSynchronize(stream()), "tile weight");
}

// Column parts across blocks where they fill the GPU better (tuning matvec_parts=0: never, for
// comparisons).
int max_column_parts() { return current_tuning().on(Knob::matvec_parts) ? tiles::kMaxParts : 1; }

template <class S, bool PAIRS, int FUSE, int NB>
int64_t launch_tiles_nb(const tiles::Args& a, int group_tiles, const tiles::NormFusion& f) {
  constexpr int form = FUSE != tiles::kPlain ? tiles::kOneRow : tiles::kAllColumns;
  if (group_tiles == 1) return tiles::launch_split<S, kRowTiles, 1, kDepth, kMinBlocks, PAIRS, FUSE, form, NB>(a, max_column_parts(), f);
  return tiles::launch_split<S, kRowTiles, 2, kDepth, kMinBlocks, PAIRS, FUSE, form, NB>(a, max_column_parts(), f);
}

// Up to 8 x rows one column block of the mma; a decode batch of 9 to kTiledRows rows two, in one
// launch that reads each weight tile once for both. On an H100, 16 streams of the 27B shape decoded
// 684-713 tok/s against 617-631 in two launches of 8 rows each. Four blocks (17 to 32 rows) spilled and ran
// no faster than the prefill GEMM, which beats passes of 32 rows at 64 streams (1,029 against 781
// tok/s; bench/gpu/batched_decode.py, bench/RESULTS.md).
template <class S, bool PAIRS, int FUSE>
int64_t launch_tiles(const tiles::Args& a, int group_tiles, const tiles::NormFusion& f) {
  static_assert(kTiledRows == 16, "one or two column blocks of 8 rows");
  if constexpr (FUSE == tiles::kPlain)
    if (a.n > 8) return launch_tiles_nb<S, PAIRS, FUSE, 2>(a, group_tiles, f);
  return launch_tiles_nb<S, PAIRS, FUSE, 1>(a, group_tiles, f);
}

// Weight loads marked evict-first in L2 (tuning weight_evict_first=0: normal, for comparisons). On an
// H200 it took decode 142.2 -> 144.0 tok/s (27B shape) and 184.0 -> 186.6 (24B shape).
bool weights_evict_first() { return current_tuning().on(Knob::weight_evict_first); }

// The tiled mat-vec over w with x and y in `a` (FUSE, f: the norm split across two mat-vecs,
// matvec_tiles.cuh). Returns the launch's block rows.
template <bool PAIRS = false, int FUSE = tiles::kPlain>
int64_t launch_tiles_of(const Weight& w, tiles::Args a, const tiles::NormFusion& f = {}) {
  a.evict_first = weights_evict_first();
  const int group_tiles = w.quant.group_size / 64;
  if (w.scales.dtype() == DType::bf16) return launch_tiles<__nv_bfloat16, PAIRS, FUSE>(a, group_tiles, f);
  return launch_tiles<__half, PAIRS, FUSE>(a, group_tiles, f);
}

// tasks: the slots grouped by expert (ops::moe_expert_tasks), or null for a launch per slot.
template <class S>
void launch_expert_tiles(const tiles::ExpertArgs& e, int group_tiles, int slots, int projections, const int32_t* tasks) {
  if (group_tiles == 1)
    tiles::launch_experts_split<S, 1, 1, kExpertDepth, kExpertMinBlocks>(e, slots, projections, kExpertMinBlocks, nullptr, tasks);
  else tiles::launch_experts_split<S, 1, 2, kExpertDepth, kExpertMinBlocks>(e, slots, projections, kExpertMinBlocks, nullptr, tasks);
}

// Gate/up pairs take two row tiles per warp (the dense tuning's registers), with the column split
// of the two-projection launch above, so that the sums are its sums.
template <class S>
void launch_expert_pairs(const tiles::ExpertArgs& e, int group_tiles, int slots, const tiles::ExpertRouting* routing,
                         const int32_t* tasks) {
  if (group_tiles == 1)
    tiles::launch_experts_split<S, kRowTiles, 1, kDepth, kMinBlocks, true>(e, slots, 2, kExpertMinBlocks, routing, tasks);
  else tiles::launch_experts_split<S, kRowTiles, 2, kDepth, kMinBlocks, true>(e, slots, 2, kExpertMinBlocks, routing, tasks);
}

bool x_rows_ok(const Tensor& x) { return aligned16(x.raw()) && x.stride(0) % 4 == 0; }

}  // namespace

bool can_tile(const Weight& w) {
  return w.layout == WeightLayout::rows && w.data.device() == Device::cuda && w.quantized() && w.quant.bits == 4 &&
         (w.quant.group_size == 64 || w.quant.group_size == 128) && (w.scales.dtype() == DType::bf16 || w.scales.dtype() == DType::f16) &&
         w.rows % 16 == 0 && w.cols % 64 == 0 && w.data.is_contiguous() && w.scales.is_contiguous() && w.biases.is_contiguous() &&
         aligned16(w.data.raw()) && aligned16(w.scales.raw()) && aligned16(w.biases.raw());
}

void tile_weight(Weight& w) {
  check(can_tile(w), ErrorKind::internal, "weight '" + w.name + "' cannot be tiled for the tensor-core mat-vec");
  const int64_t row_tiles = w.rows / 16, k_tiles = w.cols / 64, groups = w.cols / w.quant.group_size;
  rewrite(w.data, [&](void* dst) {
    const int64_t words = row_tiles * k_tiles * 32;
    tile_codes<<<blocks_for(words, 256), 256, 0, stream()>>>(static_cast<const uint8_t*>(w.data.raw()), w.data.stride(0) * 4, row_tiles,
                                                             k_tiles, static_cast<uint4*>(dst));
  });
  for (Tensor* t : {&w.scales, &w.biases})
    rewrite(*t, [&](void* dst) {
      tile_groups<<<blocks_for(t->numel(), 256), 256, 0, stream()>>>(static_cast<const uint16_t*>(t->raw()), groups, row_tiles,
                                                                     static_cast<uint16_t*>(dst));
    });
  w.layout = WeightLayout::tiles;
}

void prepare_weight(Weight& w) {
  if (!current_tuning().on(Knob::tile_weights) || matmul_precision() != MatmulPrecision::bf16 || !can_tile(w)) return;
  tile_weight(w);
  tiles_gemm_supported();  // probes the device now, at load, rather than inside a forward
}

bool tiles_matvec_ok(const Weight& w, const Tensor& x, int64_t n) {
  return w.layout == WeightLayout::tiles && n >= 1 && n <= kTiledRows && x_rows_ok(x);
}

void tiles_matvec(const Tensor& x, const Weight& w, Tensor& y) {
  launch_tiles_of(w, tiles::args_of(w, x.data<float>(), x.stride(0), static_cast<int>(x.dim(0)), y.data<float>(), y.stride(0)));
  check_launch("matmul (tiled tensor-core mat-vec)");
}

namespace {

// A stream row the kernels copy in 16-byte pieces.
bool aligned_row(const Tensor* t, int64_t cols) { return stream_row(t, cols) && aligned16(t->raw()); }

tiles::NormFusion scaled_fusion(const ScaledInput& in, int64_t cols) {
  tiles::NormFusion f;
  f.in_squares = in.squares->data<float>();
  f.count = static_cast<int>(in.count);
  f.cols = static_cast<float>(cols);
  f.eps = in.eps;
  return f;
}

}  // namespace

bool tiles_residual_ok(const Tensor& x, const Weight& w, const ResidualNorm& r) {
  // A launch has at most a block row per row tile, each leaving one sum of squares; the block's h
  // rows and norm weights are staged in 16-byte copies.
  return tiles_matvec_ok(w, x, 1) && x.dim(0) == 1 && residual_fits(r, w.rows, w.rows / 16) && aligned16(r.h->raw()) &&
         aligned16(r.u->raw()) && aligned16(r.weight->raw()) && r.h->raw() != x.raw() && r.u->raw() != x.raw();
}

int64_t tiles_matvec_residual(const Tensor& x, const Weight& w, const ResidualNorm& r) {
  tiles::NormFusion f;
  f.residual = residual_out(r);
  const int64_t count =
      launch_tiles_of<false, tiles::kResidualOut>(w, tiles::args_of(w, x.data<float>(), x.stride(0), 1, f.residual.u, r.u->stride(0)), f);
  check_launch("matmul_residual (tiled tensor-core mat-vec)");
  return count;
}

bool tiles_scaled_ok(const ScaledInput& in, const Weight& w) {
  const Tensor* sq = in.squares;
  return w.layout == WeightLayout::tiles && aligned_row(in.u, w.cols) && in.count > 0 && in.count <= tiles::kMaxSquares && sq != nullptr &&
         *sq && sq->device() == Device::cuda && sq->dtype() == DType::f32 && sq->is_contiguous() && sq->numel() >= squares_room(in.count) &&
         aligned16(sq->raw());
}

void tiles_matvec_scaled(const ScaledInput& in, const Weight& w, Tensor& y) {
  launch_tiles_of<false, tiles::kScaledIn>(w, tiles::args_of(w, in.u->data<float>(), in.u->stride(0), 1, y.data<float>(), y.stride(0)),
                                           scaled_fusion(in, w.cols));
  check_launch("matmul_scaled (tiled tensor-core mat-vec)");
}

namespace {
// The SwiGLU inside the gate/up mat-vecs, dense and expert (tuning fuse_swiglu=0: never, for
// comparisons).
bool swiglu_fused() { return current_tuning().on(Knob::fuse_swiglu); }
}  // namespace

bool tiles_silu_mul_ok(const Weight& gate_up, const Tensor& x) {
  return swiglu_fused() && tiles_matvec_ok(gate_up, x, x.dim(0)) && gate_up.rows % 32 == 0;
}

void tiles_matvec_silu_mul(const Tensor& x, const Weight& gate_up, Tensor& act) {
  static_assert(kRowTiles == 2, "gate/up pairs take two row tiles per warp");
  tiles::Args a = tiles::args_of(gate_up, x.data<float>(), x.stride(0), static_cast<int>(x.dim(0)), act.data<float>(), act.stride(0));
  a.pair_tiles = gate_up.rows / 32;
  launch_tiles_of<true>(gate_up, a);
  check_launch("matmul_silu_mul (tiled tensor-core mat-vec)");
}

bool tiles_silu_mul_scaled_ok(const ScaledInput& in, const Weight& gate_up) {
  return swiglu_fused() && tiles_scaled_ok(in, gate_up) && gate_up.rows % 32 == 0;
}

void tiles_matvec_silu_mul_scaled(const ScaledInput& in, const Weight& gate_up, Tensor& act) {
  tiles::Args a = tiles::args_of(gate_up, in.u->data<float>(), in.u->stride(0), 1, act.data<float>(), act.stride(0));
  a.pair_tiles = gate_up.rows / 32;
  launch_tiles_of<true, tiles::kScaledIn>(gate_up, a, scaled_fusion(in, gate_up.cols));
  check_launch("matmul_silu_mul_scaled (tiled tensor-core mat-vec)");
}

bool tiles_experts_ok(const ExpertSet& experts, const Tensor& x) {
  return experts.size() > 0 && experts[0].layout == WeightLayout::tiles && x_rows_ok(x);
}

namespace {

// Expert tables staged in shared memory by the routed gate/up and the down + combine launches
// (tiles::stage_tables; tuning stage_expert_tables=0: read in global memory, for comparisons), for
// tables of up to kMaxStagedEntries rows (2 x 12 KB at most).
constexpr int64_t kMaxStagedEntries = 512;
int staged_entries(const ExpertSet& a) {
  const bool on = current_tuning().on(Knob::stage_expert_tables);
  const int64_t rows = a.device_table().dim(0);
  return on && rows <= kMaxStagedEntries ? static_cast<int>(rows) : 0;
}

tiles::ExpertArgs expert_args(const Tensor& x, const ExpertSet& a, const ExpertSet* b, const Tensor& ids, Tensor& ya, Tensor* yb) {
  const Weight& w = a[0];
  return tiles::ExpertArgs{{a.device_table().data<int64_t>(), b != nullptr ? b->device_table().data<int64_t>() : nullptr},
                           {ya.data<float>(), yb != nullptr ? yb->data<float>() : nullptr},
                           ids.data<int32_t>(),
                           w.rows / 16,
                           static_cast<int>(w.cols / 64),
                           static_cast<int>(w.cols / w.quant.group_size),
                           x.data<float>(),
                           x.stride(0),
                           static_cast<int>(ya.dim(0) / x.dim(0)),
                           ya.stride(0),
                           weights_evict_first(),
                           b == nullptr || b->device_table().dim(0) == a.device_table().dim(0) ? staged_entries(a) : 0};
}

}  // namespace

namespace {
// ids: each slot's expert, or with `tasks` (the slots grouped by expert) the tasks, the ids unread.
void expert_tiles(const Tensor& x, const ExpertSet& a, const ExpertSet* b, const Tensor& ids, Tensor& ya, Tensor* yb,
                  const int32_t* tasks) {
  const Weight& w = a[0];
  const tiles::ExpertArgs e = expert_args(x, a, b, ids, ya, yb);
  const int slots = static_cast<int>(ya.dim(0)), projections = b != nullptr ? 2 : 1, group_tiles = w.quant.group_size / 64;
  if (w.scales.dtype() == DType::bf16) launch_expert_tiles<__nv_bfloat16>(e, group_tiles, slots, projections, tasks);
  else launch_expert_tiles<__half>(e, group_tiles, slots, projections, tasks);
  check_launch(tasks != nullptr ? "grouped expert mat-vec (tiled)" : "expert mat-vec (tiled)");
}
}  // namespace

void tiles_expert_matvec(const Tensor& x, const ExpertSet& a, const ExpertSet* b, const Tensor& ids, Tensor& ya, Tensor* yb) {
  expert_tiles(x, a, b, ids, ya, yb, nullptr);
}

bool tiles_expert_silu_mul_ok(const ExpertSet& gate, const ExpertSet& up, const Tensor& x) {
  return swiglu_fused() && tiles_experts_ok(gate, x) && up.size() > 0 && ExpertSet::fits(gate[0], up[0]);
}

namespace {
// ids as expert_tiles's; routing and tasks exclusive.
void expert_pairs(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& ids, Tensor& act,
                  const tiles::ExpertRouting* routing, const int32_t* tasks) {
  const Weight& w = gate[0];
  const tiles::ExpertArgs e = expert_args(x, gate, &up, ids, act, nullptr);
  const int slots = static_cast<int>(act.dim(0)), group_tiles = w.quant.group_size / 64;
  if (w.scales.dtype() == DType::bf16) launch_expert_pairs<__nv_bfloat16>(e, group_tiles, slots, routing, tasks);
  else launch_expert_pairs<__half>(e, group_tiles, slots, routing, tasks);
  check_launch(routing ? "expert gate/up mat-vec with routing and SwiGLU (tiled)"
               : tasks ? "grouped expert gate/up mat-vec with SwiGLU (tiled)"
                       : "expert gate/up mat-vec with SwiGLU (tiled)");
}
}  // namespace

void tiles_expert_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& ids, Tensor& act) {
  expert_pairs(x, gate, up, ids, act, nullptr, nullptr);
}

bool tiles_routed_expert_silu_mul_ok(const ExpertSet& gate, const ExpertSet& up, const Tensor& x, const Tensor& logits) {
  return current_tuning().on(Knob::route_in_experts) && tiles_expert_silu_mul_ok(gate, up, x) && logits.dim(1) <= 32 * kRoutedLogitsPerLane;
}

void tiles_routed_expert_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& logits,
                                  const MoeRouting& routing, int32_t appended_id, Tensor& ids, Tensor& weights, Tensor& act) {
  const int k = static_cast<int>(routing.top_k);
  const tiles::ExpertRouting ro{logits.data<float>(),
                                logits.stride(0),
                                static_cast<int>(logits.dim(1)),
                                k,
                                static_cast<int>(logits.dim(0)),
                                appended_id,
                                routing.softmax_first,
                                routing.normalize,
                                ids.data<int32_t>(),
                                weights.data<float>()};
  expert_pairs(x, gate, up, ids, act, &ro, nullptr);
}

void tiles_grouped_expert_silu_mul(const Tensor& x, const ExpertSet& gate, const ExpertSet& up, const Tensor& tasks, Tensor& act) {
  expert_pairs(x, gate, up, tasks, act, nullptr, tasks.data<int32_t>());
}

void tiles_grouped_expert_matvec(const Tensor& x, const ExpertSet& experts, const Tensor& tasks, Tensor& y) {
  expert_tiles(x, experts, nullptr, tasks, y, nullptr, tasks.data<int32_t>());
}

namespace {
// The combine in the down launch (tuning fuse_moe_combine=0: never, for comparisons).
bool combine_in_down() { return current_tuning().on(Knob::fuse_moe_combine); }
}  // namespace

bool tiles_expert_combine_residual_ok(const ExpertSet& down, const Tensor& act, const Tensor& per_rank, const ResidualNorm& r) {
  // At most a block column per row tile, each leaving one sum of squares.
  return combine_in_down() && tiles_experts_ok(down, act) && per_rank.dim(0) >= 2 &&
         residual_fits(r, per_rank.dim(1), per_rank.dim(1) / 16);
}

int64_t tiles_expert_matvec_combine_residual(const Tensor& act, const ExpertSet& down, const Tensor& ids, const Tensor& weights,
                                             const Tensor& shared_logit, Tensor& per_rank, const ResidualNorm& r) {
  const Weight& w = down[0];
  const tiles::ExpertArgs e = expert_args(act, down, nullptr, ids, per_rank, nullptr);
  const tiles::DownCombine c{weights.data<float>(), shared_logit.data<float>(), static_cast<int>(per_rank.dim(0) - 1),
                             tiles::part_counters_workspace(), residual_out(r)};
  const int slots = static_cast<int>(per_rank.dim(0)), group_tiles = w.quant.group_size / 64;
  int64_t count = 0;
  if (w.scales.dtype() == DType::bf16) {
    count = group_tiles == 1 ? tiles::launch_experts_combine<__nv_bfloat16, 1, kExpertDepth, kExpertMinBlocks>(e, slots, c)
                             : tiles::launch_experts_combine<__nv_bfloat16, 2, kExpertDepth, kExpertMinBlocks>(e, slots, c);
  } else {
    count = group_tiles == 1 ? tiles::launch_experts_combine<__half, 1, kExpertDepth, kExpertMinBlocks>(e, slots, c)
                             : tiles::launch_experts_combine<__half, 2, kExpertDepth, kExpertMinBlocks>(e, slots, c);
  }
  check_launch("expert down mat-vec with the MoE combine (tiled)");
  return count;
}

}  // namespace sanctum::ops::cuda
