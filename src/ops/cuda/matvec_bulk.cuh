#pragma once
// The tiled 4-bit mat-vec (matvec_tiles.cuh) fed by bulk copies into shared memory (sm_90).
//
// The register kernel holds the tiles in flight in its warps' registers: two row tiles, two deep, at
// 128 registers and two blocks per multiprocessor, about 32 KB in flight per multiprocessor, and
// its warps wait on their loads (L1TEX scoreboard stalls were a third of them in ncu). Here one
// producer warp per block asks the copy engine for a whole step of the block's tiles at a time
// (one bulk copy per row tile for codes, scales and biases: KS x DEPTH contiguous tiles) into a
// ring of STAGES steps in shared memory, and the eight consumer warps read them from there: the
// bytes in flight are the ring's, not the registers', and the consumers hold no load.
//
// A full barrier per stage counts the copied bytes in (the producer arms it with the step's size);
// an empty barrier per stage counts the consumer warps out before the producer refills it. Each
// consumer warp takes the register kernel's tiles in the register kernel's order and does the same
// arithmetic (tile_dot, store_sums), so the two kernels give the same bits for the same KS, RT and
// column parts.
//
// Launched early: the producer's copies need nothing from the kernel before, so the first STAGES
// steps stream in while that kernel finishes; the consumers wait for it before they read x.
#include "ops/cuda/matvec_tiles.cuh"

namespace sanctum::ops::cuda::tiles {

template <int KS, int RT, int GT, int DEPTH, int STAGES>
struct BulkRing {
  static_assert((DEPTH * KS) % GT == 0, "a step must cover whole scale groups");
  static constexpr int kRowTiles = kWarps / KS * RT;  // per block
  static_assert(kRowTiles <= 32, "one producer lane per row tile");
  static constexpr int kStepTiles = KS * DEPTH;  // column tiles per row tile per step
  static constexpr int kStepGroups = kStepTiles / GT;
  static constexpr int kCodeBytes = kRowTiles * kStepTiles * 512;
  static constexpr int kGroupBytes = kRowTiles * kStepGroups * 32;  // scales; biases alike
  static constexpr int kStageBytes = kCodeBytes + 2 * kGroupBytes;
  static constexpr int kBarrierBytes = (2 * STAGES * 8 + 127) / 128 * 128;  // 2 STAGES mbarriers, then the stages 128-aligned
  static constexpr int kSmemBytes = kBarrierBytes + STAGES * kStageBytes;
};

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
__device__ __forceinline__ uint32_t smem_address(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ void barrier_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(count) : "memory");
}
__device__ __forceinline__ void barrier_arm(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void barrier_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}
__device__ __forceinline__ void barrier_wait(uint64_t* bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(smem_address(bar)), "r"(parity)
        : "memory");
  } while (!done);
}
// Weights are read once per step: first out of L2.
__device__ __forceinline__ uint64_t evict_first_policy() {
  uint64_t policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}
__device__ __forceinline__ void bulk_copy(void* dst, const void* src, uint32_t bytes, uint64_t* bar, uint64_t policy) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
                   smem_address(dst)),
               "l"(src), "r"(bytes), "r"(smem_address(bar)), "l"(policy)
               : "memory");
}
#endif

