// libFuzzer target for the manifest parser: any bytes either parse into entries whose paths are
// normalized, relative and inside the directory, or throw sanctum::Error. Nothing else may happen.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

#include "base/error.h"
#include "security/manifest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    sanctum::security::Manifest m = sanctum::security::parse_manifest(text, "fuzz");
    std::set<std::string> seen;
    for (const auto& e : m.entries) {
      const std::string& p = e.path;
      bool bad = p.empty() || p.front() == '/' || p.back() == '/' || p.find("//") != std::string::npos || p == ".." ||
                 p.rfind("../", 0) == 0 || p.find("/../") != std::string::npos ||
                 (p.size() >= 3 && p.compare(p.size() - 3, 3, "/..") == 0) || p.find('\n') != std::string::npos ||
                 p.find('\0') != std::string::npos || !seen.insert(p).second;
      if (bad) std::abort();  // the parser let an unsafe or duplicate path through
    }
    // Formatting and re-parsing is the identity on entries.
    auto again = sanctum::security::parse_manifest(sanctum::security::format_manifest(m.entries), "fuzz-roundtrip");
    if (again.entries.size() != m.entries.size()) std::abort();
    for (size_t i = 0; i < m.entries.size(); ++i)
      if (again.entries[i].path != m.entries[i].path || again.entries[i].digest != m.entries[i].digest) std::abort();
  } catch (const sanctum::Error&) {
  }
  return 0;
}
