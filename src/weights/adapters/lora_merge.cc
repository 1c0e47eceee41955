#include "weights/adapters/lora_merge.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "base/error.h"
#include "base/thread_pool.h"

namespace sanctum {

namespace {

float round_to(float v, DType dtype) {
  switch (dtype) {
    case DType::bf16: return bf16_to_f32(f32_to_bf16(v));
    case DType::f16: return f16_to_f32(f32_to_f16(v));
    default: return v;
  }
}

void store(void* data, DType dtype, int64_t i, float v) {
  switch (dtype) {
    case DType::f32: static_cast<float*>(data)[i] = v; break;
    case DType::bf16: static_cast<uint16_t*>(data)[i] = f32_to_bf16(v); break;
    case DType::f16: static_cast<uint16_t*>(data)[i] = f32_to_f16(v); break;
    default: fail(ErrorKind::internal, "lora merge: store into a non-float tensor");
  }
}

// Span forms with the dtype switch outside the loop: a merge touches every element of a weight.
void round_span(float* x, int64_t n, DType dtype) {
  if (dtype == DType::bf16)
    for (int64_t i = 0; i < n; ++i) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
  else if (dtype == DType::f16)
    for (int64_t i = 0; i < n; ++i) x[i] = f16_to_f32(f32_to_f16(x[i]));
}

void add_span(const void* src, DType dtype, int64_t n, float* x) {
  if (dtype == DType::f32)
    for (int64_t i = 0; i < n; ++i) x[i] += static_cast<const float*>(src)[i];
  else if (dtype == DType::bf16)
    for (int64_t i = 0; i < n; ++i) x[i] += bf16_to_f32(static_cast<const uint16_t*>(src)[i]);
  else
    for (int64_t i = 0; i < n; ++i) x[i] += f16_to_f32(static_cast<const uint16_t*>(src)[i]);
}

void store_span(const float* x, int64_t n, DType dtype, void* dst) {
  if (dtype == DType::f32) std::copy(x, x + n, static_cast<float*>(dst));
  else if (dtype == DType::bf16)
    for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_bf16(x[i]);
  else
    for (int64_t i = 0; i < n; ++i) static_cast<uint16_t*>(dst)[i] = f32_to_f16(x[i]);
}

void check_shape(bool ok, const LoraTarget& t, const std::string& what, const std::string& got) {
  check(ok, ErrorKind::invalid_input,
        what + " is " + got + ", but " + t.file + " tensors '" + t.a_name + "' / '" + t.b_name + "' are for (" +
            (t.experts ? std::to_string(t.experts) + " experts, " : std::string()) + std::to_string(t.out) + " out, " +
            std::to_string(t.in) + " in): the adapter was trained on a different model");
}

// DoRA's row scaling of the adapted rows v (rows [row0, row1) of expert 0): m / ||v||, the norm
// rounded to `norm_dtype` (mlx-lm's fuse takes the norm of the weight in its own dtype).
void dora_scale_rows(const LoraTarget& t, int64_t row0, int64_t row1, int64_t cols, float* v, DType norm_dtype = DType::f32) {
  if (!t.magnitude) return;
  const float* m = t.magnitude.data<float>();
  for (int64_t r = row0; r < row1; ++r) {
    float* row = v + (r - row0) * cols;
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += static_cast<double>(row[c]) * row[c];
    const float norm = round_to(static_cast<float>(std::sqrt(ss)), norm_dtype);
    const float k = norm > 0 ? m[r] / norm : 0.0f;
    for (int64_t c = 0; c < cols; ++c) row[c] *= k;
  }
}

constexpr int64_t kRowsPerTask = 16;

}  // namespace

void lora_delta_rows(const LoraTarget& t, int64_t expert, int64_t row0, int64_t row1, float* out) {
  const float* a = t.a.data<float>() + expert * t.rank * t.in;   // (rank, in)
  const float* b = t.b.data<float>() + expert * t.out * t.rank;  // (out, rank)
  for (int64_t r = row0; r < row1; ++r) {
    float* o = out + (r - row0) * t.in;
    std::fill(o, o + t.in, 0.0f);
    for (int64_t k = 0; k < t.rank; ++k) {
      const float bk = t.scale * b[r * t.rank + k];
      const float* ak = a + k * t.in;
      for (int64_t c = 0; c < t.in; ++c) o[c] += bk * ak[c];
    }
  }
}

Tensor merge_dense(const Tensor& w, const LoraTarget& t, const std::string& what) {
  const int64_t experts = t.experts ? t.experts : 1;
  const bool shape_ok = t.experts ? w.ndim() == 3 && w.dim(0) == t.experts && w.dim(1) == t.out && w.dim(2) == t.in
                                  : w.ndim() == 2 && w.dim(0) == t.out && w.dim(1) == t.in;
  check_shape(shape_ok && is_float(w.dtype()) && w.is_contiguous(), t, what, w.shape_string());
  Tensor out = w.ndim() == 3 ? Tensor::zeros({w.dim(0), w.dim(1), w.dim(2)}, w.dtype()) : Tensor::zeros({w.dim(0), w.dim(1)}, w.dtype());
  const int64_t rows = t.out, cols = t.in;
  compute_pool().parallel_for(experts * ((rows + kRowsPerTask - 1) / kRowsPerTask), 1, [&](int64_t begin, int64_t end) {
    std::vector<float> v(static_cast<size_t>(kRowsPerTask * cols));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t e = task / ((rows + kRowsPerTask - 1) / kRowsPerTask);
      const int64_t r0 = (task % ((rows + kRowsPerTask - 1) / kRowsPerTask)) * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
      lora_delta_rows(t, e, r0, r1, v.data());
      const int64_t base = (e * rows + r0) * cols;
      // As mlx-lm's fuse: the delta rounded to the weight's dtype, then the sum (one rounding more than
      // exact, so the merged weight is the fused model's bit for bit).
      const DType wd = w.dtype();
      const int64_t n = (r1 - r0) * cols;
      const size_t at = static_cast<size_t>(base) * dtype_size(wd);
      round_span(v.data(), n, wd);
      add_span(static_cast<const char*>(w.data<void>()) + at, wd, n, v.data());
      round_span(v.data(), n, wd);
      dora_scale_rows(t, r0, r1, cols, v.data(), wd);
      store_span(v.data(), n, wd, static_cast<char*>(out.data<void>()) + at);
    }
  });
  return out;
}

