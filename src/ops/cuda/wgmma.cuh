#pragma once
// Hopper's warpgroup tensor-core MMA (wgmma, sm_90a only) and the bulk copies that feed it: the building blocks of the prefill GEMM
// over 4-bit tiled weights (gemm_tiles.cu) and of the Hopper flash attention (attention_flash_wgmma.cu). Compiled where
// __CUDA_ARCH_FEAT_SM90_ALL is defined; callers keep other targets off these paths.
//
// A warpgroup is 4 consecutive warps. m64n128k16 with A from registers: warp w of the group holds
// rows 16 w .. 16 w + 15 of A in the m16n8k16 fragment layout (tensor_core.cuh), and D (64 x 128,
// f32) as 16 n8 blocks: d[4 j + e] is (row g, column 8 j + 2 t + e), d[4 j + 2 + e] row g + 8.
// B (16 x 128) is read from shared memory through a descriptor.
#include <cstdint>

namespace sanctum::ops::cuda::wg {

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define SANCTUM_HAS_WGMMA 1
#else
#define SANCTUM_HAS_WGMMA 0
#endif

// Descriptor of a K-major operand tile in shared memory with the 128-byte swizzle: rows of 64 bf16
// (128 bytes), 16-byte chunk c of row r stored at chunk c ^ (r % 8), 8-row groups 1,024 bytes apart,
// the tile 1,024-byte aligned. The k16 slice s of the 64 columns starts 32 s bytes in.
__device__ __forceinline__ uint64_t swizzled_k_major(uint32_t shared_address) {
  return static_cast<uint64_t>((shared_address & 0x3FFFF) >> 4) | (uint64_t{1} << 16) | (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

// Descriptor of an MN-major operand tile (B as K x N with N contiguous, so the MMA reads it transposed)
// with the same 128-byte swizzle: rows along K of 64 bf16 of N, 8-row groups 1,024 bytes apart along K,
// and the next 64 columns of N `n_block_bytes` further on.
__device__ __forceinline__ uint64_t swizzled_mn_major(uint32_t shared_address, uint32_t n_block_bytes) {
  return static_cast<uint64_t>((shared_address & 0x3FFFF) >> 4) | (static_cast<uint64_t>(n_block_bytes >> 4) << 16) |
         (uint64_t{1024 >> 4} << 32) | (uint64_t{1} << 62);
}

#if SANCTUM_HAS_WGMMA
// Orders this thread's earlier register writes (A fragments, accumulators) before the next MMAs.
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
// Waits until at most N committed groups of MMAs are still running.
template <int N>
__device__ __forceinline__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
}
// Generic-proxy writes to shared memory (stores, barrier initialisation) made visible to the async proxy.
__device__ __forceinline__ void fence_shared_for_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// Shared-memory barriers that count bytes (mbarrier) and the bulk copy that fills them: a 1-D copy of
// global memory into shared memory through the async proxy, so the MMAs may read it with no proxy
// fence once the barrier's phase completes.
__device__ __forceinline__ void barrier_init(uint32_t bar, int arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}
// One arrival that also announces `bytes` to come, then the copy that delivers them.
__device__ __forceinline__ void bulk_copy(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst), "l"(src), "r"(bytes),
               "r"(bar)
               : "memory");
}
// Waits until the barrier's phase of this parity has completed.
__device__ __forceinline__ void barrier_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
}

// Pins registers at this point of the program for the compiler: after the wait that ends an MMA, what
// the MMA read or wrote stays in place until here; before a fence, what the next MMAs read is made by
// here. Any instruction that writes an MMA's registers between its fence and its wait makes ptxas
// serialize every MMA of the kernel (warning C7513/C7514).
template <int N>
__device__ __forceinline__ void hold(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void hold(uint32_t (&r)[N][4]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
}

// d (64 x 128) += a (64 x 16, bf16 fragments) · b (16 x 128, bf16, descriptor), asynchronously; B is
// K-major (swizzled_k_major) unless MN_MAJOR_B (swizzled_mn_major).
template <int MN_MAJOR_B = 0>
__device__ __forceinline__ void mma_m64n128k16(float (&d)[64], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
        "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]),
        "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]),
        "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "n"(1), "n"(MN_MAJOR_B));
}

// d (64 x 64) += a (64 x 16, bf16 fragments) · b (16 x 64, bf16, K-major descriptor), asynchronously;
// d[4 j + e] is (row g, column 8 j + 2 t + e), d[4 j + 2 + e] row g + 8, as for n128.
__device__ __forceinline__ void mma_m64n64k16(float (&d)[32], const uint32_t (&a)[4], uint64_t desc) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]),
        "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]),
        "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]),
        "+f"(d[31])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "n"(1));
}
#endif

// This GPU runs the wgmma kernels: an sm_90 device, and the build made sm_90a code (a probe kernel
// reports which code the driver loaded). The first call waits for the device; later ones are free.
bool wgmma_runs();

}  // namespace sanctum::ops::cuda::wg
