#include "ops/precision.h"

#include <atomic>
#include <cstdlib>
#include <string>

#include "base/error.h"
#include "ops/cpu/kernels.h"

namespace sanctum::ops {

namespace {
std::atomic<MatmulPrecision>& setting() {
  static std::atomic<MatmulPrecision> value{[] {
    const char* env = std::getenv("SANCTUM_MATMUL_PRECISION");
    return env == nullptr || *env == '\0' ? MatmulPrecision::f32 : parse_matmul_precision(env);
  }()};
  return value;
}
}  // namespace

std::atomic<bool> g_chosen{false};

void set_matmul_precision(MatmulPrecision precision) {
  setting().store(precision, std::memory_order_relaxed);
  g_chosen = true;
}
bool matmul_precision_chosen() {
  const char* env = std::getenv("SANCTUM_MATMUL_PRECISION");
  return g_chosen || (env != nullptr && *env != '\0');
}

MatmulPrecision matmul_precision() { return setting().load(std::memory_order_relaxed); }

const char* matmul_precision_name(MatmulPrecision precision) {
  switch (precision) {
    case MatmulPrecision::int8: return "int8";
    case MatmulPrecision::bf16: return "bf16";
    default: return "f32";
  }
}

MatmulPrecision default_cpu_matmul_precision() { return cpu::int8_vnni_available() ? MatmulPrecision::int8 : MatmulPrecision::f32; }

MatmulPrecision parse_matmul_precision(std::string_view name) {
  if (name == "f32") return MatmulPrecision::f32;
  if (name == "int8") return MatmulPrecision::int8;
  if (name == "bf16") return MatmulPrecision::bf16;
  throw Error(ErrorKind::invalid_argument,
              "[matmul] unknown matmul precision '" + std::string(name) + "' (SANCTUM_MATMUL_PRECISION): use f32, int8 or bf16");
}

}  // namespace sanctum::ops
