#include "tensor/weight.h"

#include "base/error.h"

namespace sanctum {

void validate_weight(const Weight& w) {
  const std::string who = "weight '" + w.name + "'";
  check(w.data.ndim() == 2, ErrorKind::invalid_input, who + ": expected a 2-D tensor, got " + w.data.shape_string());
  if (!w.quantized()) {
    check(is_float(w.data.dtype()), ErrorKind::unsupported, who + ": dense weights must be f32, bf16 or f16, got " + w.data.shape_string());
    check(w.rows == w.data.dim(0) && w.cols == w.data.dim(1), ErrorKind::invalid_input, who + ": shape mismatch");
    return;
  }
  const int bits = w.quant.bits, g = w.quant.group_size;
  check(bits == 4 || bits == 8, ErrorKind::unsupported, who + ": only 4- and 8-bit quantization is supported, got " + std::to_string(bits));
  check(g == 32 || g == 64 || g == 128, ErrorKind::unsupported, who + ": group size must be 32, 64 or 128, got " + std::to_string(g));
  check(w.data.dtype() == DType::u32, ErrorKind::invalid_input, who + ": packed weights must be u32, got " + w.data.shape_string());
  check(w.cols % g == 0, ErrorKind::invalid_input, who + ": in-features " + std::to_string(w.cols) + " not a multiple of group size");
  check(w.data.dim(0) == w.rows && w.data.dim(1) * 32 == w.cols * bits, ErrorKind::invalid_input,
        who + ": packed shape " + w.data.shape_string() + " does not match (" + std::to_string(w.rows) + ", " + std::to_string(w.cols) +
            ")");
  for (const Tensor* t : {&w.scales, &w.biases}) {
    check(t->ndim() == 2 && t->dim(0) == w.rows && t->dim(1) == w.cols / g, ErrorKind::invalid_input,
          who + ": scales/biases shape " + t->shape_string() + " does not match groups");
    check(is_float(t->dtype()), ErrorKind::unsupported, who + ": scales/biases must be float, got " + t->shape_string());
  }
  check(w.scales.dtype() == w.biases.dtype(), ErrorKind::invalid_input, who + ": scales and biases differ in dtype");
}

Weight dense_weight(Tensor data, std::string name) {
  Weight w;
  w.rows = data.ndim() == 2 ? data.dim(0) : 0;
  w.cols = data.ndim() == 2 ? data.dim(1) : 0;
  w.data = std::move(data);
  w.name = std::move(name);
  validate_weight(w);
  return w;
}

}  // namespace sanctum
