#include "ops/ref/embedding.h"

#include "ops/op_util.h"
#include "ops/ref/matmul.h"

namespace sanctum::ops::ref {

void embedding(const Weight& table, std::span<const int32_t> ids, Tensor& out) {
  for (size_t i = 0; i < ids.size(); ++i) {
    float* o = detail::row_ptr<float>(out, static_cast<int64_t>(i));
    for (int64_t c = 0; c < table.cols; ++c) o[c] = weight_at(table, ids[i], c);
  }
}

}  // namespace sanctum::ops::ref
