#pragma once
// Tunings of the tensor-core mat-vec for the perf test to time (matvec_mma_sweep.cu).
#include <string>
#include <vector>

#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::test {

struct MmaVariant {
  int row_tiles = 1, depth = 2, min_blocks = 3;
  bool staged_x = false;
  std::string name() const {
    return "rt" + std::to_string(row_tiles) + " depth" + std::to_string(depth) + " blocks" + std::to_string(min_blocks) +
           (staged_x ? " staged-x" : "");
  }
};

std::vector<MmaVariant> mma_variants();
// y = x · wᵀ with the variant (4-bit, bf16 scales); false where it does not apply (staged x too big).
bool run_mma_variant(const MmaVariant& v, const Weight& w, const Tensor& x, Tensor& y);

}  // namespace sanctum::test
