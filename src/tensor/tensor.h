#pragma once
// Tensor: a typed, strided view of memory on a device. Copying a Tensor copies the view, not the
// data; the storage stays alive while any view of it does. Up to kMaxDims dimensions.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>

#include "tensor/dtype.h"

namespace sanctum {

constexpr int kMaxDims = 4;

class Tensor {
 public:
  Tensor() = default;

  // Fresh zero-filled storage, contiguous, 64-byte aligned.
  static Tensor zeros(std::initializer_list<int64_t> shape, DType dtype, Device device = Device::cpu);
  static Tensor zeros_like_shape(const int64_t* shape, int ndim, DType dtype, Device device = Device::cpu);
  // A view of memory owned elsewhere (e.g. an mmapped checkpoint); `keepalive` holds the owner.
  static Tensor view_of(const void* data, std::initializer_list<int64_t> shape, DType dtype, std::shared_ptr<const void> keepalive,
                        Device device = Device::cpu);
  static Tensor view_of(const void* data, const int64_t* shape, int ndim, DType dtype, std::shared_ptr<const void> keepalive,
                        Device device = Device::cpu);

  explicit operator bool() const { return data_ != nullptr; }

  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  int ndim() const { return ndim_; }
  int64_t dim(int i) const { return shape_[static_cast<size_t>(i < 0 ? i + ndim_ : i)]; }
  int64_t stride(int i) const { return strides_[static_cast<size_t>(i < 0 ? i + ndim_ : i)]; }
  const int64_t* shape() const { return shape_.data(); }
  int64_t numel() const;
  size_t nbytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype_); }
  bool is_contiguous() const;
  std::string shape_string() const;  // "(2, 3, 4) bf16"

  template <class T>
  T* data() const {
    return static_cast<T*>(data_);
  }
  void* raw() const { return data_; }

  // Views (no copy).
  Tensor slice(int dim, int64_t begin, int64_t end) const;  // [begin, end) along dim
  Tensor row(int64_t i) const { return slice(0, i, i + 1).squeeze0(); }
  // A view of the same elements in another shape (one -1 allowed); a strided tensor reshapes where
  // its runs of contiguous dims split or merge into the new dims (e.g. a column slice into heads).
  Tensor reshape(std::initializer_list<int64_t> shape) const;
  Tensor squeeze0() const;  // drops a leading dim of size 1

  // Deep copy into fresh contiguous storage of the same dtype, on the same device or on `device`.
  Tensor clone() const;
  Tensor to(Device device) const;
  // Copies src's elements into this tensor (same shape and dtype; any devices; each side contiguous
  // or rows of a uniform stride with a contiguous last dim).
  void copy_from(const Tensor& src);

 private:
  void* data_ = nullptr;
  std::shared_ptr<const void> storage_;
  std::array<int64_t, kMaxDims> shape_{};
  std::array<int64_t, kMaxDims> strides_{};  // in elements
  int ndim_ = 0;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;

  // A contiguous tensor of this shape with no data yet (shape checked).
  static Tensor contiguous_header(const int64_t* shape, int ndim, DType dtype, Device device);
  void set_contiguous_strides();
  bool view_strides(Tensor& t) const;
};

// Host allocation aligned for SIMD (64 bytes), zero-filled.
std::shared_ptr<void> allocate_host(size_t bytes);

}  // namespace sanctum
