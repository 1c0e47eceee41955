#include <map>
#include <mutex>
#include <vector>

#include "ops/cuda/common.cuh"
#include "ops/cuda/host_values.cuh"
#include "tensor/device_memory.h"

namespace sanctum::ops::cuda {

namespace {
struct Slot {
  Tensor buffer;
  std::vector<int32_t> held;
};
struct Table {
  std::vector<float> host;
  Tensor device;
};
std::mutex g_mutex;
}  // namespace

const int32_t* device_ints(HostSlot slot, std::span<const int32_t> values) {
  static Slot slots[static_cast<int>(HostSlot::count)];
  std::lock_guard<std::mutex> lock(g_mutex);
  Slot& s = slots[static_cast<int>(slot)];
  const int64_t n = static_cast<int64_t>(values.size());
  if (!s.buffer || s.buffer.numel() < n) {
    s.buffer = Tensor::zeros({std::max<int64_t>(n, 4096)}, DType::i32, Device::cuda);
    s.held.clear();
  } else if (s.held.size() == values.size() && std::equal(values.begin(), values.end(), s.held.begin())) {
    return s.buffer.data<int32_t>();
  }
  device_memory::cuda_copy(s.buffer.raw(), values.data(), values.size() * sizeof(int32_t), device_memory::CopyKind::host_to_device);
  s.held.assign(values.begin(), values.end());
  return s.buffer.data<int32_t>();
}

const float* device_floats(HostFloatSlot slot, std::span<const float> values) {
  static Tensor buffers[static_cast<int>(HostFloatSlot::count)];
  std::lock_guard<std::mutex> lock(g_mutex);
  Tensor& b = buffers[static_cast<int>(slot)];
  const int64_t n = static_cast<int64_t>(values.size());
  if (!b || b.numel() < n) b = Tensor::zeros({std::max<int64_t>(n, 4096)}, DType::f32, Device::cuda);
  device_memory::cuda_copy(b.raw(), values.data(), values.size() * sizeof(float), device_memory::CopyKind::host_to_device);
  return b.data<float>();
}

const float* device_table(std::span<const float> values) {
  static std::map<const float*, Table> tables;
  std::lock_guard<std::mutex> lock(g_mutex);
  Table& t = tables[values.data()];
  if (!t.device || t.host.size() != values.size() || !std::equal(values.begin(), values.end(), t.host.begin())) {
    t.host.assign(values.begin(), values.end());
    t.device = Tensor::zeros({static_cast<int64_t>(std::max<size_t>(values.size(), 1))}, DType::f32, Device::cuda);
    device_memory::cuda_copy(t.device.raw(), values.data(), values.size() * sizeof(float), device_memory::CopyKind::host_to_device);
  }
  return t.device.data<float>();
}

}  // namespace sanctum::ops::cuda
