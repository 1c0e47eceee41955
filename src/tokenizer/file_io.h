#pragma once
// Reads a whole file, transparently gunzipping names ending in ".gz". Throws Error naming the path.
#include <string>

namespace sanctum {

std::string read_maybe_gzip(const std::string& path);
bool file_exists(const std::string& path);

}  // namespace sanctum
