#include "model/blocks/stacked_linear.h"

#include <vector>

#include "base/tuning.h"
#include "ops/matmul.h"

namespace sanctum {

namespace {

// `rows` zero rows in w's format (row layout).
Weight zero_rows_like(const Weight& w, int64_t rows) {
  Weight z;
  z.name = w.name + " (padding)";
  z.rows = rows;
  z.cols = w.cols;
  z.quant = w.quant;
  z.data = Tensor::zeros({rows, w.data.dim(1)}, w.data.dtype(), w.data.device());
  if (w.quantized()) {
    z.scales = Tensor::zeros({rows, w.scales.dim(1)}, w.scales.dtype(), w.scales.device());
    z.biases = Tensor::zeros({rows, w.biases.dim(1)}, w.biases.dtype(), w.biases.device());
  }
  return z;
}

}  // namespace

Weight stack_linears(Checkpoint& ckpt, std::initializer_list<Weight*> parts, const std::string& name, int64_t row_multiple) {
  std::vector<const Weight*> list(parts.begin(), parts.end());
  if (list.empty() || list[0]->data.device() != Device::cuda || !ckpt.tuning().on(Knob::stack_weights) || !ops::can_stack_rows(list))
    return Weight{};
  int64_t rows = 0;
  for (const Weight* w : list) rows += w->rows;
  Weight padding;
  if (rows % row_multiple != 0 && list[0]->layout == WeightLayout::rows) {
    padding = zero_rows_like(*list[0], row_multiple - rows % row_multiple);
    list.push_back(&padding);
  }
  Weight stacked = ops::stack_rows(list, name);
  for (Weight* w : parts) {
    for (const char* suffix : {".weight", ".scales", ".biases"}) ckpt.release_upload(w->name + suffix);
    *w = Weight{};
  }
  return stacked;
}

}  // namespace sanctum
