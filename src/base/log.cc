#include "base/log.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <nlohmann/json.hpp>

namespace sanctum::log {
namespace {
std::atomic<Level> g_level{Level::info};
std::atomic<Format> g_format{Format::text};
std::mutex g_mutex;

const char* level_name(Level level) {
  switch (level) {
    case Level::debug: return "debug";
    case Level::info: return "info";
    case Level::warn: return "warn";
    case Level::error: return "error";
  }
  return "info";
}

std::string timestamp() {
  using namespace std::chrono;
  auto now = system_clock::now();
  std::time_t t = system_clock::to_time_t(now);
  auto ms = duration_cast<milliseconds>(now.time_since_epoch()).count() % 1000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
                tm.tm_sec, static_cast<int>(ms));
  return buf;
}
}  // namespace

void set_level(Level level) { g_level = level; }
void set_format(Format format) { g_format = format; }
Level level() { return g_level; }

void write(Level lvl, std::string_view message, std::initializer_list<std::pair<std::string_view, std::string>> fields) {
  if (lvl < g_level.load()) return;
  std::string line;
  if (g_format.load() == Format::json) {
    nlohmann::json j;
    j["ts"] = timestamp();
    j["level"] = level_name(lvl);
    j["msg"] = std::string(message);
    for (const auto& [k, v] : fields) j[std::string(k)] = v;
    line = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    line = timestamp() + " " + level_name(lvl) + " " + std::string(message);
    for (const auto& [k, v] : fields) {
      line += " ";
      line += k;
      line += "=";
      line += v;
    }
  }
  line += "\n";
  std::lock_guard<std::mutex> lock(g_mutex);
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace sanctum::log
