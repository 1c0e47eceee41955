#pragma once
// The chat page's files (src/server/ui/www), compiled into the binary by cmake/embed_ui.cmake.
#include <span>
#include <string_view>

namespace sanctum::server::ui {

struct Asset {
  std::string_view name;          // "index.html", "app.js": the path under /ui/
  std::string_view content_type;  // from the extension
  std::string_view body;
  std::string_view etag;  // a quoted prefix of the file's SHA-256, the same across builds of the same file
};

// Every embedded file, sorted by name.
std::span<const Asset> assets();

}  // namespace sanctum::server::ui