QuantizedWeight merge_quantized(const QuantizedWeight& w, int bits, int group_size, const LoraTarget& t, const std::string& what) {
  const int64_t experts = t.experts ? t.experts : 1;
  const int64_t rows = t.out, cols = t.in, words = cols * bits / 32, groups = cols / group_size;
  const int nd = t.experts ? 3 : 2;
  auto dims_ok = [&](const Tensor& x, int64_t last) {
    return x.ndim() == nd && x.is_contiguous() && (!t.experts || x.dim(0) == t.experts) && x.dim(nd - 2) == rows && x.dim(nd - 1) == last;
  };
  check_shape(cols % group_size == 0 && dims_ok(w.data, words) && dims_ok(w.scales, groups) && dims_ok(w.biases, groups), t, what,
              w.data.shape_string());
  const DType sd = w.scales.dtype();
  check(is_float(sd) && w.biases.dtype() == sd && w.data.dtype() == DType::u32, ErrorKind::invalid_input,
        what + ": quantized weights need u32 codes and float scales/biases of one dtype");
  // mlx-lm's DoRA fuse scales the weight by an f32 magnitude, so what it requantizes is f32 and so
  // are its scales and biases.
  const DType od = t.magnitude ? DType::f32 : sd;
  QuantizedWeight out;
  if (nd == 3) {
    out.data = Tensor::zeros({experts, rows, words}, DType::u32);
    out.scales = Tensor::zeros({experts, rows, groups}, od);
    out.biases = Tensor::zeros({experts, rows, groups}, od);
  } else {
    out.data = Tensor::zeros({rows, words}, DType::u32);
    out.scales = Tensor::zeros({rows, groups}, od);
    out.biases = Tensor::zeros({rows, groups}, od);
  }
  const size_t ss = dtype_size(sd);
  const int64_t tasks_per_expert = (rows + kRowsPerTask - 1) / kRowsPerTask;
  compute_pool().parallel_for(experts * tasks_per_expert, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> delta(static_cast<size_t>(kRowsPerTask * cols)), row(static_cast<size_t>(cols));
    std::vector<float> scales(static_cast<size_t>(groups)), biases(static_cast<size_t>(groups));
    for (int64_t task = begin; task < end; ++task) {
      const int64_t e = task / tasks_per_expert;
      const int64_t r0 = (task % tasks_per_expert) * kRowsPerTask, r1 = std::min(rows, r0 + kRowsPerTask);
      lora_delta_rows(t, e, r0, r1, delta.data());
      float* v = delta.data();
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t at = e * rows + r;
        affine_dequantize_row(w.data.data<uint32_t>() + at * words, static_cast<const char*>(w.scales.data<void>()) + at * groups * ss,
                              static_cast<const char*>(w.biases.data<void>()) + at * groups * ss, sd, cols, bits, group_size, row.data());
        float* d = v + (r - r0) * cols;
        // mlx-lm's fuse: the dequantized weight and the delta each in the scales' dtype, then their sum.
        round_span(d, cols, sd);
        for (int64_t c = 0; c < cols; ++c) d[c] += row[static_cast<size_t>(c)];
        round_span(d, cols, sd);
      }
      dora_scale_rows(t, r0, r1, cols, v, sd);
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t at = e * rows + r;
        affine_quantize_row(v + (r - r0) * cols, cols, bits, group_size, out.data.data<uint32_t>() + at * words, scales.data(),
                            biases.data());
        for (int64_t g = 0; g < groups; ++g) {
          store(out.scales.data<void>(), od, at * groups + g, scales[static_cast<size_t>(g)]);
          store(out.biases.data<void>(), od, at * groups + g, biases[static_cast<size_t>(g)]);
        }
      }
    }
  });
  return out;
}

