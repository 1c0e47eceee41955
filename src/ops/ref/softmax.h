#pragma once
#include "tensor/tensor.h"

namespace sanctum::ops::ref {

void softmax(Tensor& x);

}  // namespace sanctum::ops::ref
