#pragma once
// Minimal structured logging to stderr: text lines by default, JSON lines with set_log_format(json).
#include <string>
#include <string_view>

namespace sanctum::log {

enum class Level { debug = 0, info = 1, warn = 2, error = 3 };
enum class Format { text, json };

void set_level(Level level);
void set_format(Format format);
Level level();

// Writes one line: time, level, message and optional key=value fields (already formatted pairs).
void write(Level level, std::string_view message, std::initializer_list<std::pair<std::string_view, std::string>> fields = {});

inline void debug(std::string_view m, std::initializer_list<std::pair<std::string_view, std::string>> f = {}) { write(Level::debug, m, f); }
inline void info(std::string_view m, std::initializer_list<std::pair<std::string_view, std::string>> f = {}) { write(Level::info, m, f); }
inline void warn(std::string_view m, std::initializer_list<std::pair<std::string_view, std::string>> f = {}) { write(Level::warn, m, f); }
inline void error(std::string_view m, std::initializer_list<std::pair<std::string_view, std::string>> f = {}) { write(Level::error, m, f); }

}  // namespace sanctum::log
