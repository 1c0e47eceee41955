#include "ops/sampling.h"

#include <string>

#include "ops/cpu/kernels.h"
#include "ops/cuda/sampling.cuh"
#include "ops/op_util.h"
#include "ops/ref/sampling.h"

namespace sanctum::ops {

namespace {
Device check_rows(const char* op, const Tensor& logits, const Tensor& ids) {
  detail::require_defined(op, "logits", logits);
  detail::require_defined(op, "ids", ids);
  const Device device = detail::require_one_device(op, {{"logits", &logits}, {"ids", &ids}});
  detail::require_dtype(op, "logits", logits, DType::f32);
  detail::require_dtype(op, "ids", ids, DType::i32);
  SANCTUM_REQUIRE(logits.ndim() == 2 && logits.dim(1) > 0, op, "logits must be (rows, vocab) with vocab > 0, got " + logits.shape_string());
  detail::require_inner_contiguous(op, "logits", logits);
  SANCTUM_REQUIRE(ids.ndim() == 1 && ids.dim(0) == logits.dim(0) && (ids.dim(0) <= 1 || ids.stride(0) == 1), op,
                  "ids must be a contiguous (rows) vector, rows = " + std::to_string(logits.dim(0)) + ", got " + ids.shape_string());
  SANCTUM_REQUIRE(logits.dim(1) <= INT32_MAX, op, "vocab must fit i32 ids");
  return device;
}

void check_allowed(const char* op, const Tensor& logits, const Tensor& allowed, Device device) {
  if (!allowed) return;
  SANCTUM_REQUIRE(allowed.device() == device, op, "allowed must be on the logits' device");
  detail::require_dtype(op, "allowed", allowed, DType::u32);
  SANCTUM_REQUIRE(allowed.ndim() == 2 && allowed.dim(0) == logits.dim(0) && allowed.dim(1) > 0 && allowed.is_contiguous(), op,
                  "allowed must be a contiguous (rows, words) mask, rows = " + std::to_string(logits.dim(0)) + ", got " +
                      allowed.shape_string());
}
}  // namespace

void argmax_rows(const Tensor& logits, Tensor& ids, const Tensor& allowed) {
  const Device device = check_rows("argmax_rows", logits, ids);
  check_allowed("argmax_rows", logits, allowed, device);
  if (logits.dim(0) == 0) return;
  if (device == Device::cuda) return cuda::argmax_rows(logits, ids, allowed);
  cpu::argmax_rows(logits, ids, allowed);
}

int32_t argmax_row(std::span<const float> logits) { return cpu::argmax_row(logits); }

void sample_rows(const Tensor& logits, const RowSampling& s, std::span<const double> uniforms, Tensor& ids, const Tensor& allowed) {
  constexpr const char* kOp = "sample_rows";
  const Device device = check_rows(kOp, logits, ids);
  check_allowed(kOp, logits, allowed, device);
  SANCTUM_REQUIRE(s.temperature > 0.0f, kOp, "temperature must be > 0 (use argmax_rows for greedy)");
  SANCTUM_REQUIRE(s.top_p > 0.0f && s.top_p <= 1.0f, kOp, "top_p must be in (0, 1]");
  SANCTUM_REQUIRE(s.top_k >= 0, kOp, "top_k must be >= 0");
  SANCTUM_REQUIRE(s.min_p >= 0.0f && s.min_p <= 1.0f, kOp, "min_p must be in [0, 1]");
  SANCTUM_REQUIRE(static_cast<int64_t>(uniforms.size()) == logits.dim(0), kOp, "one uniform per row");
  SANCTUM_REQUIRE(logits.dim(0) <= kMaxSampleRows, kOp, "at most " + std::to_string(kMaxSampleRows) + " rows per call");
  for (double u : uniforms) SANCTUM_REQUIRE(u >= 0.0 && u < 1.0, kOp, "uniforms must be in [0, 1)");
  if (logits.dim(0) == 0) return;
  if (device == Device::cuda) return cuda::sample_rows(logits, s, uniforms, ids, allowed);
  ref::sample_rows(logits, s, uniforms, ids, allowed);
}

void feed_pick(const Tensor& picked, Tensor& step) {
  constexpr const char* kOp = "feed_pick";
  detail::require_defined(kOp, "picked", picked);
  detail::require_defined(kOp, "step", step);
  const Device device = detail::require_one_device(kOp, {{"picked", &picked}, {"step", &step}});
  detail::require_dtype(kOp, "picked", picked, DType::i32);
  detail::require_dtype(kOp, "step", step, DType::i32);
  SANCTUM_REQUIRE(picked.ndim() == 1 && picked.dim(0) >= 1, kOp,
                  "picked must be a vector of one or more ids, got " + picked.shape_string());
  SANCTUM_REQUIRE(step.ndim() == 1 && step.dim(0) == 2 && step.stride(0) == 1, kOp,
                  "step must be a contiguous (2) vector, got " + step.shape_string());
  if (device == Device::cuda) return cuda::feed_pick(picked, step);
  int32_t* s = step.data<int32_t>();
  s[0] = picked.data<int32_t>()[0];
  s[1] += 1;
}

}  // namespace sanctum::ops
