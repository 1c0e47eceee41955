#pragma once
// --device cpu|cuda, --gpu-memory-limit-mb and --tune, shared by the subcommands that load a model.
#include <string>

#include "base/tuning.h"
#include "cli/args.h"
#include "ops/kv_format.h"
#include "tensor/dtype.h"

namespace sanctum::cli {

// The flag names, for Args' value-flag lists.
inline constexpr const char* kDeviceFlag = "device";
inline constexpr const char* kGpuMemoryLimitFlag = "gpu-memory-limit-mb";
inline constexpr const char* kTuneFlag = "tune";
inline constexpr const char* kKvCacheDtypeFlag = "kv-cache-dtype";
inline constexpr const char* kDeviceUsage = "[--device cpu|cuda] [--gpu-memory-limit-mb N] [--tune KEY=VALUE,...]";

// Parses the flags (cpu when absent), applies the GPU memory cap, and unless a matmul precision was
// chosen (--matmul-precision or the environment) picks the device's fast one: bf16 tensor-core prefill
// on cuda, int8 activations on a CPU with VNNI (ops::default_cpu_matmul_precision). Sets the KV cache
// dtype from --kv-cache-dtype (or SANCTUM_KV_CACHE_DTYPE), else kDefaultKvCacheDtype.
// Throws Error(invalid_argument) for an unknown device or dtype, Error(unsupported) when cuda is not
// usable.
Device apply_device_flags(const Args& args);

// The KV cache dtype when neither --kv-cache-dtype nor SANCTUM_KV_CACHE_DTYPE names one, on either
// device: bf16, half of f32's bytes with logits within bf16 rounding of f32's; on an H100 its decode
// runs at 0.99x f32's speed at 512 tokens of context and 1.02-1.04x at 16k (bench/RESULTS.md).
inline constexpr ops::KvCacheDtype kDefaultKvCacheDtype = ops::KvCacheDtype::bf16;

// The model's tuning: the defaults, then SANCTUM_TUNE, then --tune (see sanctum --help-tuning).
// Throws Error(invalid_argument) naming an unknown knob or a bad value.
Tuning tuning_from_flags(const Args& args);

}  // namespace sanctum::cli
