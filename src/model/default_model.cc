#include "model/default_model.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include "base/error.h"

namespace sanctum {

namespace fs = std::filesystem;

std::string default_model_dir() {
  std::vector<fs::path> candidates;
  std::error_code ec;
  const char* env = std::getenv("SANCTUM_DEFAULT_MODEL");
  if (env && *env) {
    candidates.emplace_back(env);  // an explicit choice: no fallback behind it
  } else {
    const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
    if (!ec) {
      const fs::path root = exe.parent_path().parent_path();
      candidates.push_back(root / "models/default/mlx-4bit");
      candidates.push_back(root / "share/sanctum/models/default/mlx-4bit");
    }
    candidates.emplace_back(SANCTUM_SOURCE_DEFAULT_MODEL);
  }
  std::string tried;
  for (const auto& c : candidates) {
    if (fs::exists(c / "config.json", ec)) return c.string();
    tried += (tried.empty() ? "" : ", ") + c.string();
  }
  fail(ErrorKind::not_found,
       "no --model given and the default model was not found (tried " + tried + "); pass --model DIR or set SANCTUM_DEFAULT_MODEL");
}

}  // namespace sanctum
