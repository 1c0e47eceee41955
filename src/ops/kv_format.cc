#include "ops/kv_format.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "base/error.h"

namespace sanctum::ops {

namespace {
std::atomic<KvCacheDtype>& setting() {
  static std::atomic<KvCacheDtype> value{[] {
    const char* env = std::getenv("SANCTUM_KV_CACHE_DTYPE");
    return env == nullptr || *env == '\0' ? KvCacheDtype::f32 : parse_kv_cache_dtype(env);
  }()};
  return value;
}
std::atomic<bool> g_chosen{false};

int64_t blocks_of(int64_t head_dim) { return (head_dim + kKvBlock - 1) / kKvBlock; }
}  // namespace

KvFormat key_format(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::bf16: return KvFormat::bf16;
    case KvCacheDtype::q8:
    case KvCacheDtype::q4v: return KvFormat::q8;
    default: return KvFormat::f32;
  }
}

KvFormat value_format(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::bf16: return KvFormat::bf16;
    case KvCacheDtype::q8: return KvFormat::q8;
    case KvCacheDtype::q4v: return KvFormat::q4;
    default: return KvFormat::f32;
  }
}

const char* kv_cache_dtype_name(KvCacheDtype dtype) {
  switch (dtype) {
    case KvCacheDtype::bf16: return "bf16";
    case KvCacheDtype::q8: return "q8";
    case KvCacheDtype::q4v: return "q4v";
    default: return "f32";
  }
}

KvCacheDtype parse_kv_cache_dtype(std::string_view name) {
  if (name == "f32") return KvCacheDtype::f32;
  if (name == "bf16") return KvCacheDtype::bf16;
  if (name == "q8") return KvCacheDtype::q8;
  if (name == "q4v") return KvCacheDtype::q4v;
  throw Error(ErrorKind::invalid_argument,
              "unknown KV cache dtype '" + std::string(name) + "' (--kv-cache-dtype, SANCTUM_KV_CACHE_DTYPE): use f32, bf16, q8 or q4v");
}

void set_kv_cache_dtype(KvCacheDtype dtype) {
  setting().store(dtype, std::memory_order_relaxed);
  g_chosen = true;
}

KvCacheDtype kv_cache_dtype() { return setting().load(std::memory_order_relaxed); }

bool kv_cache_dtype_chosen() {
  const char* env = std::getenv("SANCTUM_KV_CACHE_DTYPE");
  return g_chosen || (env != nullptr && *env != '\0');
}

size_t kv_row_bytes(KvFormat format, int64_t kv_heads, int64_t head_dim) {
  const int64_t b = blocks_of(head_dim);
  int64_t per_head = 0;
  switch (format) {
    case KvFormat::f32: per_head = 4 * head_dim; break;
    case KvFormat::bf16: per_head = 2 * head_dim; break;
    case KvFormat::q8: per_head = head_dim + 2 * b; break;
    case KvFormat::q4: per_head = 16 * b + 4 * b; break;
  }
  return static_cast<size_t>(kv_heads * per_head);
}

KvRows KvRows::slice_rows(int64_t begin, int64_t end) const {
  KvRows r{data.slice(0, begin, end), scales ? scales.slice(0, begin, end) : Tensor{}, format, head_dim};
  return r;
}

KvRows KvRows::zeros(int64_t rows, int64_t kv_heads, int64_t head_dim, KvFormat format, Device device) {
  const int64_t b = blocks_of(head_dim);
  KvRows r;
  r.format = format;
  r.head_dim = head_dim;
  switch (format) {
    case KvFormat::f32: r.data = Tensor::zeros({rows, kv_heads, head_dim}, DType::f32, device); break;
    case KvFormat::bf16: r.data = Tensor::zeros({rows, kv_heads, head_dim}, DType::bf16, device); break;
    case KvFormat::q8:
      r.data = Tensor::zeros({rows, kv_heads, head_dim}, DType::u8, device);
      r.scales = Tensor::zeros({rows, kv_heads, b}, DType::bf16, device);
      break;
    case KvFormat::q4:
      r.data = Tensor::zeros({rows, kv_heads, 16 * b}, DType::u8, device);
      r.scales = Tensor::zeros({rows, kv_heads, 2 * b}, DType::bf16, device);
      break;
  }
  return r;
}

}  // namespace sanctum::ops