// Grid as the register kernel's (blockIdx.x: kWarps / KS groups of RT row tiles; blockIdx.y: column
// part); kWarps consumer warps and one producer warp.
template <class S, int KS, int RT, int GT, int DEPTH, int STAGES, int MINB>
__global__ void __launch_bounds__((kWarps + 1) * 32, MINB) bulk_matvec(Args a) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  using Ring = BulkRing<KS, RT, GT, DEPTH, STAGES>;
  extern __shared__ __align__(128) unsigned char smem[];
  uint64_t* full = reinterpret_cast<uint64_t*>(smem);
  uint64_t* empty = full + STAGES;
  unsigned char* ring = smem + Ring::kBarrierBytes;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int64_t block = blockIdx.x, first_rt = block * Ring::kRowTiles;
  const int part = blockIdx.y, kt0 = part * a.part_tiles;
  const int tiles = min(a.part_tiles, a.k_tiles - kt0), steps = (tiles + Ring::kStepTiles - 1) / Ring::kStepTiles;
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      barrier_init(&full[s], 1);
      barrier_init(&empty[s], kWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  allow_next_early();

  float acc[RT][4];
#pragma unroll
  for (int r = 0; r < RT; ++r)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[r][i] = 0.0f;

  if (warp == kWarps) {
    // Producer: lane j copies row tile j of the block (past the end: the last row tile, not written).
    const int j = lane;
    const int64_t rt = first_rt + j < a.row_tiles ? first_rt + j : a.row_tiles - 1;
    const uint4* codes = a.codes + (rt * a.k_tiles + kt0) * 32;
    const uint32_t* scales = a.scales + (rt * a.groups + kt0 / GT) * 8;
    const uint32_t* biases = a.biases + (rt * a.groups + kt0 / GT) * 8;
    const uint64_t policy = evict_first_policy();
    for (int i = 0; i < steps; ++i) {
      const int s = i % STAGES;
      if (i >= STAGES) barrier_wait(&empty[s], ((i / STAGES) - 1) & 1);
      const int step_tiles = min(Ring::kStepTiles, tiles - i * Ring::kStepTiles), step_groups = (step_tiles + GT - 1) / GT;
      if (lane == 0) barrier_arm(&full[s], Ring::kRowTiles * (step_tiles * 512 + 2 * step_groups * 32));
      __syncwarp();
      if (j < Ring::kRowTiles) {
        unsigned char* stage = ring + s * Ring::kStageBytes;
        bulk_copy(stage + j * Ring::kStepTiles * 512, codes + i * Ring::kStepTiles * 32, step_tiles * 512, &full[s], policy);
        bulk_copy(stage + Ring::kCodeBytes + j * Ring::kStepGroups * 32, scales + i * Ring::kStepGroups * 8, step_groups * 32, &full[s], policy);
        bulk_copy(stage + Ring::kCodeBytes + Ring::kGroupBytes + j * Ring::kStepGroups * 32, biases + i * Ring::kStepGroups * 8,
                  step_groups * 32, &full[s], policy);
      }
    }
  } else {
    const int g = lane >> 2, t = lane & 3, slice = warp % KS, group = warp / KS;
    wait_for_previous();  // x comes from the kernel before
    const float* xp = a.x + (g < a.n ? g : 0) * a.x_stride + 16 * t + (kt0 + slice) * 64;
    for (int i = 0; i < steps; ++i) {
      const int s = i % STAGES;
      const int step_tiles = min(Ring::kStepTiles, tiles - i * Ring::kStepTiles);
      XFragment x[DEPTH];  // x first: its loads overlap the wait for the stage
#pragma unroll
      for (int d = 0; d < DEPTH; ++d)
        if (d * KS + slice < step_tiles) x[d] = x_fragment(xp + (i * Ring::kStepTiles + d * KS) * 64);
      barrier_wait(&full[s], (i / STAGES) & 1);
      const unsigned char* stage = ring + s * Ring::kStageBytes;
#pragma unroll
      for (int d = 0; d < DEPTH; ++d) {
        const int tile = d * KS + slice;
        if (tile >= step_tiles) break;
        uint4 c[RT];
        uint32_t sc[RT], bi[RT];
#pragma unroll
        for (int r = 0; r < RT; ++r) {
          const int j = group * RT + r;
          c[r] = reinterpret_cast<const uint4*>(stage + (j * Ring::kStepTiles + tile) * 512)[lane];
          sc[r] = reinterpret_cast<const uint32_t*>(stage + Ring::kCodeBytes + (j * Ring::kStepGroups + tile / GT) * 32)[g];
          bi[r] = reinterpret_cast<const uint32_t*>(stage + Ring::kCodeBytes + Ring::kGroupBytes + (j * Ring::kStepGroups + tile / GT) * 32)[g];
        }
        tile_dot<S, RT>(c, sc, bi, x[d], acc);
      }
      __syncwarp();
      if (lane == 0) barrier_arrive(&empty[s]);
    }
  }
  // Every copy has landed and been read: the ring holds the warps' partial sums now.
  static_assert(kWarps * RT * 4 * 32 * 4 <= STAGES * Ring::kStageBytes, "the partial sums fit the ring");
  __syncthreads();
  store_sums<KS, RT>(a, acc, block, part, first_rt + (warp / KS) * RT, warp < kWarps, reinterpret_cast<float (*)[RT][4][32]>(ring));
#endif
}

// Whether this GPU has the bulk copies (sm_90 and later).
inline bool bulk_copies_available() {
  static const bool available = [] {
    int device = 0, major = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    check_cuda(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "compute capability");
    return major >= 9;
  }();
  return available;
}

template <class S, int KS, int RT, int GT, int DEPTH, int STAGES, int MINB>
void launch_bulk(Args a, int max_parts = 1) {
  using Ring = BulkRing<KS, RT, GT, DEPTH, STAGES>;
  const auto kernel = bulk_matvec<S, KS, RT, GT, DEPTH, STAGES, MINB>;
  constexpr int kThreads = (kWarps + 1) * 32;
  static const int per_multiprocessor = [&] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Ring::kSmemBytes), "mat-vec shared memory");
    return resident_blocks(kernel, kThreads, Ring::kSmemBytes);
  }();
  const int64_t blocks = (a.row_tiles + Ring::kRowTiles - 1) / Ring::kRowTiles;
  if (max_parts > 1) a = with_column_parts(a, blocks, per_multiprocessor, KS, GT, max_parts);
  launch_early(kernel, dim3(static_cast<unsigned>(blocks), static_cast<unsigned>(a.parts)), dim3(kThreads), Ring::kSmemBytes, a);
}

// A step's depth for KS warps per row group: DEPTH, or more where KS x DEPTH tiles would split a
// scale group (one warp, groups of two tiles).
template <int KS, int GT, int DEPTH>
constexpr int step_depth() {
  return (KS * DEPTH) % GT == 0 ? DEPTH : DEPTH * GT;
}

template <class S, int RT, int GT, int DEPTH, int STAGES, int MINB>
void launch_bulk_split(const Args& a, int max_parts = kMaxParts) {
  switch (column_split(a.row_tiles, RT, a.k_tiles)) {
    case 1: return launch_bulk<S, 1, RT, GT, step_depth<1, GT, DEPTH>(), STAGES, MINB>(a, max_parts);
    case 2: return launch_bulk<S, 2, RT, GT, DEPTH, STAGES, MINB>(a, max_parts);
    case 4: return launch_bulk<S, 4, RT, GT, DEPTH, STAGES, MINB>(a, max_parts);
    default: return launch_bulk<S, 8, RT, GT, DEPTH, STAGES, MINB>(a, max_parts);
  }
}

}  // namespace sanctum::ops::cuda::tiles
