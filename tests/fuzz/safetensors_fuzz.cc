// Fuzzes the safetensors header parser: any bytes must either parse into entries that lie inside the
// data section, or throw sanctum::Error. Anything else (crash, other exception, sanitizer report) is a bug.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "base/error.h"
#include "weights/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    sanctum::SafetensorsHeader h = sanctum::parse_safetensors_header(data, size, "fuzz.safetensors");
    for (const auto& e : h.entries) {
      // The parser promised these; break loudly if it lied.
      if (e.begin > e.end || e.end > h.data_size || h.data_offset + h.data_size != size) std::abort();
      uint64_t bytes = sanctum::dtype_size(e.dtype);
      for (int64_t d : e.shape) bytes *= static_cast<uint64_t>(d);
      if (bytes != e.end - e.begin) std::abort();
      // Touch the first and last byte of each tensor so ASan checks the range.
      if (e.end > e.begin) {
        volatile uint8_t first = data[h.data_offset + e.begin], last = data[h.data_offset + e.end - 1];
        (void)first;
        (void)last;
      }
    }
  } catch (const sanctum::Error&) {
  }
  return 0;
}
