#pragma once
// Process-wide precision of quantized matmuls (ops::matmul with an MLX-quantized weight).
//   f32  (the library's default): activations stay f32; exact against ops::ref::matmul up to f32
//         summation.
//   int8: each x row is quantized per weight group (symmetric int8, one f32 scale per group) and
//         multiplied with the integer weight codes (AVX-512 VNNI where the CPU has it). Faster,
//         approximate: see matmul_int8.cc for the numerics and tests/ops/matmul_int8_test.cc for
//         the error bound. Dense weights are unaffected. The command-line tools' CPU default where
//         the CPU has VNNI (default_cpu_matmul_precision).
//   bf16: on the GPU, matmuls over more than a few rows (prefill) run on bf16 tensor cores (weights
//         dequantized to bf16, activations rounded to bf16, f32 accumulation); decode mat-vecs stay
//         f32. The CPU computes bf16 like f32. The GPU default when nothing is set.
// On the CPU either mode gives each output row the same bits whatever the batch size n or thread count.
// Either non-f32 mode also lets the CPU's chunked GatedDeltaNet prefill run its products with bf16
// operands and f32 accumulation where the CPU has AVX512_BF16 (ops/cpu/gated_delta_chunked.cc).
#include <string_view>

namespace sanctum::ops {

enum class MatmulPrecision { f32, int8, bf16 };

// Applies to every later ops::matmul call, on any thread.
void set_matmul_precision(MatmulPrecision precision);
// The current setting. Before any set_matmul_precision call it comes from the environment
// variable SANCTUM_MATMUL_PRECISION ("f32" or "int8"; unset means f32), read once.
MatmulPrecision matmul_precision();

const char* matmul_precision_name(MatmulPrecision precision);
// True once set_matmul_precision was called or the environment names a precision.
bool matmul_precision_chosen();
// "f32", "int8" or "bf16"; throws Error(invalid_argument) naming the accepted values otherwise.
MatmulPrecision parse_matmul_precision(std::string_view name);

// What the command-line tools run on the CPU when neither --matmul-precision nor the environment
// chooses: int8 where this CPU has the VNNI int8 kernels (2-4x f32's speed at a quality cost measured
// in bench/RESULTS.md, "int8 activations: quality"), f32 elsewhere (the portable int8 loops are no
// faster than f32 there).
MatmulPrecision default_cpu_matmul_precision();

}  // namespace sanctum::ops
