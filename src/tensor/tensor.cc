#include "tensor/tensor.h"

#include <cstdlib>
#include <cstring>

#include "base/error.h"
#include "tensor/device_memory.h"

namespace sanctum {

std::shared_ptr<void> allocate_host(size_t bytes) {
  size_t rounded = (bytes + 63) / 64 * 64;
  if (rounded == 0) rounded = 64;
  void* p = std::aligned_alloc(64, rounded);
  if (!p) fail(ErrorKind::io, "out of memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded);
  return std::shared_ptr<void>(p, [](void* q) { std::free(q); });
}

namespace {
void check_shape(const int64_t* shape, int ndim) {
  SANCTUM_CHECK(ndim >= 0 && ndim <= kMaxDims, ErrorKind::invalid_argument, "tensor rank must be 0.." + std::to_string(kMaxDims));
  for (int i = 0; i < ndim; ++i) check(shape[i] >= 0, ErrorKind::invalid_argument, "negative tensor dimension");
}
}  // namespace

Tensor Tensor::contiguous_header(const int64_t* shape, int ndim, DType dtype, Device device) {
  check_shape(shape, ndim);
  Tensor t;
  t.ndim_ = ndim;
  for (int i = 0; i < ndim; ++i) t.shape_[static_cast<size_t>(i)] = shape[i];
  t.dtype_ = dtype;
  t.device_ = device;
  t.set_contiguous_strides();
  return t;
}

Tensor Tensor::zeros_like_shape(const int64_t* shape, int ndim, DType dtype, Device device) {
  Tensor t = contiguous_header(shape, ndim, dtype, device);
  auto mem = device == Device::cuda ? device_memory::cuda_allocate(t.nbytes()) : allocate_host(t.nbytes());
  t.data_ = mem.get();
  t.storage_ = std::move(mem);
  return t;
}

Tensor Tensor::zeros(std::initializer_list<int64_t> shape, DType dtype, Device device) {
  return zeros_like_shape(shape.begin(), static_cast<int>(shape.size()), dtype, device);
}

Tensor Tensor::view_of(const void* data, const int64_t* shape, int ndim, DType dtype, std::shared_ptr<const void> keepalive,
                       Device device) {
  Tensor t = contiguous_header(shape, ndim, dtype, device);
  t.data_ = const_cast<void*>(data);
  t.storage_ = std::move(keepalive);
  return t;
}

Tensor Tensor::view_of(const void* data, std::initializer_list<int64_t> shape, DType dtype, std::shared_ptr<const void> keepalive,
                       Device device) {
  return view_of(data, shape.begin(), static_cast<int>(shape.size()), dtype, std::move(keepalive), device);
}

int64_t Tensor::numel() const {
  if (ndim_ == 0 && data_ == nullptr) return 0;  // an undefined tensor holds nothing
  int64_t n = 1;
  for (int i = 0; i < ndim_; ++i) n *= shape_[static_cast<size_t>(i)];
  return n;
}

void Tensor::set_contiguous_strides() {
  int64_t s = 1;
  for (int i = ndim_ - 1; i >= 0; --i) {
    strides_[static_cast<size_t>(i)] = s;
    s *= shape_[static_cast<size_t>(i)];
  }
}

bool Tensor::is_contiguous() const {
  int64_t s = 1;
  for (int i = ndim_ - 1; i >= 0; --i) {
    if (shape_[static_cast<size_t>(i)] != 1 && strides_[static_cast<size_t>(i)] != s) return false;
    s *= shape_[static_cast<size_t>(i)];
  }
  return true;
}

std::string Tensor::shape_string() const {
  std::string s = "(";
  for (int i = 0; i < ndim_; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape_[static_cast<size_t>(i)]);
  }
  if (ndim_ == 1) s += ",";
  s += ") ";
  s += dtype_name(dtype_);
  return s;
}

Tensor Tensor::slice(int dim, int64_t begin, int64_t end) const {
  if (dim < 0) dim += ndim_;
  SANCTUM_CHECK(dim >= 0 && dim < ndim_, ErrorKind::invalid_argument, "slice: dim out of range for " + shape_string());
  auto d = static_cast<size_t>(dim);
  SANCTUM_CHECK(0 <= begin && begin <= end && end <= shape_[d], ErrorKind::invalid_argument,
                "slice [" + std::to_string(begin) + ", " + std::to_string(end) + ") out of range for " + shape_string());
  Tensor t = *this;
  t.shape_[d] = end - begin;
  t.data_ = static_cast<char*>(data_) + begin * strides_[d] * static_cast<int64_t>(dtype_size(dtype_));
  return t;
}

Tensor Tensor::squeeze0() const {
  SANCTUM_CHECK(ndim_ >= 1 && shape_[0] == 1, ErrorKind::invalid_argument, "squeeze0 needs a leading dim of 1, got " + shape_string());
  Tensor t = *this;
  for (int i = 0; i + 1 < ndim_; ++i) {
    t.shape_[static_cast<size_t>(i)] = shape_[static_cast<size_t>(i + 1)];
    t.strides_[static_cast<size_t>(i)] = strides_[static_cast<size_t>(i + 1)];
  }
  t.ndim_ = ndim_ - 1;
  return t;
}

Tensor Tensor::reshape(std::initializer_list<int64_t> shape) const {
  SANCTUM_CHECK(static_cast<int>(shape.size()) <= kMaxDims, ErrorKind::invalid_argument, "reshape: too many dims");
  Tensor t = *this;
  t.ndim_ = static_cast<int>(shape.size());
  int64_t known = 1;
  int infer = -1;
  int i = 0;
  for (int64_t s : shape) {
    if (s == -1) {
      SANCTUM_CHECK(infer < 0, ErrorKind::invalid_argument, "reshape: more than one -1");
      infer = i;
    } else {
      known *= s;
    }
    t.shape_[static_cast<size_t>(i++)] = s;
  }
  if (infer >= 0) {
    SANCTUM_CHECK(known > 0 && numel() % known == 0, ErrorKind::invalid_argument, "reshape: cannot infer dim for " + shape_string());
    t.shape_[static_cast<size_t>(infer)] = numel() / known;
  }
  SANCTUM_CHECK(t.numel() == numel(), ErrorKind::invalid_argument, "reshape: element count differs from " + shape_string());
  if (is_contiguous() || numel() == 0) {
    t.set_contiguous_strides();
    return t;
  }
  SANCTUM_CHECK(view_strides(t), ErrorKind::invalid_argument,
                "reshape: " + shape_string() + " is strided in a way no view of shape " + t.shape_string() + " can follow");
  return t;
}

// Strides for t's shape over this tensor's elements, where a view exists: the old dims fall into
// runs laid out contiguously among themselves (stride i = stride i+1 * size i+1), and each run must
// be exactly a run of new dims, which then take strides within it. E.g. columns [0, 8) of a (4, 16)
// tensor viewed as (4, 2, 4): strides (16, 4, 1).
bool Tensor::view_strides(Tensor& t) const {
  int nd = t.ndim_ - 1;  // next new dim to place, from the innermost
  int64_t base = strides_[static_cast<size_t>(ndim_ - 1)], old_run = 1;
  for (int od = ndim_ - 1; od >= 0; --od) {
    old_run *= shape_[static_cast<size_t>(od)];
    const bool run_ends = od == 0 || (shape_[static_cast<size_t>(od - 1)] != 1 && strides_[static_cast<size_t>(od - 1)] != old_run * base);
    if (!run_ends) continue;
    int64_t new_run = 1;
    while (nd >= 0 && (new_run < old_run || t.shape_[static_cast<size_t>(nd)] == 1)) {
      t.strides_[static_cast<size_t>(nd)] = new_run * base;
      new_run *= t.shape_[static_cast<size_t>(nd)];
      --nd;
    }
    if (new_run != old_run) return false;
    if (od > 0) {
      base = strides_[static_cast<size_t>(od - 1)];
      old_run = 1;
    }
  }
  return nd < 0;
}

namespace {
// A tensor as rows of one stride with a contiguous last dim: (rows, row_elems, stride_elems).
struct RowLayout {
  int64_t rows = 0, row_elems = 0, stride = 0;
};
bool row_layout(const Tensor& t, RowLayout& out) {
  if (t.ndim() == 0) return false;
  const int n = t.ndim();
  if (t.dim(-1) > 1 && t.stride(-1) != 1) return false;
  out.row_elems = t.dim(-1);
  out.rows = out.row_elems > 0 ? t.numel() / out.row_elems : 0;
  if (n == 1) {
    out.stride = out.row_elems;
    return true;
  }
  // Leading dims must collapse into one uniform stride.
  out.stride = t.stride(n - 2);
  int64_t expect = t.stride(n - 2) * t.dim(n - 2);
  for (int i = n - 3; i >= 0; --i) {
    if (t.dim(i) != 1 && t.stride(i) != expect) return false;
    expect = t.stride(i) * t.dim(i);
  }
  return true;
}

device_memory::CopyKind copy_kind(Device dst, Device src) {
  if (dst == Device::cuda && src == Device::cuda) return device_memory::CopyKind::device_to_device;
  return dst == Device::cuda ? device_memory::CopyKind::host_to_device : device_memory::CopyKind::device_to_host;
}
}  // namespace

void Tensor::copy_from(const Tensor& src) {
  SANCTUM_CHECK(ndim_ == src.ndim_ && numel() == src.numel() && dtype_ == src.dtype_, ErrorKind::invalid_argument,
                "copy_from: " + src.shape_string() + " into " + shape_string());
  for (int i = 0; i < ndim_; ++i)
    SANCTUM_CHECK(shape_[static_cast<size_t>(i)] == src.shape_[static_cast<size_t>(i)], ErrorKind::invalid_argument,
                  "copy_from: " + src.shape_string() + " into " + shape_string());
  if (numel() == 0) return;
  if (device_ == Device::cpu && src.device_ == Device::cpu) {
    if (is_contiguous() && src.is_contiguous()) {
      std::memcpy(data_, src.data_, nbytes());
      return;
    }
    Tensor tmp = src.clone();
    SANCTUM_CHECK(is_contiguous(), ErrorKind::unsupported, "copy_from: the destination must be contiguous on cpu");
    std::memcpy(data_, tmp.data_, nbytes());
    return;
  }
  const auto kind = copy_kind(device_, src.device_);
  if (is_contiguous() && src.is_contiguous()) {
    if (kind == device_memory::CopyKind::host_to_device && nbytes() >= (size_t{1} << 20))
      device_memory::cuda_upload(data_, src.data_, nbytes());
    else device_memory::cuda_copy(data_, src.data_, nbytes(), kind);
    return;
  }
  RowLayout d, s;
  SANCTUM_CHECK(row_layout(*this, d) && row_layout(src, s), ErrorKind::unsupported,
                "copy_from: cannot copy " + src.shape_string() + " across devices with this striding");
  const size_t es = dtype_size(dtype_);
  device_memory::cuda_copy_2d(data_, static_cast<size_t>(d.stride) * es, src.data_, static_cast<size_t>(s.stride) * es,
                              static_cast<size_t>(d.row_elems) * es, static_cast<size_t>(d.rows), kind);
}

Tensor Tensor::to(Device device) const {
  Tensor t = zeros_like_shape(shape_.data(), ndim_, dtype_, device);
  t.copy_from(*this);
  return t;
}

Tensor Tensor::clone() const {
  if (device_ != Device::cpu) return to(device_);
  Tensor t = zeros_like_shape(shape_.data(), ndim_, dtype_, device_);
  size_t es = dtype_size(dtype_);
  if (is_contiguous()) {
    std::memcpy(t.data_, data_, nbytes());
    return t;
  }
  // Generic strided copy, innermost dim at a time.
  int64_t inner = ndim_ > 0 ? shape_[static_cast<size_t>(ndim_ - 1)] : 1;
  int64_t outer = inner > 0 ? numel() / inner : 0;
  auto* dst = static_cast<char*>(t.data_);
  for (int64_t o = 0; o < outer; ++o) {
    int64_t rem = o, offset = 0;
    for (int i = ndim_ - 2; i >= 0; --i) {
      offset += (rem % shape_[static_cast<size_t>(i)]) * strides_[static_cast<size_t>(i)];
      rem /= shape_[static_cast<size_t>(i)];
    }
    const char* src = static_cast<const char*>(data_) + offset * static_cast<int64_t>(es);
    int64_t inner_stride = ndim_ > 0 ? strides_[static_cast<size_t>(ndim_ - 1)] : 1;
    for (int64_t j = 0; j < inner; ++j)
      std::memcpy(dst + (o * inner + j) * static_cast<int64_t>(es), src + j * inner_stride * static_cast<int64_t>(es), es);
  }
  return t;
}

}  // namespace sanctum