void affine_quantize_row(const float* w, int64_t cols, int bits, int group_size, uint32_t* packed, float* scales, float* biases) {
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const int per_word = 32 / bits;
  std::fill(packed, packed + cols / per_word, 0u);
  for (int64_t g = 0; g < cols / group_size; ++g) {
    const float* x = w + g * group_size;
    float lo = std::numeric_limits<float>::infinity(), hi = -lo;
    for (int j = 0; j < group_size; ++j) {
      lo = std::min(lo, x[j]);
      hi = std::max(hi, x[j]);
    }
    // The edge of larger magnitude is represented exactly (code 0): mlx picks the scale's sign so
    // that edge maps to 0 and the other edge to n_bins.
    const bool low_edge = std::abs(lo) > std::abs(hi);
    float scale = std::max((hi - lo) / n_bins, 1e-7f);
    scale = low_edge ? scale : -scale;
    const float edge = low_edge ? lo : hi;
    const float q0 = std::rint(edge / scale);
    float bias = 0;
    if (q0 != 0) {
      scale = edge / q0;
      bias = edge;
    }
    for (int j = 0; j < group_size; ++j) {
      const float q = std::min(std::max(std::rint((x[j] - bias) / scale), 0.0f), n_bins);
      const int64_t c = g * group_size + j;
      packed[c / per_word] |= static_cast<uint32_t>(q) << ((c % per_word) * bits);
    }
    scales[g] = scale;
    biases[g] = bias;
  }
}

void affine_dequantize_row(const uint32_t* packed, const void* scales, const void* biases, DType dtype, int64_t cols, int bits,
                           int group_size, float* out) {
  const int per_word = 32 / bits;
  const uint32_t mask = (1u << bits) - 1;
  for (int64_t g = 0; g < cols / group_size; ++g) {
    const float scale = load_as_f32(scales, dtype, g), bias = load_as_f32(biases, dtype, g);
    float* o = out + g * group_size;
    for (int64_t j = 0; j < group_size; ++j) {
      const int64_t c = g * group_size + j;
      o[j] = scale * static_cast<float>((packed[c / per_word] >> ((c % per_word) * bits)) & mask);
    }
    // mlx computes in the scales' dtype: the product is rounded to it before the bias is added.
    round_span(o, group_size, dtype);
    for (int64_t j = 0; j < group_size; ++j) o[j] += bias;
    round_span(o, group_size, dtype);
  }
}

}  // namespace sanctum
