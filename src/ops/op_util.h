#pragma once
// Helpers shared by the op front ends (argument checks) and the backends (row addressing).
// Internal to src/ops: model code includes the op headers, not this one.
#include <cstdint>
#include <initializer_list>
#include <string>
#include <utility>

#include "base/error.h"
#include "ops/positions.h"
#include "tensor/tensor.h"
#include "tensor/weight.h"

namespace sanctum::ops::detail {

using Named = std::pair<const char*, const Tensor*>;

// "[op] message"; kind defaults to invalid_argument.
[[noreturn]] inline void require_failed(const char* op, const std::string& message, ErrorKind kind = ErrorKind::invalid_argument) {
  throw Error(kind, std::string("[") + op + "] " + message);
}
// Throws "[op] message" unless condition holds; the message is built only on failure, since ops run
// thousands of times per token on a GPU, where the host's argument checks are part of every step.
#define SANCTUM_REQUIRE(condition, ...)                                    \
  do {                                                                     \
    if (!(condition)) ::sanctum::ops::detail::require_failed(__VA_ARGS__); \
  } while (0)

// Every defined tensor must be on one device, which is returned (cpu when none is defined). Names
// the first tensor on another device: ops never move data between devices behind the caller's back.
inline Device require_one_device(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> tensors) {
  const char* first = nullptr;
  Device device = Device::cpu;
  for (const auto& [name, t] : tensors) {
    if (!*t) continue;
    if (!first) {
      first = name;
      device = t->device();
    } else if (t->device() != device) {
      throw Error(ErrorKind::unsupported, std::string("[") + op + "] " + name + " is on " + device_name(t->device()) + " but " + first +
                                              " is on " + device_name(device) + " (move both to one device)");
    }
  }
  return device;
}

inline void require_defined(const char* op, const char* name, const Tensor& t) {
  SANCTUM_REQUIRE(static_cast<bool>(t), op, std::string(name) + " is an empty tensor");
}

inline void require_dtype(const char* op, const char* name, const Tensor& t, DType dtype) {
  SANCTUM_REQUIRE(t.dtype() == dtype, op, std::string(name) + " must be " + dtype_name(dtype) + ", got " + t.shape_string(),
                  ErrorKind::unsupported);
}

inline void require_float(const char* op, const char* name, const Tensor& t) {
  SANCTUM_REQUIRE(is_float(t.dtype()), op, std::string(name) + " must be f32, bf16 or f16, got " + t.shape_string(),
                  ErrorKind::unsupported);
}

// The last dim must be contiguous (stride 1); leading dims may have any stride.
inline void require_inner_contiguous(const char* op, const char* name, const Tensor& t) {
  SANCTUM_REQUIRE(t.ndim() >= 1 && (t.dim(-1) <= 1 || t.stride(-1) == 1), op,
                  std::string(name) + " needs a contiguous last dim, got " + t.shape_string());
}

inline bool same_shape(const Tensor& a, const Tensor& b) {
  if (a.ndim() != b.ndim()) return false;
  for (int i = 0; i < a.ndim(); ++i)
    if (a.dim(i) != b.dim(i)) return false;
  return true;
}

// Product of all dims but the last (1 for a 1-D tensor).
inline int64_t outer_rows(const Tensor& t) {
  int64_t n = 1;
  for (int i = 0; i + 1 < t.ndim(); ++i) n *= t.dim(i);
  return n;
}

// Element offset of row r (row-major over the leading dims), honouring their strides.
inline int64_t row_offset(const Tensor& t, int64_t r) {
  int64_t offset = 0;
  for (int i = t.ndim() - 2; i >= 0; --i) {
    const int64_t d = t.dim(i);
    offset += (r % d) * t.stride(i);
    r /= d;
  }
  return offset;
}

template <class T>
T* row_ptr(const Tensor& t, int64_t r) {
  return t.data<T>() + row_offset(t, r);
}

inline void* row_raw(const Tensor& t, int64_t r) {
  return static_cast<char*>(t.raw()) + row_offset(t, r) * static_cast<int64_t>(dtype_size(t.dtype()));
}

// positions.device (when set) must mirror positions.host on the op's device.
inline void require_device_positions(const char* op, const Positions& p, Device device) {
  SANCTUM_REQUIRE(*p.device && p.device->dtype() == DType::i32 && p.device->numel() == p.size() && p.device->is_contiguous(), op,
                  "device positions must be a contiguous i32 tensor of " + std::to_string(p.size()) + " values");
  SANCTUM_REQUIRE(p.device->device() == device, op, "device positions live on another device than the tensors");
}

// Checks a weight (validate_weight) and rewrites its error with the op name.
inline void require_weight(const char* op, const Weight& w) {
  try {
    validate_weight(w);
  } catch (const Error& e) {
    throw Error(e.kind(), std::string("[") + op + "] " + e.what());
  }
  require_one_device(op, {{"weight data", &w.data}, {"weight scales", &w.scales}, {"weight biases", &w.biases}});
}

}  // namespace sanctum::ops::detail
