#include "cli/log_flags.h"

#include "base/error.h"
#include "base/log.h"

namespace sanctum::cli {

void apply_log_flags(const Args& args) {
  const std::string format = args.get_or("log-format", "text");
  check(format == "text" || format == "json", ErrorKind::invalid_argument, "--log-format must be text or json");
  log::set_format(format == "json" ? log::Format::json : log::Format::text);
  const std::string level = args.get_or("log-level", "info");
  if (level == "debug") log::set_level(log::Level::debug);
  else if (level == "warn") log::set_level(log::Level::warn);
  else if (level == "error") log::set_level(log::Level::error);
  else check(level == "info", ErrorKind::invalid_argument, "--log-level must be debug, info, warn or error");
}

}  // namespace sanctum::cli
