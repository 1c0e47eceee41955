#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops {

// In place, per row of the last dim, f32, max-subtracted.
void softmax(Tensor& x);

}  // namespace sanctum::ops
