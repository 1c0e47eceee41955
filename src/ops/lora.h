#pragma once
// The unmerged LoRA term of one adapter target over some rows: y += scale · (x · Aᵀ) · Bᵀ, added
// after the base projection y = x · Wᵀ, which stays as the checkpoint has it.
#include "tensor/tensor.h"

namespace sanctum::ops {

// x (n, in) f32 or bf16, a (rank, in) f32, b (out, rank) f32, y (n, out) f32; rows of x and y may be
// strided (views of a batch's rows or of a stacked projection's columns). Row r of y gains
// scale · Σ_k b[j, k] · (Σ_i a[k, i] · x[r, i]): the rank-sized product is formed first, as a LoRA
// layer computes it. CPU only: a GPU tensor raises unsupported.
void lora_add(const Tensor& x, const Tensor& a, const Tensor& b, float scale, Tensor& y);

}  // namespace sanctum::ops
