#pragma once
#include <span>
#include <string>
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops {

// y = x · wᵀ.  x: (n, k) f32, rows may be strided; w: logical (m, k), dense or MLX-quantized;
// y: (n, m) f32 (or bf16 where matmul_output_dtype allows it), preallocated, rows may be strided.
// n == 1 takes the mat-vec path.
// Accumulates in f32; the reduction order over k is fixed, so a row's result does not depend on n.
void matmul(const Tensor& x, const Weight& w, Tensor& y);

// act (n, m / 2) = silu(x · gateᵀ) * (x · upᵀ) for a weight w of m rows stacked as gate (rows
// 0 .. m/2) then up, in one pass over w with no (n, m) intermediate: where matmul_silu_mul_ok says a
// kernel does it (on a GPU, the tiled mat-vec for decode-sized x in the bf16 precision mode). The
// same bits as matmul into (n, m) followed by silu_mul on its two halves.
bool matmul_silu_mul_ok(const Weight& gate_up, const Tensor& x);
void matmul_silu_mul(const Tensor& x, const Weight& gate_up, Tensor& act);

// The element type in which matmul(x, w, y) for `rows` rows on `device` takes x without a conversion
// pass of its own: bf16 where it would round x to bf16 anyway (the GPU's tensor-core GEMM in the fast
// precision mode), else f32. A producer that writes x in that type (e.g. silu_mul) saves a pass over
// it, with the same numbers; matmul accepts bf16 x only there.
DType matmul_input_dtype(const Weight& w, int64_t rows, Device device);

// The element type matmul(x, w, y) for `rows` rows on `device` may also write y in: bf16 where the
// tensor-core GEMM computes it (the GPU's fast precision mode at more than a mat-vec's rows), which
// then rounds each f32 sum once on its way out, else f32. For outputs read once by a consumer that
// takes bf16 (silu_mul): a prompt's stacked gate/up output is the largest activation of a forward,
// and this halves its bytes written and read. Tuning gemm_bf16_out=0: f32 only.
DType matmul_output_dtype(const Weight& w, int64_t rows, Device device);

// Optional one-time repack of w into a kernel-friendly layout (stored in w.packed). Must not change
// the numbers; a no-op where the backend reads the checkpoint layout directly. With
// MatmulPrecision::int8 chosen before the call, a quantized CPU weight is copied into the layout the
// int8 kernels read (cpu/int8_weight.h) and the checkpoint's mapped pages of it released, so the
// resident set does not grow; other modes still read the checkpoint (faulted in again from the file).
// With MatmulPrecision::bf16 chosen before the call, a 4-bit GPU weight is reordered in place for the
// tensor-core mat-vec (WeightLayout::tiles, cuda/matvec_tiles.cuh), which every GPU reader follows.
void prepare_weight(Weight& w);

// Weights that read the same input, stacked into one of their summed rows (in order), so that one
// pass over x computes them all: on a GPU, where each small mat-vec is a launch that waits on memory
// latency, four projections cost about one. They stack when they agree in columns, format (dtype,
// bits, group size, scale dtype, layout), device and contiguity; the result is a new allocation.
bool can_stack_rows(std::span<const Weight* const> parts);
Weight stack_rows(std::span<const Weight* const> parts, std::string name);

}  // namespace sanctum::ops
