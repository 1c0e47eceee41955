#include "cli/device_flags.h"

#include "base/error.h"
#include "ops/kv_format.h"
#include "ops/precision.h"
#include "tensor/device_memory.h"

namespace sanctum::cli {

namespace {
// Every dtype runs on both devices.
void apply_kv_cache_dtype(const Args& args) {
  if (args.has(kKvCacheDtypeFlag)) ops::set_kv_cache_dtype(ops::parse_kv_cache_dtype(*args.get(kKvCacheDtypeFlag)));
  else if (!ops::kv_cache_dtype_chosen()) ops::set_kv_cache_dtype(kDefaultKvCacheDtype);
}
}  // namespace

Device apply_device_flags(const Args& args) {
  const std::string name = args.get_or(kDeviceFlag, "cpu");
  check(name == "cpu" || name == "cuda", ErrorKind::invalid_argument, "--device must be cpu or cuda, got '" + name + "'");
  apply_kv_cache_dtype(args);
  const long long limit = args.get_int(kGpuMemoryLimitFlag, 0);
  check(limit >= 0, ErrorKind::invalid_argument, "--gpu-memory-limit-mb must be >= 0 (0: no limit)");
  if (name == "cpu") {
    check(!args.has(kGpuMemoryLimitFlag), ErrorKind::invalid_argument, "--gpu-memory-limit-mb needs --device cuda");
    if (!ops::matmul_precision_chosen()) ops::set_matmul_precision(ops::default_cpu_matmul_precision());
    return Device::cpu;
  }
  check(device_memory::cuda_available(), ErrorKind::unsupported, "--device cuda: " + device_memory::cuda_unavailable_reason());
  device_memory::set_cuda_memory_limit(static_cast<size_t>(limit) << 20);
  if (!ops::matmul_precision_chosen()) ops::set_matmul_precision(ops::MatmulPrecision::bf16);
  return Device::cuda;
}

Tuning tuning_from_flags(const Args& args) {
  Tuning tuning = Tuning::from_environment();
  for (const std::string& spec : args.get_all(kTuneFlag)) tuning.apply(spec, "--tune");
  return tuning;
}

}  // namespace sanctum::cli
